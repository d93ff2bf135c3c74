// Package chaos is Herald's fault harness (`make chaos`): it runs real
// `herald serve` and `herald worker` processes built from the tree, on
// SQLite or on a PostgreSQL cluster of its own, sends them a steady load,
// and meanwhile kills and freezes nodes, crashes the database and answers
// webhooks the way broken and hostile receivers do, on a schedule drawn
// from a seed. Once the faults have stopped and the queue has drained, it
// judges the run: no acknowledged event lost, no FIFO order broken, no
// rate limit exceeded, no node dead by itself; duplicates are counted and
// each is traced to a fault that cost a lease.
//
// Every loop is bounded in count and time, and all traffic stays on
// loopback.
package chaos

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/heraldhooks/herald/internal/client"
)

// Config is one run on one backend.
type Config struct {
	// Backend is BackendSQLite or BackendPostgres.
	Backend string
	// Herald is the herald binary the nodes run.
	Herald string
	// PGBin is the directory of PostgreSQL's initdb and pg_ctl; "" finds it.
	PGBin string
	// Replication is what PostgreSQL runs as: ReplicationSync (the
	// default: a primary and a synchronous standby, and the failover
	// nemesis among the faults), ReplicationAsync (the same with an
	// asynchronous standby: the verdict reports what the failover lost
	// rather than fail on it) or ReplicationNone (one server).
	Replication string
	// StandbyLag holds what the primary sends its standby this long, as a
	// network between zones does (0: none). With an asynchronous standby,
	// that much of the primary's last moments is lost with it.
	StandbyLag time.Duration
	// Duration is how long the load and the faults run (the drain after
	// it is not counted).
	Duration time.Duration
	// Rate is the load, in events per second (each goes to every endpoint).
	Rate float64
	// Seed draws the fault schedule and the load's mix; 0 picks one, which
	// the verdict prints.
	Seed uint64
	// Drain bounds the wait, after the load, for every acknowledged
	// delivery to arrive.
	Drain time.Duration
	// Log receives progress lines; nil discards them.
	Log io.Writer
}

// The endpoints of a run, by name (the path on the receiver).
const (
	epPlain   = "plain"
	epFIFO    = "fifo"
	epRated   = "rated"
	epFlaky   = "flaky"
	epHostile = "hostile"
)

const (
	// leaseMargin is what the nodes run with: leases expire seconds after
	// a node stops, so a run sees many lost and retaken.
	leaseMargin = 2 * time.Second
	// endpointTimeout is the timeout of the well-behaved endpoints; the
	// hostile one has hostileTimeout, and the receiver's hang and trickle
	// outlast it.
	endpointTimeout = 2 * time.Second
	hostileTimeout  = time.Second
	// freezeFor outlasts the longest lease: 2 x endpointTimeout + leaseMargin.
	freezeFor = 2*endpointTimeout + leaseMargin + 2*time.Second
	// The rated endpoint's token bucket.
	ratedPerSecond = 40
	ratedBurst     = 10
)

// retrySchedule gives each delivery enough attempts, close together, to
// outlast every fault of a run: a receiver fault spends at most two
// attempts, and waiting for a node or the database spends none.
var retrySchedule = []string{"0s", "200ms", "500ms", "1s", "2s", "3s", "5s", "5s", "5s", "5s", "5s", "5s"}

