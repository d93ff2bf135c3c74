package dispatch_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhooks/herald"
	"github.com/heraldhooks/herald/internal/clock"
	"github.com/heraldhooks/herald/internal/dispatch"
	"github.com/heraldhooks/herald/internal/sender"
	"github.com/heraldhooks/herald/internal/store"
	"github.com/heraldhooks/herald/internal/store/sqlitestore"
	"github.com/heraldhooks/herald/internal/store/sqlitestore/sqlitetest"
)

func TestDecide(t *testing.T) {
	t.Parallel()
	claimed := func(attemptsSoFar int, ep herald.Endpoint) *store.ClaimedDelivery {
		return &store.ClaimedDelivery{
			Delivery:   herald.Delivery{ID: "dlv_1", AttemptCount: attemptsSoFar},
			Endpoint:   ep,
			LeaseToken: 7,
		}
	}
	short := herald.Endpoint{RetrySchedule: []time.Duration{0, 10 * time.Second, time.Minute}}
	tests := []struct {
		name       string
		c          *store.ClaimedDelivery
		res        sender.Result
		r          float64
		status     herald.Status
		reason     herald.DeadReason
		retryIn    time.Duration
		disable    string
		attemptNum int
	}{
		{name: "SuccessDelivers", c: claimed(0, short), res: sender.Result{Class: sender.Success, StatusCode: 200},
			status: herald.StatusDelivered, attemptNum: 1},
		{name: "RetryableFollowsScheduleWithJitterLow", c: claimed(0, short), res: sender.Result{Class: sender.Retryable, StatusCode: 500},
			r: 0, status: herald.StatusPending, retryIn: 8 * time.Second, attemptNum: 1},
		{name: "RetryableSecondAttemptJitterMid", c: claimed(1, short), res: sender.Result{Class: sender.Retryable, StatusCode: 503},
			r: 0.5, status: herald.StatusPending, retryIn: time.Minute, attemptNum: 2},
		{name: "ExhaustedGoesDead", c: claimed(2, short), res: sender.Result{Class: sender.Retryable, StatusCode: 500},
			status: herald.StatusDead, reason: herald.DeadExhausted, attemptNum: 3},
		{name: "RetryAfterIsAFloor", c: claimed(0, short), res: sender.Result{Class: sender.Retryable, StatusCode: 429, RetryAfter: time.Hour},
			r: 0.5, status: herald.StatusPending, retryIn: time.Hour, attemptNum: 1},
		{name: "RetryAfterShorterThanScheduleKeepsSchedule", c: claimed(0, short), res: sender.Result{Class: sender.Retryable, StatusCode: 429, RetryAfter: time.Second},
			r: 0.5, status: herald.StatusPending, retryIn: 10 * time.Second, attemptNum: 1},
		{name: "TooManyRequestsWithoutRetryAfterThrottles", c: claimed(0, short), res: sender.Result{Class: sender.Retryable, StatusCode: 429},
			r: 0.5, status: herald.StatusPending, retryIn: 10 * time.Second, attemptNum: 1},
		{name: "GoneDiesAndDisables", c: claimed(0, short), res: sender.Result{Class: sender.Gone, StatusCode: 410},
			status: herald.StatusDead, reason: herald.DeadGone, disable: "gone", attemptNum: 1},
		{name: "ClientErrorDiesAtOnce", c: claimed(0, short), res: sender.Result{Class: sender.ClientError, StatusCode: 404},
			status: herald.StatusDead, reason: herald.DeadClientError, attemptNum: 1},
		{name: "ClientErrorRetriedWhenEndpointAsks", c: claimed(0, herald.Endpoint{RetryClientErrors: true, RetrySchedule: short.RetrySchedule}),
			res: sender.Result{Class: sender.ClientError, StatusCode: 404}, r: 0.5, status: herald.StatusPending, retryIn: 10 * time.Second, attemptNum: 1},
		{name: "DefaultScheduleSecondDelayIs30s", c: claimed(0, herald.Endpoint{}), res: sender.Result{Class: sender.Retryable},
			r: 0.5, status: herald.StatusPending, retryIn: 30 * time.Second, attemptNum: 1},
		{name: "DefaultScheduleSevenAttempts", c: claimed(6, herald.Endpoint{}), res: sender.Result{Class: sender.Retryable},
			status: herald.StatusDead, reason: herald.DeadExhausted, attemptNum: 7},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			out := dispatch.Decide(tt.c, &tt.res, tt.r)
			require.Equal(t, tt.status, out.Status)
			require.Equal(t, tt.reason, out.DeadReason)
			require.Equal(t, tt.retryIn, out.RetryIn)
			require.Equal(t, tt.disable, out.DisableEndpoint)
			require.Equal(t, tt.attemptNum, out.Attempt.Number)
			require.Equal(t, int64(7), out.LeaseToken)
			require.Equal(t, tt.res.StatusCode, out.Attempt.StatusCode)
			require.Equal(t, tt.res.RetryAfter, out.PauseFor, "a Retry-After pauses the endpoint")
			require.Equal(t, tt.res.StatusCode == 429 && tt.res.RetryAfter == 0, out.Throttled)
		})
	}
}

