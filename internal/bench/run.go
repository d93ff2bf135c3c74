package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	mathrand "math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/heraldhooks/herald/internal/client"
	"github.com/heraldhooks/herald/internal/heraldproc"
)

const (
	// maxFailedCalls stops the sending after this many failed ingest
	// calls: past it the run measures failures, not Herald.
	maxFailedCalls = 100
	// callTimeout bounds one ingest call.
	callTimeout = time.Minute
	// cleanupTimeout bounds the deletion of the endpoints a run created on
	// a database that outlives it, with cleanupPerEndpoint more for each.
	cleanupTimeout     = 2 * time.Minute
	cleanupPerEndpoint = 5 * time.Millisecond
	// maxErrorText bounds how much of a failed answer is quoted.
	maxErrorText = 300
)

// run is one bench run in progress.
type run struct {
	o      Options
	base   string // r.api's base URL
	apiKey string
	api    *client.Client
	child  *child // nil with --server
	hc     *http.Client
	tally  *Tally
	recv   *receiver
	check  *bodyCheck
	// created are the endpoint ids made, to delete when the data outlives
	// the run; epNum maps each to its number (as text, ready for a key).
	created []string
	epNum   map[string]string
	// idleCreated and hangCreated are the idle and hanging endpoints
	// made, to delete likewise.
	idleCreated, hangCreated []string
	// probe reads the database for a soak or --idle; nil when not needed
	// or not known (a --server's database).
	probe *probe
	// payload is every event's payload; bodies[g] is one event for
	// endpoint group g, as JSON.
	payload []byte
	bodies  [][]byte
	// limit is the most events this run sends.
	limit int64

	// What the senders counted (see EventCounts).
	sent, acceptedN, failedN, failedCalls, mismatches atomic.Int64
	// firstErrText is the first failed call, written once, read after the
	// senders are done.
	firstErr     sync.Once
	firstErrText string
	// calls are the round trips of the accepted ingest calls.
	calls callTimes
	// What the hanging endpoints' sender counted (hang.go).
	hangSent, hangAccepted, hangFailed atomic.Int64
}

// Run performs one run as o describes and returns its report. If ctx ends
// early, sending stops, the drain is skipped, and the partial report comes
// back with ctx's error. A run that stops because ingest calls keep
// failing also returns its report with an error.
func Run(ctx context.Context, o Options) (rep *Report, err error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	o = o.withDefaults()
	if o.Progress != nil {
		// The progress lines, the soak's rows and the creation of idle
		// endpoints write from goroutines of their own.
		o.Progress = &lockedWriter{w: o.Progress}
	}
	r := &run{o: o}
	defer func() { err = errors.Join(err, r.close()) }()
	if err := r.start(ctx); err != nil {
		return nil, err
	}
	if err := r.setup(ctx); err != nil {
		return nil, err
	}
	idleEps, err := r.createIdle(ctx)
	if err != nil {
		return nil, err
	}
	if err := r.createHanging(ctx); err != nil {
		return nil, err
	}
	var idle *IdleReport
	if o.Idle > 0 {
		if idle, err = r.measureIdle(ctx); err != nil {
			return nil, err
		}
	}
	if o.Events == 0 && o.Duration == 0 { // --idle alone: no load
		rep = r.baseReport()
		if r.child != nil {
			err = r.child.failed()
		}
	} else if rep, err = r.measure(ctx); rep == nil {
		return nil, err
	}
	rep.IdleEndpoints, rep.Idle = idleEps, idle
	if idle != nil {
		rep.Notes = append(rep.Notes, noteIdle)
	}
	return rep, err
}