// Run runs the harness once on one backend and returns its verdict. An
// error means the run could not be made (a binary missing, a node that
// would not start), not that Herald failed it: that is in the verdict.
func Run(ctx context.Context, cfg Config) (*Verdict, error) {
	if cfg.Seed == 0 {
		cfg.Seed = uint64(time.Now().UnixNano())
	}
	if cfg.Rate <= 0 {
		cfg.Rate = 30
	}
	if cfg.Drain <= 0 {
		cfg.Drain = 2 * time.Minute
	}
	logw := cfg.Log
	if logw == nil {
		logw = io.Discard
	}
	if _, ok := logw.(*lockedWriter); !ok {
		logw = &lockedWriter{w: logw}
	}
	t0 := time.Now()
	logf := func(format string, args ...any) {
		fmt.Fprintf(logw, "[%s %6.1fs] %s\n", cfg.Backend, time.Since(t0).Seconds(), fmt.Sprintf(format, args...))
	}
	if cfg.Backend != BackendSQLite && cfg.Backend != BackendPostgres {
		return nil, fmt.Errorf("backend %q is not %s or %s", cfg.Backend, BackendSQLite, BackendPostgres)
	}
	switch cfg.Replication {
	case "":
		cfg.Replication = ReplicationSync
	case ReplicationSync, ReplicationAsync, ReplicationNone:
	default:
		return nil, fmt.Errorf("replication %q is not %s, %s or %s", cfg.Replication, ReplicationSync, ReplicationAsync, ReplicationNone)
	}
	if cfg.Backend != BackendPostgres {
		cfg.Replication = ""
	}

	rcv, err := StartReceiver(ReceiverOptions{Seed: cfg.Seed, FlakyEndpoint: epFlaky})
	if err != nil {
		return nil, err
	}
	defer rcv.Close()

	logf("starting Herald on %s (seed %d)", cfg.Backend, cfg.Seed)
	cl, err := startCluster(ctx, clusterOptions{backend: cfg.Backend, herald: cfg.Herald, pgBin: cfg.PGBin, replication: cfg.Replication, standbyLag: cfg.StandbyLag, leaseMargin: leaseMargin, log: logf})
	if err != nil {
		return nil, err
	}
	defer cl.close()
	memCtx, stopMem := context.WithCancel(context.Background())
	defer stopMem()
	go cl.watchMemory(memCtx)

	eps, err := createEndpoints(ctx, cl, rcv)
	if err != nil {
		return nil, err
	}

	sched := plan(cfg.Seed, planOptions{
		load:           cfg.Duration,
		nodes:          cl.nodeNames(),
		db:             cfg.Backend == BackendPostgres,
		failover:       cfg.Backend == BackendPostgres && cfg.Replication != ReplicationNone,
		hostile:        epHostile,
		hostileTimeout: hostileTimeout,
		freezeFor:      freezeFor,
	})
	logf("load %.0f events/s for %s, %d faults planned", cfg.Rate, cfg.Duration, len(sched))
	ld := newLoader(cl.api, cl.apiKey, "c"+strconv.FormatUint(cfg.Seed%1e6, 10), cfg.Rate, cfg.Seed)
	x := &executor{cl: cl, rcv: rcv, log: logf}
	loadCtx, stopLoad := context.WithTimeout(ctx, cfg.Duration)
	defer stopLoad()
	start := time.Now()
	done := make(chan struct{})
	go func() {
		defer close(done)
		x.run(loadCtx, start, sched)
	}()
	ld.loop(loadCtx)
	<-done
	logf("load stopped: %d events sent; draining", ld.count())

	if err := cl.revive(ctx); err != nil {
		return nil, fmt.Errorf("start the nodes again for the drain: %w", err)
	}
	sent := ld.snapshot()
	failovers := x.failoverReports()
	// With an asynchronous standby, a failover may lose acknowledged
	// events: the drain cannot wait for them.
	lossy := cfg.Replication == ReplicationAsync && len(failovers) > 0
	drained, drainTime, breakerWaits := drain(ctx, cl, rcv, sent, eps, cfg.Drain, lossy, logf)
	stopMem()
	for _, n := range cl.nodes {
		n.sampleMemory()
	}

	v := judge(judgeInput{
		backend:   cfg.Backend,
		seed:      cfg.Seed,
		duration:  cfg.Duration,
		rate:      cfg.Rate,
		sent:      sent,
		arrivals:  rcv.Arrivals(),
		endpoints: eps,
		windows:   x.done(),
		planned:   sched,
		strange:   rcv.Strange(),
		drained:   drained,
		drainTime: drainTime,
		slack:     2*endpointTimeout + leaseMargin,
	})
	for _, n := range cl.nodes {
		v.Nodes = append(v.Nodes, n.report())
	}
	v.Replication, v.Failovers = cfg.Replication, failovers
	if len(breakerWaits) > 0 {
		v.Examples["breaker_waited_for"] = breakerWaits
	}
	diagnose(ctx, cl, v)
	v.finish()
	logf("verdict: %s", v.Summary())
	return v, nil
}