// setup opens a fresh SQLite store with one endpoint pointing at handler.
func setup(t *testing.T, handler http.HandlerFunc) (store.Store, *clock.Test, *herald.Endpoint) {
	t.Helper()
	ctx := context.Background()
	st, err := sqlitestore.Open(ctx, sqlitetest.Path(t), nil)
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	require.NoError(t, st.Migrate(ctx))
	srv := httptest.NewServer(handler)
	t.Cleanup(srv.Close)
	c := clock.NewTest(time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC))
	ep, err := st.EndpointCreate(ctx, &store.EndpointCreateParams{
		Endpoint: &herald.Endpoint{
			ConsumerID: "c1", URL: srv.URL, EventTypes: []string{"*"}, Enabled: true,
			Secret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", Timeout: 10 * time.Second,
			SignatureScheme: herald.SchemeStandard, MaxInFlight: 10,
		},
		Now: c.Now(),
	})
	require.NoError(t, err)
	return st, c, ep
}

func ingest(t *testing.T, st store.Store, c *clock.Test) string {
	t.Helper()
	res, err := st.EventIngest(context.Background(), &store.EventIngestParams{
		Events: []store.EventIngestItem{{ConsumerID: "c1", EventType: "a.b", Payload: []byte(`{}`)}},
		Now:    c.Now(),
	})
	require.NoError(t, err)
	require.Len(t, res[0].Deliveries, 1)
	return res[0].Deliveries[0].ID
}

func startDispatcher(t *testing.T, st store.Store, c *clock.Test, drain time.Duration) (context.CancelFunc, <-chan struct{}) {
	t.Helper()
	return runDispatcher(t, dispatch.Config{
		Store:        st,
		Sender:       sender.New(sender.Config{AllowPrivateNetworks: true}),
		Clock:        c,
		Concurrency:  4,
		DrainTimeout: drain,
	})
}

// runDispatcher runs a dispatcher of cfg until the test ends or the
// returned function is called; the channel closes when it has stopped.
func runDispatcher(t *testing.T, cfg dispatch.Config) (context.CancelFunc, <-chan struct{}) {
	t.Helper()
	d := dispatch.New(cfg)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		require.NoError(t, d.Run(ctx))
	}()
	t.Cleanup(func() { cancel(); <-done })
	return cancel, done
}

func TestGracefulStop(t *testing.T) {
	t.Parallel()

	t.Run("FinishesAttemptsInFlight", func(t *testing.T) {
		t.Parallel()
		arrived, answer := make(chan struct{}), make(chan struct{})
		st, c, _ := setup(t, func(w http.ResponseWriter, _ *http.Request) {
			close(arrived)
			<-answer
			w.WriteHeader(http.StatusOK)
		})
		id := ingest(t, st, c)
		stop, done := startDispatcher(t, st, c, time.Minute)
		waitClosed(t, arrived)
		stop()
		close(answer)
		waitClosed(t, done)
		d, err := st.DeliveryGet(context.Background(), id)
		require.NoError(t, err)
		require.Equal(t, herald.StatusDelivered, d.Status)
	})

	t.Run("HandsBackWhatCannotFinish", func(t *testing.T) {
		t.Parallel()
		arrived, answer := make(chan struct{}), make(chan struct{})
		t.Cleanup(func() { close(answer) })
		st, c, _ := setup(t, func(w http.ResponseWriter, r *http.Request) {
			// Read the body so the server notices when the client hangs up.
			_, _ = io.ReadAll(r.Body)
			close(arrived)
			select {
			case <-answer:
			case <-r.Context().Done():
			}
		})
		id := ingest(t, st, c)
		stop, done := startDispatcher(t, st, c, 50*time.Millisecond)
		waitClosed(t, arrived)
		stop()
		waitClosed(t, done)
		d, err := st.DeliveryGet(context.Background(), id)
		require.NoError(t, err)
		require.Equal(t, herald.StatusPending, d.Status, "handed back, not left leased")
		require.Equal(t, 0, d.AttemptCount, "an attempt cut off by shutdown spends nothing")
		claimed, err := st.DeliveryClaim(context.Background(), &store.DeliveryClaimParams{Limit: 10, Now: c.Now()})
		require.NoError(t, err)
		require.Len(t, claimed, 1, "due again at once for the next node")
	})
}

