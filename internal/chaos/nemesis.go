package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sort"
	"sync"
	"time"
)

// ProcessFault is a fault of Herald's own processes or of its database.
type ProcessFault string

// The process faults.
const (
	// KillNode sends SIGKILL to a node and starts it again after For.
	KillNode ProcessFault = "kill"
	// FreezeNode sends SIGSTOP to a node and SIGCONT after For, which is
	// longer than any lease it holds: its work is claimed by others.
	FreezeNode ProcessFault = "freeze"
	// CrashDB stops PostgreSQL in immediate mode and starts it after For.
	CrashDB ProcessFault = "crash_db"
	// Failover kills the PostgreSQL primary (immediate stop) and promotes
	// its standby at once; after For, the old primary is made a standby of
	// the new one from a fresh base backup. The nodes are not told: they
	// must find the new primary by themselves.
	Failover ProcessFault = "failover"
)

// Nemesis is one planned fault: what, on what, when (from the start of the
// load) and for how long.
type Nemesis struct {
	At     time.Duration `json:"at"`
	For    time.Duration `json:"for"`
	Kind   string        `json:"kind"`   // a ProcessFault, or "receiver:<FaultKind>"
	Target string        `json:"target"` // a node name, "postgres", or an endpoint name
}

// Window is a fault as it happened, in wall time, for tracing duplicates.
type Window struct {
	Nemesis
	Start time.Time `json:"start"`
	End   time.Time `json:"end"`
	Err   string    `json:"error,omitempty"`
}

// planOptions shape a schedule.
type planOptions struct {
	load     time.Duration // how long the load runs; faults end before it does
	nodes    []string      // the nodes that may be killed or frozen
	db       bool          // PostgreSQL may be crashed
	failover bool          // PostgreSQL has a standby to promote
	hostile  string        // the endpoint whose receiver misbehaves
	// hostileTimeout is that endpoint's timeout: its failures end that
	// long after they start.
	hostileTimeout time.Duration
	freezeFor      time.Duration // longer than the longest lease
}

// plan draws the schedule of a run from seed: the same seed and options
// give the same schedule, so a failing run can be repeated exactly.
//
// Faults come one at a time. A receiver fault never overlaps a process
// fault: a kill of the serve node or a database crash stops the load, and
// the hostile receiver's failures that complete meanwhile, with no success
// between them, would open the endpoint's circuit breaker for minutes. The
// gap after a receiver fault outlasts the hostile endpoint's timeout for
// the same reason.
//
// The first round takes one process fault of each kind (kill, freeze,
// crash, failover), on targets drawn at random, and every receiver fault,
// shuffled together, the failover within the first half of the round so
// that the round's end does not drop it; later rounds draw from every
// (kind, target) pair and every receiver fault, shuffled, each once per
// round. So a short run meets
// every kind once.
func plan(seed uint64, o planOptions) []Nemesis {
	rnd := rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
	between := func(lo, hi time.Duration) time.Duration {
		return lo + time.Duration(rnd.Int64N(int64(hi-lo)+1))
	}
	warmup := 2 * time.Second
	// Leave the last part of the load free of new faults, so that what
	// started recovers while the load still runs.
	end := o.load - 2*time.Second

	// Durations and gaps; short runs (under five minutes) take shorter
	// ones, so that they still meet every kind of fault.
	short := o.load < 5*time.Minute
	killLo, killHi := 200*time.Millisecond, 3*time.Second
	crashLo, crashHi := 500*time.Millisecond, 5*time.Second
	rcvLo, rcvHi := time.Second, 3*time.Second
	procGapLo, procGapHi := time.Second, 4*time.Second
	rcvGapLo, rcvGapHi := o.hostileTimeout+time.Second, o.hostileTimeout+3*time.Second
	if short {
		killLo, killHi = 200*time.Millisecond, 1500*time.Millisecond
		crashLo, crashHi = 500*time.Millisecond, 2500*time.Millisecond
		rcvLo, rcvHi = 600*time.Millisecond, 900*time.Millisecond
		procGapLo, procGapHi = 500*time.Millisecond, time.Second
		rcvGapLo, rcvGapHi = o.hostileTimeout+100*time.Millisecond, o.hostileTimeout+400*time.Millisecond
	}

	var all []Nemesis // every (kind, target), durations drawn when used
	var first []Nemesis
	for _, kind := range []ProcessFault{KillNode, FreezeNode, CrashDB, Failover} {
		var of []Nemesis
		targets := o.nodes
		if kind == Failover {
			targets = nil
			if o.db && o.failover {
				targets = []string{"postgres"}
			}
		}
		if kind == CrashDB {
			targets = nil
			if o.db {
				// The database is the one every node shares: crash it as
				// often as the nodes together are killed.
				targets = []string{"postgres", "postgres"}
			}
		}
		for _, t := range targets {
			of = append(of, Nemesis{Kind: string(kind), Target: t})
		}
		all = append(all, of...)
		if len(of) > 0 {
			first = append(first, of[rnd.IntN(len(of))])
		}
	}
	if o.hostile != "" {
		for _, f := range AllFaults {
			n := Nemesis{Kind: "receiver:" + string(f), Target: o.hostile}
			all = append(all, n)
			first = append(first, n)
		}
	}
	shuffle := func(ns []Nemesis) []Nemesis {
		ns = append([]Nemesis(nil), ns...)
		rnd.Shuffle(len(ns), func(i, j int) { ns[i], ns[j] = ns[j], ns[i] })
		return ns
	}

	var out []Nemesis
	bag := shuffle(first)
	for i, n := range bag {
		if n.Kind == string(Failover) {
			j := rnd.IntN(len(bag)/2 + 1)
			bag[i], bag[j] = bag[j], bag[i]
			break
		}
	}
	at := warmup
	for len(all) > 0 {
		if len(bag) == 0 {
			bag = shuffle(all)
		}
		n := bag[0]
		var gap time.Duration
		switch n.Kind {
		case string(KillNode):
			n.For, gap = between(killLo, killHi), between(procGapLo, procGapHi)
		case string(FreezeNode):
			n.For, gap = o.freezeFor, between(procGapLo, procGapHi)
		case string(CrashDB), string(Failover):
			n.For, gap = between(crashLo, crashHi), between(procGapLo, procGapHi)
		default:
			n.For, gap = between(rcvLo, rcvHi), between(rcvGapLo, rcvGapHi)
		}
		if at+n.For > end {
			break
		}
		bag = bag[1:]
		n.At = at
		out = append(out, n)
		at += n.For + gap
	}
	return out
}