// start brings up the Herald to measure (or checks the given one) and the
// receiver.
func (r *run) start(ctx context.Context) error {
	o := r.o
	conns := o.Connections + 4
	if o.IdleEndpoints > 0 || o.HangingEndpoints > 0 {
		conns = max(conns, IdleWorkers+4)
	}
	r.hc = &http.Client{
		Timeout: callTimeout,
		Transport: &http.Transport{
			MaxIdleConns:        conns,
			MaxIdleConnsPerHost: conns,
			MaxConnsPerHost:     conns,
			IdleConnTimeout:     time.Minute,
			DisableCompression:  true,
		},
	}
	base := o.Server
	r.apiKey = o.APIKey
	if o.Server == "" {
		c, err := spawn(ctx, o.Binary, o.DB, o.ServeArgs)
		if err != nil {
			return err
		}
		r.child, base, r.apiKey = c, c.url, c.apiKey
	}
	api, err := client.New(base, r.apiKey, client.Options{HTTPClient: r.hc, UserAgent: "herald-bench"})
	if err != nil {
		return fmt.Errorf("--server: %w", err)
	}
	r.api, r.base = api, api.BaseURL()
	if r.child != nil && (o.Soak > 0 || o.Idle > 0 || isPostgres(r.child.dsn)) {
		p, err := openProbe(ctx, r.child.dsn)
		if err != nil {
			return err
		}
		r.probe = p
	}

	r.limit = int64(o.Events)
	if o.Duration > 0 {
		r.limit = int64(MaxEvents / o.Fanout)
		if o.Rate > 0 {
			r.limit = min(r.limit, int64(o.Rate*o.Duration.Seconds())+1)
		}
	}
	// Room for every expected delivery up front, so the maps do not grow
	// while the run is measured; a run bounded only by time guesses.
	expected := r.limit * int64(o.Fanout)
	if o.Duration > 0 && o.Rate == 0 {
		expected = 1 << 20
	}
	r.tally = NewTally(int(expected))
	r.payload = Payload(o.PayloadSize)
	if o.PayloadKind == PayloadOrder {
		r.payload = OrderPayload(o.PayloadSize)
	}
	if o.Verify {
		r.check = &bodyCheck{payload: r.payload, secrets: make(map[string]string, o.Endpoints)}
	}
	recv, err := startReceiver(r.tally, r.check, o.ReceiverDelay)
	if err != nil {
		return err
	}
	r.recv = recv
	return nil
}

// orderWords fill the note of an OrderPayload.
var orderWords = strings.Fields(`please leave the parcel at the door ring twice if nobody answers
	gift wrap for birthday deliver after six call before arrival fragile glass handle with care
	second floor left side code entry buzzer back entrance reception desk office hours monday
	friday weekend thanks again order number reference invoice company address billing`)

// OrderPayload returns a JSON object of exactly size bytes (at least
// MinPayloadSize): an order as a shop sends it, with a customer, line
// items and a note of words, cut to size. Its numbers and words come from
// a fixed seed, so every run sends the same bytes; it compresses as such
// JSON does (zstd: to about two fifths), where Payload's x's vanish.
func OrderPayload(size int) []byte {
	rng := mathrand.New(mathrand.NewPCG(1, 2))
	var b strings.Builder
	fmt.Fprintf(&b, `{"id":"ord_%010d","object":"order","status":"paid","currency":"eur","created":%d,`+
		`"customer":{"id":"cus_%08d","email":"c%d@example.com"},"items":[`,
		rng.IntN(1e10), 1700000000+rng.IntN(1e7), rng.IntN(1e8), rng.IntN(1e6))
	for i := 0; b.Len() < size/2; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"sku":"SKU-%06d","quantity":%d,"unit_amount":%d,"tax_rate":"0.%02d"}`,
			rng.IntN(1e6), 1+rng.IntN(9), 100+rng.IntN(99900), rng.IntN(30))
	}
	b.WriteString(`],"note":"`)
	for b.Len() < size {
		b.WriteString(orderWords[rng.IntN(len(orderWords))])
		b.WriteByte(' ')
	}
	s := b.String() // at least size long, the note cut below
	if strings.Index(s, `"note":"`)+len(`"note":"`)+2 > size {
		return Payload(size) // too small for an order
	}
	return []byte(s[:size-2] + `"}`)
}

// Payload returns a JSON object of exactly size bytes (at least
// MinPayloadSize): {"pad":"xxx…"}.
func Payload(size int) []byte {
	b := make([]byte, 0, size)
	b = append(b, `{"pad":"`...)
	for len(b) < size-2 {
		b = append(b, 'x')
	}
	return append(b, `"}`...)
}