func TestWakesOnNewWorkWithoutPolling(t *testing.T) {
	t.Parallel()
	got := make(chan struct{}, 1)
	st, c, _ := setup(t, func(w http.ResponseWriter, _ *http.Request) {
		got <- struct{}{}
	})
	startDispatcher(t, st, c, time.Second)
	// The dispatcher is idle on a test-clock timer that never fires: only a
	// wake-up from the store can bring it to the new event.
	waitFor(t, func() bool { return c.Waiters() > 0 })
	ingest(t, st, c)
	waitClosed(t, got)
}

func waitClosed[T any](t *testing.T, ch <-chan T) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(30 * time.Second):
		t.Fatal("timed out")
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.NewTimer(30 * time.Second)
	defer deadline.Stop()
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-deadline.C:
			t.Fatal("timed out")
		case <-tick.C:
		}
	}
}

// TestCappedEndpointFlowsAtTheSpeedOfItsAnswers: with room for one attempt
// at a time, each written outcome makes the dispatcher look again at once;
// the test clock never moves, so the poll interval cannot explain it.
func TestCappedEndpointFlowsAtTheSpeedOfItsAnswers(t *testing.T) {
	t.Parallel()
	got := make(chan struct{}, 10)
	st, c, ep := setup(t, func(w http.ResponseWriter, _ *http.Request) {
		got <- struct{}{}
	})
	ep.MaxInFlight = 1
	_, err := st.EndpointUpdate(context.Background(), &store.EndpointUpdateParams{Endpoint: ep, Now: c.Now()})
	require.NoError(t, err)
	for range 5 {
		ingest(t, st, c)
	}
	startDispatcher(t, st, c, time.Second)
	for range 5 {
		waitClosed(t, got)
	}
}

// TestOutcomeWritesDoNotClaimWhenNothingWaits: once a dispatcher has
// claimed everything due, the outcomes it writes do not send it to claim
// again (a transaction that would find nothing): only new work, a retry or
// a capped endpoint's waiting work does. Ten events, each ingested once
// the outcome of the one before is written, take ten claims, none empty.
func TestOutcomeWritesDoNotClaimWhenNothingWaits(t *testing.T) {
	t.Parallel()
	base, c, _ := setup(t, func(http.ResponseWriter, *http.Request) {})
	st := &emptyClaimSpy{Store: base}
	ingest(t, st, c)
	hooks, written := countWrites()
	runDispatcher(t, dispatch.Config{
		Store:       st,
		Sender:      sender.New(sender.Config{AllowPrivateNetworks: true}),
		Clock:       c,
		Concurrency: 4,
		Hooks:       hooks,
	})
	for i := range int64(10) {
		// The next event arrives once the claim loop waits again, as at a
		// steady low rate: arriving while it has yet to look at the next
		// due time, the event would be due when it looks, and the loop
		// would heed both the outcome write and the event's wake-up.
		waitFor(t, func() bool { return written.Load() == i+1 && st.waiting.Load() })
		ingest(t, st, c)
	}
	waitFor(t, func() bool { return written.Load() == 11 })
	require.Equal(t, int64(11), st.claims.Load())
	require.Zero(t, st.empty.Load(), "claims that found nothing")
}

// countWrites returns hooks that count the outcomes written, and the
// count.
func countWrites() (dispatch.Hooks, *atomic.Int64) {
	var n atomic.Int64
	return dispatch.Hooks{
		OutcomeWritten: func(*store.ClaimedDelivery, *store.DeliveryOutcome, time.Time, bool) { n.Add(1) },
	}, &n
}

// emptyClaimSpy is the real store, counting the claims made and those
// that took nothing; waiting says whether the next due time was read
// since the last claim (the claim loop waits on it).
type emptyClaimSpy struct {
	store.Store
	claims, empty atomic.Int64
	waiting       atomic.Bool
}

