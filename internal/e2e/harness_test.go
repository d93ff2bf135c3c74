// Package e2e runs the whole of Herald in process, on real SQLite and
// PostgreSQL databases, against real HTTP receivers (httptest), with a test
// clock so retry schedules of hours run without sleeping.
package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"github.com/heraldhooks/herald/internal/store/pgstore/pgtest"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhooks/herald/internal/app"
	"github.com/heraldhooks/herald/internal/clock"
	"github.com/heraldhooks/herald/internal/config"
	"github.com/heraldhooks/herald/internal/dispatch"
	"github.com/heraldhooks/herald/internal/sender"
	"github.com/heraldhooks/herald/internal/store"
	"github.com/heraldhooks/herald/internal/store/sqlitestore/sqlitetest"
	"github.com/heraldhooks/herald/internal/syncbuf"
)

const testAPIKey = "test-api-key-0123456789"

// testEncryptionKey is the key ring of the PostgreSQL nodes, which need
// one; SQLite nodes make their key file beside the database, as by default.
const testEncryptionKey = "e2e:KnP8mrxIJP0Oag7gPt2/AkikZU+K+ZkF+cvCYK/hKDw="

// encryptionKeyFor is the --encryption-key a node on db is given.
func encryptionKeyFor(db string) string {
	if strings.HasPrefix(db, "postgres") {
		return testEncryptionKey
	}
	return ""
}

// pollInterval is how often idle dispatchers look for due work, on the test
// clock: every tick of at least this much makes them look.
const pollInterval = 50 * time.Millisecond

// start is where every test clock begins.
var start = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// backends runs fn once per storage backend, as parallel subtests.
func backends(t *testing.T, fn func(t *testing.T, db string)) {
	t.Run("SQLite", func(t *testing.T) {
		t.Parallel()
		fn(t, "sqlite://"+sqlitetest.Path(t))
	})
	t.Run("PostgreSQL", func(t *testing.T) {
		t.Parallel()
		fn(t, pgtest.URL(t))
	})
}

// env is one Herald node under test: its API over HTTP and its dispatcher.
type env struct {
	t     *testing.T
	db    string
	clock *clock.Test
	app   *app.App
	api   *httptest.Server
	// nodes counts the dispatchers running, each idle on one test-clock
	// timer when it has nothing to do; stuck counts those a test keeps
	// busy on purpose (every sender slot held), which never go idle.
	nodes, stuck atomic.Int64
}

type options struct {
	concurrency int
	noDispatch  bool
	denyPrivate bool
	leaseMargin time.Duration // 0: the default
	// maxLeaseLosses is --max-lease-losses; 0: the default.
	maxLeaseLosses int
	logger         *slog.Logger // nil: warnings and errors, shown if the test fails
	smtpURL        string       // --smtp-url; the node runs its mailer
	// frameAncestors may frame the portal (--portal-frame-ancestors).
	frameAncestors []string
	// getenv reads the node's OTEL_* variables; nil: none (tracing off).
	getenv func(string) string
	// compressPayloads is --compress-payloads.
	compressPayloads bool
}

// setup starts a Herald on db with the test clock and a running dispatcher.
func setup(t *testing.T, db string, opts ...func(*options)) *env {
	t.Helper()
	o := options{concurrency: 32}
	for _, f := range opts {
		f(&o)
	}
	cfg := config.Default()
	cfg.DB = db
	cfg.APIKey = testAPIKey
	cfg.EncryptionKey = encryptionKeyFor(db)
	cfg.AllowPrivateNetworks = !o.denyPrivate
	cfg.Concurrency = o.concurrency
	cfg.PollInterval = pollInterval
	cfg.PortalFrameAncestors = o.frameAncestors
	if o.leaseMargin > 0 {
		cfg.LeaseMargin = o.leaseMargin
	}
	if o.maxLeaseLosses > 0 {
		cfg.MaxLeaseLosses = o.maxLeaseLosses
	}
	cfg.SMTPURL = o.smtpURL
	cfg.CompressPayloads = o.compressPayloads
	// The server's address is known before the node starts, so the links
	// it mails (--public-url) lead back to it.
	srv := httptest.NewUnstartedServer(nil)
	cfg.PublicURL = "http://" + srv.Listener.Addr().String()
	c := clock.NewTest(start)
	if o.logger == nil {
		// The node's warnings and errors, shown when the test fails.
		var logs syncbuf.Buffer
		o.logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
		t.Cleanup(func() {
			if t.Failed() {
				t.Logf("the node's warnings and errors:\n%s", tail(logs.String(), 16<<10))
			}
		})
	}
	ctx, cancel := context.WithCancel(context.Background())
	if o.getenv == nil {
		o.getenv = func(string) string { return "" }
	}
	a, err := app.New(ctx, cfg, app.Deps{Clock: c, Logger: o.logger, Getenv: o.getenv}, true)
	if err != nil {
		srv.Close()
	}
	require.NoError(t, err)
	srv.Config.Handler = a.Handler
	srv.Start()
	e := &env{t: t, db: db, clock: c, app: a, api: srv}
	done := make(chan struct{})
	if o.noDispatch {
		close(done)
	} else {
		e.nodes.Add(1)
		go func() {
			defer close(done)
			_ = a.Dispatcher.Run(ctx)
		}()
	}
	mailed := make(chan struct{})
	if a.Mailer == nil {
		close(mailed)
	} else {
		go func() {
			defer close(mailed)
			_ = a.Mailer.Run(ctx)
		}()
	}
	t.Cleanup(func() {
		cancel()
		<-done
		<-mailed
		e.api.Close()
		a.Close()
	})
	return e
}