// setup creates the endpoints, over as many connections as the load will
// use, and prepares one event body per endpoint group.
func (r *run) setup(ctx context.Context) error {
	o := r.o
	var raw [4]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return fmt.Errorf("make a run id: %w", err)
	}
	runID := hex.EncodeToString(raw[:])
	consumer := func(g int) string { return "bench-" + runID + "-c" + strconv.Itoa(g%o.Consumers) }
	eventType := func(g int) string { return "bench.g" + strconv.Itoa(g) }

	api := r.api
	r.epNum = make(map[string]string, o.Endpoints)
	var (
		mu       sync.Mutex
		next     atomic.Int64
		wg       sync.WaitGroup
		errOnce  sync.Once
		setupErr error
	)
	for range min(o.Connections, o.Endpoints) {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= o.Endpoints || ctx.Err() != nil {
					return
				}
				g := i / o.Fanout
				url, c, desc := r.recv.url(i), consumer(g), "herald bench"
				params := &client.EndpointParams{
					ConsumerID: &c, URL: &url, Description: &desc, EventTypes: []string{eventType(g)},
				}
				if o.MaxInFlight > 0 {
					params.MaxInFlight = &o.MaxInFlight
				}
				ep, err := api.EndpointCreate(ctx, params)
				if err != nil {
					errOnce.Do(func() { setupErr = explainSetup(err) })
					next.Store(int64(o.Endpoints)) // stop the others
					return
				}
				num := strconv.Itoa(i)
				mu.Lock()
				r.created = append(r.created, ep.ID)
				r.epNum[ep.ID] = num
				mu.Unlock()
				if r.check != nil {
					r.check.setSecret(num, ep.Secret)
				}
			}
		})
	}
	wg.Wait()
	if setupErr != nil {
		return setupErr
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("create endpoints: %w", err)
	}

	groups := o.Endpoints / o.Fanout
	r.bodies = make([][]byte, groups)
	for g := range groups {
		head, err := json.Marshal(struct {
			ConsumerID string `json:"consumer_id"`
			EventType  string `json:"event_type"`
		}{consumer(g), eventType(g)})
		if err != nil {
			return fmt.Errorf("encode an event: %w", err)
		}
		body := append(head[:len(head)-1:len(head)-1], `,"payload":`...)
		body = append(body, r.payload...)
		r.bodies[g] = append(body, '}')
	}
	return nil
}

// explainSetup adds what to do to the usual reasons endpoint creation
// fails against a running Herald.
func explainSetup(err error) error {
	var apiErr *client.Error
	if errors.As(err, &apiErr) {
		switch {
		case apiErr.IsUnauthorized():
			return fmt.Errorf("create endpoints: the API key was refused (%s); give the server's key with --api-key", apiErr.Message)
		case apiErr.Code == "invalid_url":
			return fmt.Errorf("create endpoints: %w (the bench's receiver is on 127.0.0.1: run that Herald with --allow-private-networks)", err)
		}
	}
	return fmt.Errorf("create endpoints: %w", err)
}