func (s *emptyClaimSpy) DeliveryNextDue(ctx context.Context, p *store.DeliveryNextDueParams) (store.NextDue, error) {
	next, err := s.Store.DeliveryNextDue(ctx, p)
	s.waiting.Store(true)
	return next, err
}

func (s *emptyClaimSpy) DeliveryClaim(ctx context.Context, p *store.DeliveryClaimParams) ([]*store.ClaimedDelivery, error) {
	s.waiting.Store(false)
	got, err := s.Store.DeliveryClaim(ctx, p)
	s.claims.Add(1)
	if err == nil && len(got) == 0 {
		s.empty.Add(1)
	}
	return got, err
}

// claimSpy is the real store, with the limit of every claim written down
// and the first outcome write held at a gate.
type claimSpy struct {
	store.Store
	mu     sync.Mutex
	limits []int
	// beforeFirstWrite runs once, in the first DeliveryCompleteMany.
	beforeFirstWrite func()
	once             sync.Once
}

func (s *claimSpy) DeliveryClaim(ctx context.Context, p *store.DeliveryClaimParams) ([]*store.ClaimedDelivery, error) {
	s.mu.Lock()
	s.limits = append(s.limits, p.Limit)
	s.mu.Unlock()
	return s.Store.DeliveryClaim(ctx, p)
}

func (s *claimSpy) DeliveryCompleteMany(ctx context.Context, p *store.DeliveryCompleteManyParams) ([]bool, error) {
	s.once.Do(s.beforeFirstWrite)
	return s.Store.DeliveryCompleteMany(ctx, p)
}

func (s *claimSpy) claimLimits() []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.limits)
}

// TestClaimsWaitForOutcomesBeingWritten: the first of 8 attempts ends and
// its outcome is written alone while the other 7 end; the slot that write
// frees is not worth a claim (a write transaction) of its own, because the
// next write is about to free 7 more. Without the wait, the dispatcher
// claims 1, then 7, ping-ponging with the writer on the one database.
func TestClaimsWaitForOutcomesBeingWritten(t *testing.T) {
	t.Parallel()
	const concurrency = 8
	var requests atomic.Int64
	release := make(chan struct{})
	base, c, _ := setup(t, func(w http.ResponseWriter, _ *http.Request) {
		if requests.Add(1) > 1 {
			<-release
		}
	})
	var attempts, written atomic.Int64
	st := &claimSpy{Store: base}
	st.beforeFirstWrite = func() {
		waitFor(t, func() bool { return requests.Load() == concurrency })
		close(release)
		waitFor(t, func() bool { return attempts.Load() == concurrency })
	}
	for range 2 * concurrency {
		ingest(t, st, c)
	}
	runDispatcher(t, dispatch.Config{
		Store:       st,
		Sender:      sender.New(sender.Config{AllowPrivateNetworks: true}),
		Clock:       c,
		Concurrency: concurrency,
		Hooks: dispatch.Hooks{
			AttemptDone: func(*store.ClaimedDelivery, *sender.Result, *store.DeliveryOutcome) { attempts.Add(1) },
			OutcomeWritten: func(_ *store.ClaimedDelivery, _ *store.DeliveryOutcome, _ time.Time, applied bool) {
				if applied {
					written.Add(1)
				}
			},
		},
	})

	waitFor(t, func() bool { return written.Load() == 2*concurrency })
	limits := st.claimLimits()
	require.GreaterOrEqual(t, len(limits), 2)
	require.Equal(t, concurrency, limits[0], "the first claim fills every slot")
	require.GreaterOrEqual(t, limits[1], concurrency/2,
		"the second claim waits for the outcomes being written (claims: %v)", limits)
}

// stallingStore is the real store, with a node's stall between its first
// claim and the attempts of that claim: once the first claim that takes
// something has returned, the test clock moves on by stall, and then
// meanwhile runs (another node, say).
type stallingStore struct {
	store.Store
	clock     *clock.Test
	stall     time.Duration
	meanwhile func()
	// claims counts the claims that took something.
	claims   atomic.Int64
	released chan []store.Lease
}

func (s *stallingStore) DeliveryClaim(ctx context.Context, p *store.DeliveryClaimParams) ([]*store.ClaimedDelivery, error) {
	got, err := s.Store.DeliveryClaim(ctx, p)
	if len(got) > 0 && s.claims.Add(1) == 1 {
		s.clock.Advance(s.stall)
		if s.meanwhile != nil {
			s.meanwhile()
		}
	}
	return got, err
}