// runDispatch starts the node's own dispatcher, the one wired to its
// metrics, in a setup made with noDispatch, so that a test chooses when it
// begins (after another node has crashed, say). It stops when the test ends.
func (e *env) runDispatch() {
	e.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	e.nodes.Add(1)
	go func() {
		defer close(done)
		_ = e.app.Dispatcher.Run(ctx)
	}()
	e.t.Cleanup(func() {
		cancel()
		<-done
	})
}

// runSampler starts the node's depth sampler (the one serve and worker
// run) until the test ends. It counts as a node for tick and settle: idle
// when it sleeps on the test clock until its next minute, which it
// samples at the second of the minute it started at.
func (e *env) runSampler() {
	e.t.Helper()
	require.NotNil(e.t, e.app.Sampler)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	e.nodes.Add(1)
	go func() {
		defer close(done)
		_ = e.app.Sampler.Run(ctx)
	}()
	e.t.Cleanup(func() {
		cancel()
		<-done
	})
	waitFor(e.t, "the sampler's first sample", e.idle)
}

// dispatcher starts another dispatcher (another "node") on its own store
// connection to the same database. It returns the store and a stop
// function.
func (e *env) dispatcher(concurrency int) (store.Store, context.CancelFunc, <-chan struct{}) {
	e.t.Helper()
	return e.dispatcherWith(concurrency, 0)
}

// crashingDispatcher is a dispatcher whose store the test closes under it,
// as a crash would: it writes nothing more, and since a crashed process
// does not try its outcome writes again, neither does it (a dispatcher
// tries a failed outcome write again for 30 s, so its stop would wait that
// long for nothing).
func (e *env) crashingDispatcher(concurrency int) (store.Store, context.CancelFunc, <-chan struct{}) {
	e.t.Helper()
	return e.dispatcherWith(concurrency, time.Millisecond)
}