// measure sends the load, waits for the deliveries, and reports.
func (r *run) measure(ctx context.Context) (*Report, error) {
	o := r.o
	attempts0, haveAttempts := r.scrapeAttempts(ctx)
	cpu0, cpuErr := r.childCPU()
	self0, selfErr := procCPU("self")
	var pg0 pgUsage
	pgErr := errNoPostgres
	if r.probe != nil && r.probe.pg != nil {
		pg0, pgErr = r.probe.pgUsage(ctx)
	}

	start := time.Now()
	var soaker *soaker
	if o.Soak > 0 {
		soaker = r.startSoak(start)
	}
	stopProgress := r.progress(start)
	hangCtx, stopHanging := context.WithCancel(ctx)
	var hanging sync.WaitGroup
	if o.HangingEndpoints > 0 {
		hanging.Go(func() { r.sendHanging(hangCtx, start) })
	}
	sendErr := r.send(ctx, start)
	stopHanging()
	hanging.Wait()
	sendEnd := time.Now()
	drained := r.drain(ctx, o.DrainTimeout)
	end := time.Now()
	stopProgress()

	cpu1, cpuErr1 := r.childCPU()
	var pg1 pgUsage
	if pgErr == nil {
		pg1, pgErr = r.probe.pgUsage(ctx)
	}
	var rss int64
	var rssErr error
	if r.child != nil {
		rss, rssErr = heraldproc.PeakRSS(r.child.pid)
	}
	self1, selfErr1 := procCPU("self")
	counts := r.tally.Report()
	var attempts1 float64
	var haveAttempts1 bool
	if haveAttempts {
		attempts1, haveAttempts1 = r.settledAttempts(context.WithoutCancel(ctx), attempts0, counts.Delivered)
	}

	var soak *SoakReport
	if soaker != nil {
		soak = soaker.finish(ctx)
	}

	rep := r.baseReport()
	rep.Soak = soak
	rep.Hanging = r.hangingReport()
	rep.Events = EventCounts{
		Sent: r.sent.Load(), Accepted: r.acceptedN.Load(), Failed: r.failedN.Load(),
		FirstError: r.firstErrText, FanoutMismatches: r.mismatches.Load(),
		SendSeconds: sendEnd.Sub(start).Seconds(),
	}
	rep.Deliveries = DeliveryCounts{
		Expected: counts.Expected, Delivered: counts.Delivered, Missing: counts.Missing,
		Duplicated: counts.Duplicated, Repeats: counts.Repeats,
		Unexpected:          counts.Unexpected + r.recv.strange.Load(),
		ArrivedBeforeAccept: counts.ArrivedBeforeAccept,
		Drained:             drained, DrainSeconds: end.Sub(sendEnd).Seconds(),
		MissingSample: counts.MissingSample,
	}
	rep.LatencyMS = LatencyMS{
		Samples: counts.Latency.Samples,
		P50:     millis(counts.Latency.P50), P90: millis(counts.Latency.P90),
		P99: millis(counts.Latency.P99), Max: millis(counts.Latency.Max),
	}
	rep.IngestCallMS = r.calls.summary()
	rep.Interrupted = ctx.Err() != nil
	rep.Notes = []string{noteLatency, noteIngestCall, noteWindow, noteShared}
	if r.check != nil {
		rep.Deliveries.InvalidSignatures = ptr(r.check.invalid.Load())
		rep.Deliveries.ChangedBodies = ptr(r.check.changed.Load())
	}
	if s := rep.Events.SendSeconds; s > 0 {
		rep.Events.PerSecond = float64(rep.Events.Accepted) / s
	}
	var window float64
	if !counts.LastArrival.IsZero() {
		from := counts.FirstAccept
		if from.IsZero() || counts.FirstArrival.Before(from) {
			from = counts.FirstArrival
		}
		window = counts.LastArrival.Sub(from).Seconds()
	}
	rep.Deliveries.WindowSeconds = window
	if window > 0 {
		rep.Deliveries.PerSecond = float64(counts.Delivered) / window
	}
	if haveAttempts && haveAttempts1 {
		rep.Attempts = AttemptCounts{Total: attempts1 - attempts0, Source: attemptsMetric}
	} else {
		rep.Attempts = AttemptCounts{Total: float64(counts.Delivered), Source: "deliveries"}
	}
	if window > 0 {
		rep.Attempts.PerSecond = rep.Attempts.Total / window
	}
	if r.child != nil && cpuErr == nil && cpuErr1 == nil {
		cpu := (cpu1 - cpu0).Seconds()
		rep.Herald.CPUSeconds = ptr(cpu)
		if wall := end.Sub(start).Seconds(); wall > 0 {
			rep.Herald.CoresBusy = ptr(cpu / wall)
		}
		if cpu > 0 {
			rep.Herald.DeliveriesPerCPUSecond = ptr(float64(counts.Delivered) / cpu)
		}
	}
	if pgErr == nil {
		rep.Herald.PostgresCPUSeconds = ptr(pg1.cpuSince(pg0).Seconds())
		wal := pg1.walSince(pg0)
		rep.Herald.PostgresWALBytes = ptr(wal)
		if counts.Delivered > 0 {
			rep.Herald.WALBytesPerDelivery = ptr(float64(wal) / float64(counts.Delivered))
		}
	} else if !errors.Is(pgErr, errNoPostgres) {
		rep.Herald.PostgresError = pgErr.Error()
	}
	if h := &rep.Herald; h.CPUSeconds != nil && counts.Delivered > 0 {
		total := *h.CPUSeconds
		if h.PostgresCPUSeconds != nil {
			total += *h.PostgresCPUSeconds
		}
		h.CPUMSPerDelivery = ptr(1000 * total / float64(counts.Delivered))
	}
	if r.child != nil && rssErr == nil {
		rep.Herald.PeakRSSBytes = ptr(rss)
	}
	if selfErr == nil && selfErr1 == nil {
		rep.BenchCPUSeconds = ptr((self1 - self0).Seconds())
	}

	if err := ctx.Err(); err != nil {
		return rep, fmt.Errorf("bench interrupted: %w", err)
	}
	if r.child != nil {
		if err := r.child.failed(); err != nil {
			return rep, err
		}
	}
	return rep, sendErr
}