func (s *stallingStore) DeliveryRelease(ctx context.Context, p *store.DeliveryReleaseParams) error {
	err := s.Store.DeliveryRelease(ctx, p)
	s.released <- p.Leases
	return err
}

// TestNoRequestOutlivesItsLease: a node that stalls between a claim and
// its attempt (frozen by SIGSTOP, say) does not send once the request
// could outlast the lease, counted from just before the claim: another
// node may hold the delivery by then. It hands the lease back without
// spending an attempt, and a fresh claim delivers. The endpoint's timeout
// is 10 s and the lease 2 x 10 s + 5 s, so a request may start until 15 s
// after the claim was asked for.
func TestNoRequestOutlivesItsLease(t *testing.T) {
	t.Parallel()
	const margin = 5 * time.Second

	// A run delivers one event through a node that stalls for stall after
	// its first claim: its store, the delivery, the claim (1 or 2) each
	// request came from, and how many attempts were dropped.
	type run struct {
		st      *stallingStore
		id      string
		hits    chan int64
		skipped *atomic.Int64
	}
	start := func(t *testing.T, stall time.Duration, meanwhile func(r *run)) *run {
		r := &run{hits: make(chan int64, 10), skipped: &atomic.Int64{}}
		base, c, _ := setup(t, func(w http.ResponseWriter, _ *http.Request) {
			r.hits <- r.st.claims.Load()
		})
		r.st = &stallingStore{Store: base, clock: c, stall: stall, released: make(chan []store.Lease, 10)}
		if meanwhile != nil {
			r.st.meanwhile = func() { meanwhile(r) }
		}
		r.id = ingest(t, base, c)
		runDispatcher(t, dispatch.Config{
			Store:       r.st,
			Sender:      sender.New(sender.Config{AllowPrivateNetworks: true}),
			Clock:       c,
			Concurrency: 4,
			LeaseMargin: margin,
			Hooks: dispatch.Hooks{
				LeaseTooShort: func(*store.ClaimedDelivery) { r.skipped.Add(1) },
			},
		})
		return r
	}
	delivered := func(t *testing.T, r *run) *herald.Delivery {
		t.Helper()
		var d *herald.Delivery
		waitFor(t, func() bool {
			var err error
			d, err = r.st.DeliveryGet(context.Background(), r.id)
			require.NoError(t, err)
			return d.Status == herald.StatusDelivered
		})
		return d
	}

	t.Run("SendsWhileTheLeaseOutlivesTheRequest", func(t *testing.T) {
		t.Parallel()
		r := start(t, 14*time.Second, nil) // 14 s + 10 s < 25 s
		require.Equal(t, int64(1), recv(t, r.hits), "sent from the first claim")
		d := delivered(t, r)
		require.Equal(t, 1, d.AttemptCount)
		require.Zero(t, r.skipped.Load())
	})

	t.Run("HandsBackWhenTheRequestCouldOutliveTheLease", func(t *testing.T) {
		t.Parallel()
		r := start(t, 16*time.Second, nil) // 16 s + 10 s > 25 s
		leases := recv(t, r.st.released)
		require.Len(t, leases, 1)
		require.Equal(t, r.id, leases[0].DeliveryID)
		require.Equal(t, int64(1), r.skipped.Load())
		require.Equal(t, int64(2), recv(t, r.hits), "the request came from a fresh claim, not the stalled one")
		d := delivered(t, r)
		require.Equal(t, 1, d.AttemptCount, "the dropped attempt spent nothing")
		attempts, err := r.st.AttemptList(context.Background(), &store.AttemptListParams{DeliveryID: r.id})
		require.NoError(t, err)
		require.Len(t, attempts.Items, 1, "one request, one attempt")
		require.Empty(t, r.hits)
	})

	t.Run("LeavesALeaseTakenMeanwhileAlone", func(t *testing.T) {
		t.Parallel()
		// The node wakes after its lease has expired and another node has
		// claimed the delivery.
		var (
			other    []*store.ClaimedDelivery
			otherErr error
		)
		r := start(t, 30*time.Second, func(r *run) {
			other, otherErr = r.st.Store.DeliveryClaim(context.Background(), &store.DeliveryClaimParams{
				Limit: 10, LeaseMargin: margin, Now: r.st.clock.Now(),
			})
		})
		recv(t, r.st.released)
		require.Equal(t, int64(1), r.skipped.Load())
		require.NoError(t, otherErr)
		require.Len(t, other, 1)
		require.True(t, other[0].Redelivered)

		// The hand-back was fenced off: the other node's lease still holds,
		// and its outcome applies.
		d, err := r.st.DeliveryGet(context.Background(), r.id)
		require.NoError(t, err)
		require.Equal(t, herald.StatusDelivering, d.Status)
		applied, err := r.st.DeliveryCompleteMany(context.Background(), &store.DeliveryCompleteManyParams{
			Outcomes: []store.DeliveryOutcome{{
				Lease:   store.Lease{DeliveryID: r.id, LeaseToken: other[0].LeaseToken},
				Status:  herald.StatusDelivered,
				Attempt: herald.Attempt{Number: 1, AttemptedAt: r.st.clock.Now(), StatusCode: 200},
			}},
			Now: r.st.clock.Now(),
		})
		require.NoError(t, err)
		require.Equal(t, []bool{true}, applied)
		require.Empty(t, r.hits, "the woken node sent nothing")
	})
}