// executor carries out a schedule against a cluster and a receiver.
type executor struct {
	cl  *cluster
	rcv *Receiver
	log func(string, ...any)

	mu        sync.Mutex
	windows   []Window
	failovers []FailoverReport
	// busy holds, for each target, a lock that a fault holds from its
	// start to its undoing: a fault whose turn comes while the one
	// before on the same target is still being undone (a database that
	// is slow to recover, say) waits for it rather than cut it short.
	busy map[string]*sync.Mutex
}

// target returns the lock of the faults on target t.
func (x *executor) target(t string) *sync.Mutex {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.busy == nil {
		x.busy = map[string]*sync.Mutex{}
	}
	if x.busy[t] == nil {
		x.busy[t] = &sync.Mutex{}
	}
	return x.busy[t]
}

// run carries out the schedule from start until its end or ctx's. Each
// fault runs in its own goroutine and always undoes itself (restart, thaw,
// database start, receiver back to normal), even when ctx ends first.
func (x *executor) run(ctx context.Context, start time.Time, sched []Nemesis) {
	var wg sync.WaitGroup
	defer wg.Wait()
	for _, n := range sched {
		wait := time.Until(start.Add(n.At))
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			x.apply(ctx, n)
		}()
	}
}

func (x *executor) apply(ctx context.Context, n Nemesis) {
	busy := x.target(n.Target)
	busy.Lock()
	defer busy.Unlock()
	w := Window{Nemesis: n, Start: time.Now()}
	hold := func() {
		select {
		case <-ctx.Done():
		case <-time.After(n.For):
		}
	}
	var err error
	switch n.Kind {
	case string(KillNode):
		nd := x.cl.node(n.Target)
		nd.kill()
		hold()
		// Start again on a context of its own: the node must come back
		// even when the load has ended.
		err = nd.start(context.Background())
	case string(FreezeNode):
		nd := x.cl.node(n.Target)
		nd.freeze()
		hold()
		nd.thaw()
	case string(CrashDB):
		err = x.cl.pg.crash(context.Background())
		hold()
		if serr := x.cl.pg.start(context.Background()); serr != nil {
			err = fmt.Errorf("%v; %w", err, serr)
		}
	case string(Failover):
		err = x.failover(ctx, n, hold)
	default:
		kind := FaultKind(n.Kind[len("receiver:"):])
		x.rcv.SetFault(n.Target, kind)
		hold()
		x.rcv.SetFault(n.Target, FaultNone)
	}
	w.End = time.Now()
	if err != nil {
		w.Err = err.Error()
		x.log("nemesis %s on %s: %v", n.Kind, n.Target, err)
	}
	x.mu.Lock()
	x.windows = append(x.windows, w)
	x.mu.Unlock()
}

// failover kills the primary and promotes the standby, watches every node
// come back to work, holds, and makes the old primary the new standby.
func (x *executor) failover(ctx context.Context, n Nemesis, hold func()) error {
	bg := context.Background()
	hc := &http.Client{Timeout: time.Second}
	base := make([]float64, len(x.cl.nodes))
	promoted, err := x.cl.pg.failover(bg, func() {
		for i, nd := range x.cl.nodes {
			base[i] = -1
			if v, err := workDone(bg, hc, nd.metrics); err == nil {
				base[i] = v
			}
		}
	})
	if err != nil {
		return err
	}
	rep := FailoverReport{Promoted: promoted, Recovered: map[string]float64{}}
	var wg sync.WaitGroup
	var mu sync.Mutex
	for i, nd := range x.cl.nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d, ok, interrupted := backToWork(bg, nd, promoted, base[i], recoveryLimit+5*time.Second)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case ok:
				rep.Recovered[nd.name] = d.Seconds()
			case interrupted:
				rep.Interrupted = append(rep.Interrupted, nd.name)
			default:
				rep.NotRecovered = append(rep.NotRecovered, nd.name)
			}
		}()
	}
	hold()
	wg.Wait()
	sort.Strings(rep.NotRecovered)
	sort.Strings(rep.Interrupted)
	x.log("failover: back to work after %v; not: %v", rep.Recovered, rep.NotRecovered)
	x.mu.Lock()
	x.failovers = append(x.failovers, rep)
	x.mu.Unlock()
	if err := x.cl.pg.rebuild(bg); err != nil {
		return fmt.Errorf("make the old primary a standby: %w", err)
	}
	return nil
}

func (x *executor) failoverReports() []FailoverReport {
	x.mu.Lock()
	defer x.mu.Unlock()
	return append([]FailoverReport(nil), x.failovers...)
}

func (x *executor) done() []Window {
	x.mu.Lock()
	defer x.mu.Unlock()
	out := append([]Window(nil), x.windows...)
	sort.Slice(out, func(i, j int) bool { return out[i].Start.Before(out[j].Start) })
	return out
}