func (e *env) dispatcherWith(concurrency int, outcomeRetryFor time.Duration) (store.Store, context.CancelFunc, <-chan struct{}) {
	e.t.Helper()
	st, err := e.app.OpenStore(context.Background())
	require.NoError(e.t, err)
	d := dispatch.New(dispatch.Config{
		Store:           st,
		Sender:          sender.New(sender.Config{AllowPrivateNetworks: true, UserAgent: "Herald/test"}),
		Clock:           e.clock,
		Concurrency:     concurrency,
		PollInterval:    pollInterval,
		DrainTimeout:    time.Millisecond,
		OutcomeRetryFor: outcomeRetryFor,
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	e.nodes.Add(1)
	go func() {
		defer close(done)
		_ = d.Run(ctx)
	}()
	var once sync.Once
	stop := func() {
		cancel()
		once.Do(func() { e.nodes.Add(-1) })
	}
	e.t.Cleanup(func() {
		stop()
		<-done
		st.Close()
	})
	return st, stop, done
}

// call makes an API call and decodes the JSON answer into out (if not nil).
// It returns the status code.
func (e *env) call(method, path string, body any, out any) int {
	e.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case []byte:
		rd = bytes.NewReader(b)
	default:
		buf, err := json.Marshal(b)
		require.NoError(e.t, err)
		rd = bytes.NewReader(buf)
	}
	req, err := http.NewRequest(method, e.api.URL+path, rd)
	require.NoError(e.t, err)
	req.Header.Set("Authorization", "Bearer "+testAPIKey)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(e.t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(e.t, err)
	if out != nil && len(raw) > 0 {
		require.NoError(e.t, json.Unmarshal(raw, out), "answer to %s %s: %s", method, path, raw)
	}
	return resp.StatusCode
}

// must makes an API call that must answer want.
func (e *env) must(want int, method, path string, body any, out any) {
	e.t.Helper()
	var raw json.RawMessage
	got := e.call(method, path, body, &raw)
	require.Equal(e.t, want, got, "%s %s answered %s", method, path, raw)
	if out != nil {
		require.NoError(e.t, json.Unmarshal(raw, out))
	}
}

type endpointJSON struct {
	ID      string `json:"id"`
	Secret  string `json:"secret"`
	Enabled bool   `json:"enabled"`
}

type ingestJSON struct {
	ID         string `json:"id"`
	Duplicate  bool   `json:"duplicate"`
	Deliveries []struct {
		ID         string `json:"id"`
		EndpointID string `json:"endpoint_id"`
	} `json:"deliveries"`
}

type deliveryJSON struct {
	ID             string     `json:"id"`
	EventID        string     `json:"event_id"`
	EndpointID     string     `json:"endpoint_id"`
	Status         string     `json:"status"`
	AttemptCount   int        `json:"attempt_count"`
	NextAttemptAt  *time.Time `json:"next_attempt_at"`
	LastStatusCode *int       `json:"last_status_code"`
	LastError      string     `json:"last_error"`
	DeadReason     *string    `json:"dead_reason"`
}

type attemptJSON struct {
	AttemptedAt  time.Time `json:"attempted_at"`
	DurationMS   int64     `json:"duration_ms"`
	StatusCode   *int      `json:"status_code"`
	ResponseBody string    `json:"response_body"`
	Error        string    `json:"error"`
}

func (e *env) createEndpoint(body map[string]any) endpointJSON {
	e.t.Helper()
	var ep endpointJSON
	e.must(http.StatusCreated, "POST", "/v1/endpoints", body, &ep)
	return ep
}

func (e *env) send(consumer, eventType string, payload string) ingestJSON {
	e.t.Helper()
	var out ingestJSON
	body := []byte(fmt.Sprintf(`{"consumer_id":%q,"event_type":%q,"payload":%s}`, consumer, eventType, payload))
	e.must(http.StatusAccepted, "POST", "/v1/events", body, &out)
	return out
}

func (e *env) delivery(id string) deliveryJSON {
	e.t.Helper()
	var d deliveryJSON
	e.must(http.StatusOK, "GET", "/v1/deliveries/"+id, nil, &d)
	return d
}

func (e *env) attempts(id string) []attemptJSON {
	e.t.Helper()
	var page struct {
		Data []attemptJSON `json:"data"`
	}
	e.must(http.StatusOK, "GET", "/v1/deliveries/"+id+"/attempts", nil, &page)
	return page.Data
}

// waitFor polls cond (real time, bounded) until it holds. Used only to wait
// for work running on other goroutines; it never stands in for the clock.
//
// The deadline only stops a test that hangs; it bounds no speed. It is
// generous because under -race the pure-Go SQLite runs ten times slower,
// and the whole package shares two cores.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.NewTimer(3 * time.Minute)
	defer deadline.Stop()
	poll := time.NewTicker(5 * time.Millisecond)
	defer poll.Stop()
	for !cond() {
		select {
		case <-deadline.C:
			t.Fatalf("timed out waiting for %s", what)
		case <-poll.C:
		}
	}
}

// waitStatus waits until the delivery has the status and returns it.
func (e *env) waitStatus(id, status string) deliveryJSON {
	e.t.Helper()
	var d deliveryJSON
	waitFor(e.t, "delivery "+id+" to be "+status, func() bool {
		d = e.delivery(id)
		return d.Status == status
	})
	return d
}

// hit is one request a receiver got.
type hit struct {
	At      time.Time // on the test clock
	Headers http.Header
	Body    []byte
}

// receiver is an httptest server whose answers a test scripts.
type receiver struct {
	*httptest.Server
	mu     sync.Mutex
	hits   []hit
	answer func(n int, r *http.Request, w http.ResponseWriter) // n counts from 1
	arrive chan struct{}
}

func newReceiver(t *testing.T, c *clock.Test, answer func(n int, r *http.Request, w http.ResponseWriter)) *receiver {
	t.Helper()
	rc := &receiver{answer: answer, arrive: make(chan struct{}, 1<<16)}
	rc.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		rc.mu.Lock()
		rc.hits = append(rc.hits, hit{At: c.Now(), Headers: r.Header.Clone(), Body: body})
		n := len(rc.hits)
		rc.mu.Unlock()
		rc.arrive <- struct{}{}
		if rc.answer == nil {
			w.WriteHeader(http.StatusOK)
			return
		}
		rc.answer(n, r, w)
	}))
	t.Cleanup(rc.Close)
	return rc
}