// recv receives from ch, failing the test after 30 s.
func recv[T any](t *testing.T, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(30 * time.Second):
		t.Fatal("timed out")
		var zero T
		return zero
	}
}

// failingWrites is the real store whose outcome writes fail while down is
// set, as when the database restarts.
type failingWrites struct {
	store.Store
	down   atomic.Bool
	failed atomic.Int64
}

func (s *failingWrites) DeliveryCompleteMany(ctx context.Context, p *store.DeliveryCompleteManyParams) ([]bool, error) {
	if s.down.Load() {
		s.failed.Add(1)
		return nil, errors.New("connection refused")
	}
	return s.Store.DeliveryCompleteMany(ctx, p)
}

// TestOutcomeWriteSurvivesADatabaseRestart: an attempt's outcome that
// cannot be written because the database is away is written once it is
// back, instead of being dropped to have its lease expire and the webhook
// sent again.
func TestOutcomeWriteSurvivesADatabaseRestart(t *testing.T) {
	t.Parallel()
	var requests atomic.Int64
	base, c, _ := setup(t, func(w http.ResponseWriter, _ *http.Request) { requests.Add(1) })
	st := &failingWrites{Store: base}
	st.down.Store(true)
	id := ingest(t, st, c)
	var applied atomic.Int64
	runDispatcher(t, dispatch.Config{
		Store:       st,
		Sender:      sender.New(sender.Config{AllowPrivateNetworks: true}),
		Clock:       c,
		Concurrency: 4,
		Hooks: dispatch.Hooks{
			OutcomeWritten: func(_ *store.ClaimedDelivery, _ *store.DeliveryOutcome, _ time.Time, ok bool) {
				if ok {
					applied.Add(1)
				}
			},
		},
	})
	waitFor(t, func() bool { return st.failed.Load() >= 3 })
	st.down.Store(false)
	waitFor(t, func() bool { return applied.Load() == 1 })

	d, err := base.DeliveryGet(context.Background(), id)
	require.NoError(t, err)
	require.Equal(t, herald.StatusDelivered, d.Status)
	require.Equal(t, int64(1), requests.Load(), "the webhook went once")
}

// TestOutcomeWriteGivesUpAfterOutcomeRetryFor: a database away for longer
// than OutcomeRetryFor costs the outcomes (their leases expire and the
// deliveries go again: at least once), and the dispatcher goes on: its
// slots come back, and it stops without waiting for the database.
func TestOutcomeWriteGivesUpAfterOutcomeRetryFor(t *testing.T) {
	t.Parallel()
	base, c, _ := setup(t, func(w http.ResponseWriter, _ *http.Request) {})
	st := &failingWrites{Store: base}
	st.down.Store(true)
	id := ingest(t, st, c)
	var written, applied atomic.Int64
	stop, done := runDispatcher(t, dispatch.Config{
		Store:           st,
		Sender:          sender.New(sender.Config{AllowPrivateNetworks: true}),
		Clock:           c,
		Concurrency:     1,
		OutcomeRetryFor: 300 * time.Millisecond,
		Hooks: dispatch.Hooks{
			OutcomeWritten: func(_ *store.ClaimedDelivery, _ *store.DeliveryOutcome, _ time.Time, ok bool) {
				written.Add(1)
				if ok {
					applied.Add(1)
				}
			},
		},
	})
	waitFor(t, func() bool { return written.Load() == 1 })
	require.Zero(t, applied.Load(), "the outcome was dropped")
	failed := st.failed.Load()
	require.Greater(t, failed, int64(1), "tried again before giving up")

	d, err := base.DeliveryGet(context.Background(), id)
	require.NoError(t, err)
	require.Equal(t, herald.StatusDelivering, d.Status, "its lease holds until it expires")
	stop()
	waitClosed(t, done)
}