// baseReport is a report of what was asked for and of the target, the
// whole of it for a run without load.
func (r *run) baseReport() *Report {
	o := r.o
	rep := &Report{
		Target: Target{Mode: "server", URL: r.base},
		Load: Load{
			Endpoints: o.Endpoints, Consumers: o.Consumers, Fanout: o.Fanout, Events: o.Events,
			DurationSeconds: o.Duration.Seconds(), Rate: o.Rate, Batch: o.Batch,
			Connections: o.Connections, PayloadSize: o.PayloadSize, PayloadKind: o.PayloadKind, Verify: o.Verify,
			ReceiverDelayMS: float64(o.ReceiverDelay) / float64(time.Millisecond), MaxInFlight: o.MaxInFlight,
			IdleEndpoints: o.IdleEndpoints, IdleSeconds: o.Idle.Seconds(), SoakSeconds: o.Soak.Seconds(),
		},
		Notes: []string{noteShared},
	}
	if r.child != nil {
		rep.Target.Mode, rep.Target.DB, rep.Target.ServeArgs = "spawn", r.child.db, o.ServeArgs
	}
	return rep
}

func (r *run) childCPU() (time.Duration, error) {
	if r.child == nil {
		return 0, errors.New("not a spawned herald")
	}
	return procCPU(r.child.pid)
}

// drain waits until every accepted delivery has arrived, timeout passes,
// or ctx ends, and says whether all arrived.
func (r *run) drain(ctx context.Context, timeout time.Duration) bool {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		if accepted, arrived, _ := r.tally.Progress(); arrived >= accepted {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-deadline.C:
			return false
		case <-tick.C:
		}
	}
}

// progress prints a line every ProgressEvery until the returned function
// is called.
func (r *run) progress(start time.Time) (stop func()) {
	return r.every(func(t time.Time) {
		expected, arrived, _ := r.tally.Progress()
		fmt.Fprintf(r.o.Progress, "bench: %4.0fs  events sent %d, accepted %d, failed %d; deliveries arrived %d of %d\n",
			t.Sub(start).Seconds(), r.sent.Load(), r.acceptedN.Load(), r.failedN.Load(), arrived, expected)
	})
}

// close deletes the endpoints a run made on a database that outlives it,
// stops the receiver and the spawned Herald.
func (r *run) close() error {
	var errs []error
	discarded := r.child != nil && r.child.tmp != "" // the database goes with the child
	if made := slices.Concat(r.created, r.idleCreated, r.hangCreated); !discarded && len(made) > 0 {
		if err := r.deleteEndpoints(made); err != nil {
			errs = append(errs, err)
		}
	}
	if r.probe != nil {
		errs = append(errs, r.probe.close())
	}
	if r.recv != nil {
		errs = append(errs, r.recv.close())
	}
	if r.child != nil {
		errs = append(errs, r.child.stop())
	}
	if r.hc != nil {
		r.hc.CloseIdleConnections()
	}
	return errors.Join(errs...)
}

// deleteEndpoints removes the endpoints ids the run created (their events
// and deliveries stay, as for any deleted endpoint), with as many calls at
// once as were used to make them, printing progress when there are
// thousands.
func (r *run) deleteEndpoints(ids []string) error {
	ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout+time.Duration(len(ids))*cleanupPerEndpoint)
	defer cancel()
	api := r.api
	var next, done, failed atomic.Int64
	var wg sync.WaitGroup
	workers := r.o.Connections
	if len(r.idleCreated)+len(r.hangCreated) > 0 {
		workers = max(workers, IdleWorkers)
	}
	stop := func() {}
	if len(ids) >= 1000 {
		stop = r.every(func(time.Time) {
			fmt.Fprintf(r.o.Progress, "bench: deleted %d/%d endpoints\n", done.Load(), len(ids))
		})
	}
	for range min(workers, len(ids)) {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= len(ids) {
					return
				}
				if err := api.EndpointDelete(ctx, ids[i]); err != nil {
					failed.Add(1)
				}
				done.Add(1)
			}
		})
	}
	wg.Wait()
	stop()
	if n := failed.Load(); n > 0 {
		return fmt.Errorf("delete the bench's endpoints: %d of %d could not be deleted", n, len(ids))
	}
	return nil
}

// lockedWriter serializes writes to w, one line at a time.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