// endpointSpec is one endpoint of a run.
type endpointSpec struct {
	Name string
	ID   string
	FIFO bool
	// Rate and Burst of its token bucket; 0 when it has none.
	Rate  float64
	Burst int
}

// createEndpoints makes the run's endpoints, all of consumer "chaos" and
// subscribed to every event: plain, FIFO-ordered, rate-limited, flaky (it
// fails now and then, and is signed with the hmac-sha256 scheme) and
// hostile (its receiver misbehaves on the schedule).
func createEndpoints(ctx context.Context, cl *cluster, rcv *Receiver) ([]endpointSpec, error) {
	api, err := client.New(cl.api, cl.apiKey, client.Options{})
	if err != nil {
		return nil, err
	}
	var schedule []client.Duration
	for _, s := range retrySchedule {
		d, _ := time.ParseDuration(s)
		schedule = append(schedule, client.Duration(d))
	}
	specs := []endpointSpec{
		{Name: epPlain},
		{Name: epFIFO, FIFO: true},
		{Name: epRated, Rate: ratedPerSecond, Burst: ratedBurst},
		{Name: epFlaky},
		{Name: epHostile},
	}
	for i := range specs {
		sp := &specs[i]
		url := rcv.URL(sp.Name)
		timeout := client.Duration(endpointTimeout)
		if sp.Name == epHostile {
			timeout = client.Duration(hostileTimeout)
		}
		consumer := chaosConsumer
		p := &client.EndpointParams{
			ConsumerID: &consumer, URL: &url, EventTypes: []string{"*"},
			Timeout: &timeout, RetrySchedule: schedule,
		}
		if sp.FIFO {
			fifo := "fifo"
			p.Ordering = &fifo
		}
		if sp.Rate > 0 {
			p.RateLimit = &client.RateLimit{PerSecond: sp.Rate, Burst: sp.Burst}
		}
		scheme := "standard"
		if sp.Name == epFlaky {
			scheme = "hmac-sha256"
			secret := "chaos-hmac-secret-" + sp.Name + "-0123456789"
			p.SignatureScheme, p.Secret = &scheme, &secret
		}
		ep, err := api.EndpointCreate(ctx, p)
		if err != nil {
			return nil, fmt.Errorf("create endpoint %s: %w", sp.Name, err)
		}
		sp.ID = ep.ID
		rcv.SetSecret(sp.Name, scheme, ep.Secret)
	}
	return specs, nil
}