// nextDueSpy is the real store, keeping the wait its latest read of the
// next due time answered.
type nextDueSpy struct {
	store.Store
	last atomic.Int64 // -1 for none
}

func (s *nextDueSpy) DeliveryNextDue(ctx context.Context, p *store.DeliveryNextDueParams) (store.NextDue, error) {
	next, err := s.Store.DeliveryNextDue(ctx, p)
	if next.Found && err == nil {
		s.last.Store(int64(next.Wait))
	} else {
		s.last.Store(-1)
	}
	return next, err
}

// TestRetryGoesAtItsTimeNotAtThePoll: a retry due 1.2 s after a failure is
// attempted when it falls due, although the dispatcher polls only every
// hour: an idle dispatcher sleeps until the next due time the store knows.
func TestRetryGoesAtItsTimeNotAtThePoll(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := clock.NewTest(time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC))
	var mu sync.Mutex
	var seen []time.Time
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, c.Now())
		if len(seen) == 1 {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	t.Cleanup(srv.Close)
	attempts := func() []time.Time {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(seen)
	}
	base, err := sqlitestore.Open(ctx, sqlitetest.Path(t), nil)
	require.NoError(t, err)
	t.Cleanup(func() { base.Close() })
	require.NoError(t, base.Migrate(ctx))
	_, err = base.EndpointCreate(ctx, &store.EndpointCreateParams{
		Endpoint: &herald.Endpoint{
			ConsumerID: "c1", URL: srv.URL, EventTypes: []string{"*"}, Enabled: true,
			Secret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", Timeout: 10 * time.Second,
			SignatureScheme: herald.SchemeStandard, MaxInFlight: 10,
			RetrySchedule: []time.Duration{0, 1200 * time.Millisecond},
		},
		Now: c.Now(),
	})
	require.NoError(t, err)
	st := &nextDueSpy{Store: base}
	st.last.Store(-1)
	ingest(t, st, c)
	hooks, written := countWrites()
	runDispatcher(t, dispatch.Config{
		Store:        st,
		Sender:       sender.New(sender.Config{AllowPrivateNetworks: true}),
		Clock:        c,
		Concurrency:  4,
		PollInterval: time.Hour,
		Rand:         func() float64 { return 0.5 }, // no jitter: exactly 1.2 s
		Hooks:        hooks,
	})
	waitFor(t, func() bool { return written.Load() == 1 })
	failedAt := attempts()[0]
	// Once the failure is written, the dispatcher looks (nothing due yet),
	// reads the next due time, 1.2 s away, and sleeps on a timer for it.
	waitFor(t, func() bool { return st.last.Load() == int64(1200*time.Millisecond) && c.Waiters() == 1 })

	c.Advance(1200 * time.Millisecond)
	waitFor(t, func() bool { return len(attempts()) == 2 })
	require.Equal(t, 1200*time.Millisecond, attempts()[1].Sub(failedAt), "the retry went at its due time, not at the hourly poll")
}

// TestPreviousSecretOfAnotherSchemeDoesNotBreakDelivery: an hmac-sha256
// endpoint rotated to a whsec_ secret and then switched to the standard
// scheme keeps its old plain secret as the previous one, which the
// standard scheme cannot use. Deliveries go on, signed with the current
// secret alone, instead of going dead as a configuration fault.
func TestPreviousSecretOfAnotherSchemeDoesNotBreakDelivery(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var mu sync.Mutex
	var sigs []string
	st, c, ep := setup(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		sigs = append(sigs, r.Header.Get("webhook-signature"))
	})
	// The state an hmac-sha256 endpoint with a plain secret is left in when
	// it is rotated to a whsec_ secret and then switched to standard.
	for _, secret := range []string{"a plain hmac secret, not base64", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"} {
		_, err := st.EndpointRotateSecret(ctx, &store.EndpointRotateSecretParams{
			ID: ep.ID, NewSecret: secret, PreviousValidFor: 24 * time.Hour, Now: c.Now(),
		})
		require.NoError(t, err)
	}
	got, err := st.EndpointGet(ctx, ep.ID)
	require.NoError(t, err)
	require.Equal(t, herald.SchemeStandard, got.SignatureScheme)
	require.Equal(t, "a plain hmac secret, not base64", got.PreviousSecret, "the old secret still overlaps")

	id := ingest(t, st, c)
	startDispatcher(t, st, c, time.Second)
	waitFor(t, func() bool {
		d, err := st.DeliveryGet(ctx, id)
		return err == nil && d.Status != herald.StatusPending && d.Status != herald.StatusDelivering
	})
	d, err := st.DeliveryGet(ctx, id)
	require.NoError(t, err)
	require.Equal(t, herald.StatusDelivered, d.Status, d.LastError)
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, sigs, 1)
	require.Len(t, strings.Fields(sigs[0]), 1, "signed with the current secret alone")
}

