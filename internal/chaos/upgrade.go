package chaos

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strconv"
	"time"

	"github.com/heraldhooks/herald/internal/heraldproc"
	"github.com/heraldhooks/herald/internal/keyring"
)

// UpgradeConfig is one rolling upgrade under load: nodes of the previous
// release, then the current release's `herald migrate`, then the nodes
// replaced by current ones one at a time, on one PostgreSQL database.
type UpgradeConfig struct {
	// Old is the herald binary of the previous release; New the current.
	Old, New string
	// PGBin is the directory of PostgreSQL's initdb and pg_ctl; "" finds it.
	PGBin string
	// Phase is how long the load runs in each state of the cluster: all
	// old, old on the migrated schema, each replacement, all new.
	Phase time.Duration
	// Rate is the load, in events per second; Seed draws its mix.
	Rate float64
	Seed uint64
	// Drain bounds the wait, after the load, for every delivery.
	Drain time.Duration
	// Log receives progress lines; nil discards them.
	Log io.Writer
}

// UpgradeReport is what a rolling upgrade adds to its verdict.
type UpgradeReport struct {
	// WorkOnNewerSchema is, for each node of the previous release, the
	// events it ingested and deliveries it delivered between the current
	// release's migration and its replacement: each must be above 0.
	WorkOnNewerSchema map[string]float64 `json:"work_on_newer_schema"`
}