// drain waits, after the load, until every acknowledged event has been
// delivered to every endpoint and Herald has nothing pending or being
// delivered, or until limit. It reports whether it got there, how long it
// took, and the open breakers it waited for.
//
// A breaker may open during a run although the receiver never fails an
// endpoint 5 times in a row in the order requests arrive: Herald counts
// failures in the order it writes outcomes, which differs when many
// attempts to an endpoint run at once (a burst after a fault held the
// load, several nodes writing). Deliveries behind an open breaker are not
// lost, they wait for its probe (5 minutes on); so when limit comes while
// an endpoint's breaker is open, the drain waits for its probe and
// breakerSlack more, up to maxBreakerWait from its start, and says so.
//
// When lossy (a failover to an asynchronous standby), acknowledged events
// may be gone from the database: the drain ends once Herald has had
// nothing pending or being delivered, and nothing more arrived, for
// lossySettle.
func drain(ctx context.Context, cl *cluster, rcv *Receiver, sent []sentEvent, eps []endpointSpec, limit time.Duration, lossy bool, logf func(string, ...any)) (bool, time.Duration, []string) {
	start := time.Now()
	api, err := client.New(cl.api, cl.apiKey, client.Options{HTTPClient: &http.Client{Timeout: 5 * time.Second}})
	if err != nil {
		return false, 0, nil
	}
	want := 0
	for _, ev := range sent {
		if !ev.AckAt.IsZero() {
			want += len(eps)
		}
	}
	acked := make(map[string]bool, len(sent))
	for _, ev := range sent {
		if !ev.AckAt.IsZero() {
			acked[ev.CID] = true
		}
	}
	var waited []string
	deadline := time.NewTimer(limit)
	defer deadline.Stop()
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	lastLog := time.Now()
	var idleSince time.Time
	lastGot := -1
	for {
		got := deliveredPairs(rcv.Arrivals(), acked)
		if got >= want || lossy {
			st, err := api.Stats(ctx)
			idle := err == nil && st.Deliveries["pending"] == 0 && st.Deliveries["delivering"] == 0
			if idle && got >= want {
				logf("drained in %s: %d deliveries", time.Since(start).Round(time.Millisecond), got)
				return true, time.Since(start), waited
			}
			switch {
			case !idle || got != lastGot:
				idleSince, lastGot = time.Now(), got
			case time.Since(idleSince) >= lossySettle:
				logf("drained in %s: %d of %d deliveries; Herald has nothing left (asynchronous replication)", time.Since(start).Round(time.Millisecond), got, want)
				return true, time.Since(start), waited
			}
		}
		if time.Since(lastLog) > 5*time.Second {
			lastLog = time.Now()
			logf("draining: %d of %d deliveries arrived", got, want)
		}
		select {
		case <-ctx.Done():
			return false, time.Since(start), waited
		case <-deadline.C:
			until, open := openBreakers(ctx, api, eps)
			if !until.After(time.Now()) || until.After(start.Add(maxBreakerWait)) {
				// Every breaker closed, or a probe past due by breakerSlack,
				// or one too far off: Herald had its time.
				logf("not drained after %s: %d of %d deliveries arrived", time.Since(start).Round(time.Second), got, want)
				return false, time.Since(start), waited
			}
			for _, o := range open {
				if slices.Contains(waited, o) {
					continue
				}
				waited = append(waited, o)
				logf("not drained after %s: the drain waits for the breaker of %s", time.Since(start).Round(time.Second), o)
			}
			deadline.Reset(time.Until(until))
		case <-tick.C:
		}
	}
}

// The drain's wait for open breakers: breakerSlack after the last probe is
// due, and at most maxBreakerWait from the drain's start (a probe that
// failed would double the cooldown; the receiver fails nothing by then).
const (
	breakerSlack   = 30 * time.Second
	maxBreakerWait = 12 * time.Minute
)

// lossySettle is how long a lossy drain waits with Herald idle.
const lossySettle = 3 * time.Second

// openBreakers returns, for the endpoints of eps whose breaker is not
// closed, a line each naming the endpoint and its probe time, and the
// latest of those probe times plus breakerSlack; the zero time when every
// breaker is closed or one could not be read.
func openBreakers(ctx context.Context, api *client.Client, eps []endpointSpec) (time.Time, []string) {
	var until time.Time
	var open []string
	for _, sp := range eps {
		ep, err := api.EndpointGet(ctx, sp.ID)
		if err != nil {
			return time.Time{}, nil
		}
		h := ep.Health
		if h.BreakerState == "closed" {
			continue
		}
		if h.ProbeAt == nil {
			return time.Time{}, nil
		}
		open = append(open, fmt.Sprintf("%s (%s, %d failures in a row, probe at %s)", sp.Name, h.BreakerState, h.ConsecutiveFailures, h.ProbeAt.Format("15:04:05")))
		if t := h.ProbeAt.Add(breakerSlack); t.After(until) {
			until = t
		}
	}
	return until, open
}