// batchSpy is the real store, with the size of every claim that took
// something and of every outcome write written down.
type batchSpy struct {
	store.Store
	mu             sync.Mutex
	claims, writes []int
}

func (s *batchSpy) DeliveryClaim(ctx context.Context, p *store.DeliveryClaimParams) ([]*store.ClaimedDelivery, error) {
	got, err := s.Store.DeliveryClaim(ctx, p)
	if len(got) > 0 {
		s.mu.Lock()
		s.claims = append(s.claims, len(got))
		s.mu.Unlock()
	}
	return got, err
}

func (s *batchSpy) DeliveryCompleteMany(ctx context.Context, p *store.DeliveryCompleteManyParams) ([]bool, error) {
	s.mu.Lock()
	s.writes = append(s.writes, len(p.Outcomes))
	s.mu.Unlock()
	return s.Store.DeliveryCompleteMany(ctx, p)
}

// runLingering runs a dispatcher with linger on a batchSpy, whose
// receiver counts in got what arrives, and returns once it is idle on a
// test-clock timer that never fires: only wake-ups count.
func runLingering(t *testing.T, linger time.Duration) (*batchSpy, *clock.Test, *atomic.Int64) {
	t.Helper()
	got := &atomic.Int64{}
	base, c, _ := setup(t, func(w http.ResponseWriter, _ *http.Request) { got.Add(1) })
	st := &batchSpy{Store: base}
	runDispatcher(t, dispatch.Config{
		Store:       st,
		Sender:      sender.New(sender.Config{AllowPrivateNetworks: true}),
		Clock:       c,
		Concurrency: 16,
		Linger:      linger,
	})
	waitFor(t, func() bool { return c.Waiters() > 0 })
	return st, c, got
}

// TestQuietDispatcherClaimsAtOnce: an event that wakes a dispatcher quiet
// for longer than Linger since its last claim is claimed at once, not a
// Linger later; those that follow it closely wait a Linger and go
// together. (Linger is real time: the first arrival must beat it, which a
// pause after the wake-up could not.)
func TestQuietDispatcherClaimsAtOnce(t *testing.T) {
	t.Parallel()
	const linger = 1500 * time.Millisecond
	st, c, got := runLingering(t, linger)
	time.Sleep(linger) // quiet since the first claim, for longer than Linger
	sent := time.Now()
	ingest(t, st, c)
	waitFor(t, func() bool { return got.Load() == 1 })
	require.Less(t, time.Since(sent), linger, "the first event waited out a linger")

	ingest(t, st, c)
	ingest(t, st, c)
	waitFor(t, func() bool { return got.Load() == 3 })
	st.mu.Lock()
	defer st.mu.Unlock()
	require.Equal(t, []int{1, 2}, st.claims[len(st.claims)-2:],
		"the first event alone, the two that came within Linger of its claim together")
}

// TestLingerGathersWorkArrivingTogether: events that arrive a few
// milliseconds apart at an idle dispatcher go out in one claim, and their
// outcomes in one write, when the dispatcher lingers; each event would
// otherwise wake a claim and a write of its own.
func TestLingerGathersWorkArrivingTogether(t *testing.T) {
	t.Parallel()
	const events = 5
	st, c, got := runLingering(t, time.Second) // far longer than the events take to arrive
	for range events {
		ingest(t, st, c)
		time.Sleep(20 * time.Millisecond) // apart, as a steady low rate is
	}
	waitFor(t, func() bool { return got.Load() == events })
	waitFor(t, func() bool {
		st.mu.Lock()
		defer st.mu.Unlock()
		return len(st.writes) > 0
	})
	st.mu.Lock()
	defer st.mu.Unlock()
	require.Equal(t, []int{events}, st.claims, "one claim takes every event")
	require.Equal(t, []int{events}, st.writes, "one write records every outcome")
}
