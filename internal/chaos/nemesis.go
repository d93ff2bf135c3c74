package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
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
	load      time.Duration // how long the load runs; faults end before it does
	nodes     []string      // the nodes that may be killed or frozen
	db        bool          // PostgreSQL may be crashed
	hostile   string        // the endpoint whose receiver misbehaves
	freezeFor time.Duration // longer than the longest lease
}

// plan draws the schedule of a run from seed: the same seed and options
// give the same schedule, so a failing run can be repeated exactly. Two
// tracks run side by side: process faults one at a time with gaps between
// them, and receiver faults on the hostile endpoint. Each track cycles
// through all its kinds in a shuffled order, so a short run still meets
// every kind once when it is long enough.
func plan(seed uint64, o planOptions) []Nemesis {
	rnd := rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
	between := func(lo, hi time.Duration) time.Duration {
		return lo + time.Duration(rnd.Int64N(int64(hi-lo)+1))
	}
	var out []Nemesis
	warmup := 2 * time.Second
	// Leave the last part of the load free of new faults, so that what
	// started recovers while the load still runs.
	end := o.load - 2*time.Second

	type procKind struct {
		kind   ProcessFault
		target string
	}
	var kinds []procKind
	for _, n := range o.nodes {
		kinds = append(kinds, procKind{KillNode, n}, procKind{FreezeNode, n})
	}
	if o.db {
		// The database is the one every node shares: crash it as often as
		// the nodes together.
		kinds = append(kinds, procKind{CrashDB, "postgres"}, procKind{CrashDB, "postgres"})
	}
	// Short runs leave shorter gaps, so they still meet every kind.
	short := o.load < time.Minute
	gapLo, gapHi := time.Second, 4*time.Second
	rcvLo, rcvHi, rcvGapLo, rcvGapHi := time.Second, 3*time.Second, 500*time.Millisecond, 2*time.Second
	if short {
		gapLo, gapHi = 500*time.Millisecond, 1500*time.Millisecond
		rcvLo, rcvHi, rcvGapLo, rcvGapHi = 700*time.Millisecond, 1500*time.Millisecond, 300*time.Millisecond, time.Second
	}
	// The first round takes one fault of each kind (kill, freeze, crash),
	// on targets drawn at random; later rounds draw from every (kind,
	// target) pair, shuffled, each once per round.
	var bag []procKind
	var first []procKind
	for _, kind := range []ProcessFault{KillNode, FreezeNode, CrashDB} {
		var of []procKind
		for _, k := range kinds {
			if k.kind == kind {
				of = append(of, k)
			}
		}
		if len(of) > 0 {
			first = append(first, of[rnd.IntN(len(of))])
		}
	}
	rnd.Shuffle(len(first), func(i, j int) { first[i], first[j] = first[j], first[i] })
	bag = first
	at := warmup
	for len(kinds) > 0 {
		if len(bag) == 0 {
			bag = append(bag, kinds...)
			rnd.Shuffle(len(bag), func(i, j int) { bag[i], bag[j] = bag[j], bag[i] })
		}
		k := bag[0]
		var dur time.Duration
		switch k.kind {
		case KillNode:
			dur = between(200*time.Millisecond, 3*time.Second)
		case FreezeNode:
			dur = o.freezeFor
		case CrashDB:
			dur = between(500*time.Millisecond, 5*time.Second)
		}
		if at+dur > end {
			break
		}
		bag = bag[1:]
		out = append(out, Nemesis{At: at, For: dur, Kind: string(k.kind), Target: k.target})
		at += dur + between(gapLo, gapHi)
	}

	var faults []FaultKind
	at = warmup
	for o.hostile != "" {
		if len(faults) == 0 {
			faults = append(faults, AllFaults...)
			rnd.Shuffle(len(faults), func(i, j int) { faults[i], faults[j] = faults[j], faults[i] })
		}
		dur := between(rcvLo, rcvHi)
		if at+dur > end {
			break
		}
		out = append(out, Nemesis{At: at, For: dur, Kind: "receiver:" + string(faults[0]), Target: o.hostile})
		faults = faults[1:]
		at += dur + between(rcvGapLo, rcvGapHi)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].At < out[j].At })
	return out
}

// executor carries out a schedule against a cluster and a receiver.
type executor struct {
	cl  *cluster
	rcv *Receiver
	log func(string, ...any)

	mu      sync.Mutex
	windows []Window
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

func (x *executor) done() []Window {
	x.mu.Lock()
	defer x.mu.Unlock()
	out := append([]Window(nil), x.windows...)
	sort.Slice(out, func(i, j int) bool { return out[i].Start.Before(out[j].Start) })
	return out
}