func (rc *receiver) count() int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return len(rc.hits)
}

func (rc *receiver) all() []hit {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]hit(nil), rc.hits...)
}

// waitHits waits until the receiver has had n requests.
//
// It gives up when no request has arrived for a minute, or after ten:
// a run that is slow but moving (thousands of deliveries with -race on a
// loaded machine) is not a failure, one that stopped is.
func (rc *receiver) waitHits(t *testing.T, n int) {
	t.Helper()
	const stall, limit = time.Minute, 10 * time.Minute
	start := time.Now()
	last, moved := rc.count(), start
	poll := time.NewTicker(5 * time.Millisecond)
	defer poll.Stop()
	for {
		c := rc.count()
		if c >= n {
			return
		}
		now := time.Now()
		if c != last {
			last, moved = c, now
		}
		if now.Sub(moved) > stall || now.Sub(start) > limit {
			t.Fatalf("timed out waiting for %d requests at %s: %d arrived, the last %s ago, after %s",
				n, rc.URL, c, now.Sub(moved).Round(time.Second), now.Sub(start).Round(time.Second))
		}
		<-poll.C
	}
}

// tick advances the test clock by d and waits until every dispatcher has
// looked for due work and gone idle again, so that what was due has been
// claimed (and what was not is known not to have been).
func (e *env) tick(d time.Duration) {
	e.t.Helper()
	e.clock.Advance(d)
	waitFor(e.t, "the dispatchers to go idle", e.idle)
}

// idle reports whether every dispatcher not stuck on purpose waits on the
// test clock, having found nothing more to claim.
func (e *env) idle() bool {
	return int64(e.clock.Waiters()) >= e.nodes.Load()-e.stuck.Load()
}

// leased is how many deliveries are delivering now.
func (e *env) leased() int64 {
	e.t.Helper()
	var s struct {
		Deliveries map[string]int64 `json:"deliveries"`
	}
	e.must(http.StatusOK, "GET", "/v1/stats", nil, &s)
	return s.Deliveries["delivering"]
}

// settle waits until no delivery is leased and every dispatcher is idle on
// the test clock: everything due at the current test time has been sent.
func (e *env) settle() {
	e.t.Helper()
	waitFor(e.t, "the dispatchers to settle", func() bool {
		return e.leased() == 0 && e.idle()
	})
}

// heraldBuild is the herald binary built for this package's tests.
var heraldBuild struct {
	once sync.Once
	dir  string
	path string
	err  error
}

// heraldBinary builds cmd/herald once for all of this package's tests and
// returns its path; TestMain removes it. It is built as make image builds
// the container's (static: CGO off, -trimpath), so that the container test
// packages this same binary instead of compiling another.
func heraldBinary(t *testing.T) string {
	t.Helper()
	b := &heraldBuild
	b.once.Do(func() {
		if b.dir, b.err = os.MkdirTemp("", "herald-e2e-"); b.err != nil {
			return
		}
		b.path = filepath.Join(b.dir, "herald")
		build := exec.Command("go", "build", "-trimpath", "-o", b.path, "github.com/heraldhooks/herald/cmd/herald")
		build.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := build.CombinedOutput(); err != nil {
			b.err = fmt.Errorf("go build: %v: %s", err, out)
		}
	})
	require.NoError(t, b.err)
	return b.path
}

func TestMain(m *testing.M) {
	code := m.Run()
	pgtest.Close()
	if heraldBuild.dir != "" {
		os.RemoveAll(heraldBuild.dir)
	}
	os.Exit(code)
}

// tail is the last n bytes of s at most, from a line's start.
func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[len(s)-n:]
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	return "…\n" + s
}