// Upgrade runs a rolling upgrade under load and returns its verdict, judged
// as a fault run's: lost 0, and every duplicate traced to a replacement (a
// node stopped mid-attempt, whose lease ran out).
func Upgrade(ctx context.Context, cfg UpgradeConfig) (*Verdict, error) {
	if cfg.Seed == 0 {
		cfg.Seed = uint64(time.Now().UnixNano())
	}
	if cfg.Rate <= 0 {
		cfg.Rate = 30
	}
	if cfg.Phase <= 0 {
		cfg.Phase = 3 * time.Second
	}
	if cfg.Drain <= 0 {
		cfg.Drain = time.Minute
	}
	logw := cfg.Log
	if logw == nil {
		logw = io.Discard
	}
	logw = &lockedWriter{w: logw}
	t0 := time.Now()
	logf := func(format string, args ...any) {
		fmt.Fprintf(logw, "[upgrade %6.1fs] %s\n", time.Since(t0).Seconds(), fmt.Sprintf(format, args...))
	}

	rcv, err := StartReceiver(ReceiverOptions{Seed: cfg.Seed, FlakyEndpoint: epFlaky})
	if err != nil {
		return nil, err
	}
	defer rcv.Close()
	pg, err := startPG(ctx, cfg.PGBin, logf)
	if err != nil {
		return nil, err
	}
	cl := &cluster{backend: BackendPostgres, pg: &pgSet{replication: ReplicationNone, log: logf, servers: []*pgCluster{pg}}}
	defer cl.close()
	var raw [18]byte
	_, _ = rand.Read(raw[:])
	cl.apiKey = "hk_chaos_" + hex.EncodeToString(raw[:])
	key, err := keyring.Generate("chaos")
	if err != nil {
		return nil, err
	}
	common := []string{
		"--db", cl.pg.URL(), "--allow-private-networks", "--encryption-key", key,
		"--poll-interval", "100ms", "--shutdown-timeout", "5s", "--log-level", "warn",
		"--lease-margin", leaseMargin.String(),
	}
	port, err := heraldproc.FreePort()
	if err != nil {
		return nil, err
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	cl.api = "http://" + addr
	mport, err := heraldproc.FreePort()
	if err != nil {
		return nil, err
	}
	maddr := "127.0.0.1:" + strconv.Itoa(mport)
	serveArgs := append([]string{"serve", "--addr", addr, "--api-key", cl.apiKey}, common...)
	workerArgs := append([]string{"worker", "--metrics-addr", maddr}, common...)
	newServe := func(bin string) *node { return newNode("serve", bin, serveArgs, cl.api+"/healthz", logf) }
	newWorker := func(bin string) *node {
		return newNode("worker", bin, workerArgs, "http://"+maddr+"/metrics", logf)
	}

	// The previous release: it makes the schema it knows.
	logf("starting the previous release (%s)", cfg.Old)
	serve, worker := newServe(cfg.Old), newWorker(cfg.Old)
	serve.metrics, worker.metrics = cl.api+"/metrics", worker.ready
	cl.nodes = []*node{serve, worker}
	for _, n := range cl.nodes {
		if err := n.start(ctx); err != nil {
			return nil, err
		}
	}
	var retired []*node
	eps, err := createEndpoints(ctx, cl, rcv)
	if err != nil {
		return nil, err
	}

	ld := newLoader(cl.api, cl.apiKey, "u"+strconv.FormatUint(cfg.Seed%1e6, 10), cfg.Rate, cfg.Seed)
	loadCtx, stopLoad := context.WithCancel(ctx)
	defer stopLoad()
	loadDone := make(chan struct{})
	go func() {
		defer close(loadDone)
		ld.loop(loadCtx)
	}()
	var windows []Window
	pause := func() error {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(cfg.Phase):
			return nil
		}
	}
	// replace stops a node of the previous release (SIGTERM: it finishes
	// or hands back what it holds) and starts the current one in its place.
	replace := func(i int, next *node) error {
		old := cl.nodes[i]
		w := Window{Nemesis: Nemesis{Kind: "upgrade", Target: old.name}, Start: time.Now()}
		old.stop()
		err := next.start(ctx)
		w.End = time.Now()
		if err != nil {
			w.Err = err.Error()
		}
		windows = append(windows, w)
		retired = append(retired, old)
		cl.nodes[i] = next
		logf("%s replaced by the current release in %s", old.name, w.End.Sub(w.Start).Round(time.Millisecond))
		return err
	}

	// What each node of the previous release has done (ingests plus
	// deliveries) when the migration has run, and how much more by its
	// replacement: it must keep working on the newer schema.
	report := &UpgradeReport{WorkOnNewerSchema: map[string]float64{}}
	before := map[string]float64{}
	hc := &http.Client{Timeout: 5 * time.Second}
	workOf := func(n *node) (float64, error) {
		v, err := workDone(ctx, hc, n.metrics)
		if err != nil {
			return 0, fmt.Errorf("read the metrics of %s: %w", n.name, err)
		}
		return v, nil
	}
	steps := []func() error{
		pause,
		func() error {
			out, err := exec.CommandContext(ctx, cfg.New, "migrate", "--db", cl.pg.URL(), "--encryption-key", key).CombinedOutput()
			if err != nil {
				return fmt.Errorf("herald migrate of the current release: %w\n%s", err, out)
			}
			logf("the current release migrated the schema under the previous release's nodes")
			for _, n := range cl.nodes {
				if before[n.name], err = workOf(n); err != nil {
					return err
				}
			}
			return nil
		},
		pause,
		func() error {
			for _, n := range cl.nodes {
				after, err := workOf(n)
				if err != nil {
					return err
				}
				report.WorkOnNewerSchema[n.name] = after - before[n.name]
			}
			return nil
		},
		func() error { return replace(1, newWorker(cfg.New)) },
		pause,
		func() error { return replace(0, newServe(cfg.New)) },
		pause,
	}
	for _, step := range steps {
		if err := step(); err != nil {
			stopLoad()
			<-loadDone
			return nil, err
		}
	}
	stopLoad()
	<-loadDone
	logf("load stopped: %d events sent; draining", ld.count())
	sent := ld.snapshot()
	drained, drainTime, breakerWaits := drain(ctx, cl, rcv, sent, eps, cfg.Drain, false, logf)

	v := judge(judgeInput{
		backend:   "upgrade",
		seed:      cfg.Seed,
		duration:  time.Since(t0),
		rate:      cfg.Rate,
		sent:      sent,
		arrivals:  rcv.Arrivals(),
		endpoints: eps,
		windows:   windows,
		strange:   rcv.Strange(),
		drained:   drained,
		drainTime: drainTime,
		slack:     2*endpointTimeout + leaseMargin,
	})
	v.Upgrade = report
	for _, n := range append(retired, cl.nodes...) {
		n.sampleMemory()
		r := n.report()
		r.Name += " (current)"
		if n.bin == cfg.Old {
			r.Name = n.name + " (previous)"
		}
		v.Nodes = append(v.Nodes, r)
	}
	if len(breakerWaits) > 0 {
		v.Examples["breaker_waited_for"] = breakerWaits
	}
	diagnose(ctx, cl, v)
	v.finish()
	logf("verdict: %s", v.Summary())
	return v, nil
}