// deliveredPairs counts the (event, endpoint) pairs of acknowledged events
// that the receiver took at least once.
func deliveredPairs(arrivals []Arrival, acked map[string]bool) int {
	seen := make(map[[2]string]bool)
	for _, a := range arrivals {
		if a.Delivered && acked[a.CID] {
			seen[[2]string{a.CID, a.Endpoint}] = true
		}
	}
	return len(seen)
}

// RunAll runs the harness on each backend at the same time, with the same
// settings, and returns the verdicts in the order of backends.
func RunAll(ctx context.Context, base Config, backends []string) ([]*Verdict, error) {
	if base.Log != nil {
		base.Log = &lockedWriter{w: base.Log}
	}
	vs := make([]*Verdict, len(backends))
	errs := make([]error, len(backends))
	var wg sync.WaitGroup
	for i, b := range backends {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cfg := base
			cfg.Backend = b
			v, err := Run(ctx, cfg)
			if err != nil {
				errs[i] = fmt.Errorf("%s: %w", b, err)
			}
			vs[i] = v
		}()
	}
	wg.Wait()
	var out []*Verdict
	for _, v := range vs {
		if v != nil {
			out = append(out, v)
		}
	}
	return out, errors.Join(errs...)
}

// MarshalVerdicts writes verdicts as indented JSON.
func MarshalVerdicts(vs []*Verdict) ([]byte, error) {
	return json.MarshalIndent(vs, "", "  ")
}

// diagnose adds to the verdict's examples what Herald says of the first
// lost deliveries: their state, their attempts and their endpoint's health,
// to start looking from.
func diagnose(ctx context.Context, cl *cluster, v *Verdict) {
	if len(v.lost) == 0 {
		return
	}
	api, err := client.New(cl.api, cl.apiKey, client.Options{HTTPClient: &http.Client{Timeout: 5 * time.Second}})
	if err != nil {
		return
	}
	for i, l := range v.lost {
		if i == maxExamples {
			break
		}
		page, err := api.DeliveryList(ctx, &client.DeliveryListParams{EventID: l.eventID, EndpointID: l.endpointID})
		if err != nil || len(page.Data) == 0 {
			v.Examples["lost_state"] = append(v.Examples["lost_state"], fmt.Sprintf("%s to %s: no delivery found (%v)", l.cid, l.endpoint, err))
			continue
		}
		d := page.Data[0]
		next := "-"
		if d.NextAttemptAt != nil {
			next = d.NextAttemptAt.Format("15:04:05.000")
		}
		line := fmt.Sprintf("%s to %s: %s %s, attempts %d, next %s, last %d %q, dead reason %q", l.cid, l.endpoint, d.ID, d.Status, d.AttemptCount, next, d.LastStatusCode, d.LastError, d.DeadReason)
		if atts, err := api.DeliveryAttempts(ctx, d.ID, client.ListOptions{}); err == nil {
			for _, a := range atts.Data {
				line += fmt.Sprintf("; #%d at %s %dms %d %q", a.Number, a.AttemptedAt.Format("15:04:05.000"), a.DurationMS, a.StatusCode, a.Error)
			}
		}
		if ep, err := api.EndpointGet(ctx, l.endpointID); err == nil {
			line += fmt.Sprintf("; endpoint enabled %t, breaker %s, %d failures in a row", ep.Enabled, ep.Health.BreakerState, ep.Health.ConsecutiveFailures)
		}
		v.Examples["lost_state"] = append(v.Examples["lost_state"], line)
	}
}

// lockedWriter serialises writes: the runs of RunAll, and the goroutines
// of one run, log to one writer.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
