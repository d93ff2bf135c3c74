package metrics

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"

	"github.com/heraldhooks/herald"
	"github.com/heraldhooks/herald/internal/clock"
	"github.com/heraldhooks/herald/internal/sender"
	"github.com/heraldhooks/herald/internal/store"
	"github.com/heraldhooks/herald/internal/store/sqlitestore"
	"github.com/heraldhooks/herald/internal/store/sqlitestore/sqlitetest"
	"github.com/heraldhooks/herald/internal/syncbuf"
)

var start = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// statsStore is a real store whose Stats calls are counted, and replaced
// by StatsFunc when it is set (to block, fail or time out).
type statsStore struct {
	store.Store
	calls     atomic.Int64
	StatsFunc func(ctx context.Context, p *store.StatsParams) (*store.Stats, error)
}

func (s *statsStore) Stats(ctx context.Context, p *store.StatsParams) (*store.Stats, error) {
	s.calls.Add(1)
	if s.StatsFunc != nil {
		return s.StatsFunc(ctx, p)
	}
	return s.Store.Stats(ctx, p)
}

// setup returns metrics over a fresh SQLite store holding one endpoint, with
// a test clock that is both the queue's "now" and the age of its cache.
func setup(t *testing.T, opts Options) (*Metrics, *statsStore, *clock.Test, *herald.Endpoint) {
	t.Helper()
	ctx := context.Background()
	st, err := sqlitestore.Open(ctx, sqlitetest.Path(t), nil)
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	require.NoError(t, st.Migrate(ctx))
	c := clock.NewTest(start)
	ep, err := st.EndpointCreate(ctx, &store.EndpointCreateParams{Now: c.Now(), Endpoint: &herald.Endpoint{
		ConsumerID: "c1", URL: "https://example.com/hooks", EventTypes: []string{"*"}, Enabled: true,
		Secret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", Timeout: 10 * time.Second,
		SignatureScheme: herald.SchemeStandard,
	}})
	require.NoError(t, err)
	ss := &statsStore{Store: st}
	opts.Clock = c
	m := New(ss, opts)
	m.queue.now = c.Now
	return m, ss, c, ep
}

func ingest(t *testing.T, st store.Store, c *clock.Test, n int) {
	t.Helper()
	items := make([]store.EventIngestItem, n)
	for i := range items {
		items[i] = store.EventIngestItem{ConsumerID: "c1", EventType: "order.created", Payload: []byte(`{}`)}
	}
	_, err := st.EventIngest(context.Background(), &store.EventIngestParams{Events: items, Now: c.Now()})
	require.NoError(t, err)
}

// claimAndEnd claims up to limit deliveries and ends the first with an
// attempt answered code, as status (and reason, if dead); it returns the
// deliveries claimed.
func claimAndEnd(t *testing.T, st store.Store, c *clock.Test, limit, code int, status herald.Status, reason herald.DeadReason) []*store.ClaimedDelivery {
	t.Helper()
	ctx := context.Background()
	claimed, err := st.DeliveryClaim(ctx, &store.DeliveryClaimParams{Limit: limit, Now: c.Now()})
	require.NoError(t, err)
	require.NotEmpty(t, claimed)
	applied, err := st.DeliveryCompleteMany(ctx, &store.DeliveryCompleteManyParams{Now: c.Now(), Outcomes: []store.DeliveryOutcome{{
		Lease:   store.Lease{DeliveryID: claimed[0].Delivery.ID, LeaseToken: claimed[0].LeaseToken},
		Attempt: herald.Attempt{Number: 1, StatusCode: code, AttemptedAt: c.Now()},
		Status:  status, DeadReason: reason,
	}}})
	require.NoError(t, err)
	require.Equal(t, []bool{true}, applied)
	return claimed
}

// value is the value of the counter or gauge name with the label pairs
// given; ok is false when the scrape has no such sample.
func value(t *testing.T, g prometheus.Gatherer, name string, labels ...string) (v float64, ok bool) {
	t.Helper()
	m := find(t, g, name, labels...)
	if m == nil {
		return 0, false
	}
	switch {
	case m.Counter != nil:
		return m.Counter.GetValue(), true
	case m.Gauge != nil:
		return m.Gauge.GetValue(), true
	}
	t.Fatalf("%s is neither a counter nor a gauge", name)
	return 0, false
}

// must is value for a sample that has to be there.
func must(t *testing.T, g prometheus.Gatherer, name string, labels ...string) float64 {
	t.Helper()
	v, ok := value(t, g, name, labels...)
	require.True(t, ok, "no sample %s%v in the scrape", name, labels)
	return v
}

// histogram is the sample count and sum of the histogram name.
func histogram(t *testing.T, g prometheus.Gatherer, name string) (uint64, float64) {
	t.Helper()
	m := find(t, g, name)
	require.NotNil(t, m, "no histogram %s", name)
	require.NotNil(t, m.Histogram, "%s is not a histogram", name)
	return m.Histogram.GetSampleCount(), m.Histogram.GetSampleSum()
}

func find(t *testing.T, g prometheus.Gatherer, name string, labels ...string) *dto.Metric {
	t.Helper()
	mfs, err := g.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	metrics:
		for _, m := range mf.GetMetric() {
			for i := 0; i+1 < len(labels); i += 2 {
				found := false
				for _, lp := range m.GetLabel() {
					if lp.GetName() == labels[i] && lp.GetValue() == labels[i+1] {
						found = true
					}
				}
				if !found {
					continue metrics
				}
			}
			return m
		}
	}
	return nil
}

// waitFor polls cond (real time, bounded) until it holds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.NewTimer(30 * time.Second)
	defer deadline.Stop()
	poll := time.NewTicker(time.Millisecond)
	defer poll.Stop()
	for !cond() {
		select {
		case <-deadline.C:
			t.Fatalf("timed out waiting for %s", what)
		case <-poll.C:
		}
	}
}

func TestQueueGauges(t *testing.T) {
	t.Parallel()

	t.Run("ReadFromTheStoreAtScrapeTime", func(t *testing.T) {
		t.Parallel()
		m, st, c, _ := setup(t, Options{})
		ingest(t, st, c, 2)
		c.Advance(90 * time.Second)
		ingest(t, st, c, 1) // due now, waited 0 s

		r := m.Registry()
		require.Equal(t, 3.0, must(t, r, NameQueueDue))
		require.Equal(t, 90.0, must(t, r, NameQueueOldestDue))
		require.Equal(t, 0.0, must(t, r, NameDeadLetterDepth))
		require.Equal(t, 3.0, must(t, r, NameDeliveriesStatus, "status", "pending"))
		for _, s := range []string{"delivering", "dead"} {
			require.Equal(t, 0.0, must(t, r, NameDeliveriesStatus, "status", s), s)
		}
	})

	t.Run("ByStatusCountsTheLiveAndDeadNotTheHistory", func(t *testing.T) {
		t.Parallel()
		m, st, c, _ := setup(t, Options{})
		var asked []store.StatsParams
		var mu sync.Mutex
		st.StatsFunc = func(ctx context.Context, p *store.StatsParams) (*store.Stats, error) {
			mu.Lock()
			asked = append(asked, *p)
			mu.Unlock()
			return st.Store.Stats(ctx, p)
		}
		ingest(t, st, c, 3)
		claimed := claimAndEnd(t, st, c, 2, 200, herald.StatusDelivered, "")
		require.Len(t, claimed, 2, "one ended, one still delivering")

		r := m.Registry()
		require.Equal(t, 1.0, must(t, r, NameDeliveriesStatus, "status", "pending"))
		require.Equal(t, 1.0, must(t, r, NameDeliveriesStatus, "status", "delivering"), "claimed and not yet ended")
		require.Equal(t, 0.0, must(t, r, NameDeliveriesStatus, "status", "dead"))
		for _, s := range []string{"delivered", "cancelled"} {
			_, ok := value(t, r, NameDeliveriesStatus, "status", s)
			require.False(t, ok, "%s is history, not scraped", s)
		}
		mu.Lock()
		defer mu.Unlock()
		require.NotEmpty(t, asked)
		for _, p := range asked {
			require.True(t, p.QueueOnly, "a scrape reads the queue, not the counts of every delivery kept")
		}
	})

	t.Run("DeadLetterDepthCountsDeadDeliveries", func(t *testing.T) {
		t.Parallel()
		m, st, c, _ := setup(t, Options{})
		ingest(t, st, c, 2)
		claimAndEnd(t, st, c, 1, 400, herald.StatusDead, herald.DeadClientError)

		r := m.Registry()
		require.Equal(t, 1.0, must(t, r, NameDeadLetterDepth))
		require.Equal(t, 1.0, must(t, r, NameDeliveriesStatus, "status", "dead"))
		require.Equal(t, 1.0, must(t, r, NameQueueDue))
	})

	t.Run("OneReadServesScrapesForASecond", func(t *testing.T) {
		t.Parallel()
		m, st, c, _ := setup(t, Options{})
		r := m.Registry()
		require.Equal(t, 0.0, must(t, r, NameQueueDue))
		ingest(t, st, c, 1)
		require.Equal(t, 0.0, must(t, r, NameQueueDue), "a second scrape within the second is served from the cache")
		require.EqualValues(t, 1, st.calls.Load())

		c.Advance(999 * time.Millisecond)
		require.Equal(t, 0.0, must(t, r, NameQueueDue))
		require.EqualValues(t, 1, st.calls.Load())

		c.Advance(time.Millisecond)
		require.Equal(t, 1.0, must(t, r, NameQueueDue), "after a second the store is read again")
		require.EqualValues(t, 2, st.calls.Load())
	})

	t.Run("CacheDurationIsConfigurable", func(t *testing.T) {
		t.Parallel()
		m, st, c, _ := setup(t, Options{StatsCacheFor: 10 * time.Second})
		r := m.Registry()
		must(t, r, NameQueueDue)
		c.Advance(9 * time.Second)
		must(t, r, NameQueueDue)
		require.EqualValues(t, 1, st.calls.Load())
		c.Advance(time.Second)
		must(t, r, NameQueueDue)
		require.EqualValues(t, 2, st.calls.Load())
	})

	t.Run("ConcurrentScrapesShareOneRead", func(t *testing.T) {
		t.Parallel()
		m, st, _, _ := setup(t, Options{})
		release := make(chan struct{})
		st.StatsFunc = func(ctx context.Context, p *store.StatsParams) (*store.Stats, error) {
			<-release
			return st.Store.Stats(ctx, p)
		}
		const scrapers = 8
		var started atomic.Int64
		var wg sync.WaitGroup
		for range scrapers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				started.Add(1)
				_, err := m.Registry().Gather()
				require.NoError(t, err)
			}()
		}
		waitFor(t, "the scrapers to start and one to read", func() bool {
			return started.Load() == scrapers && st.calls.Load() >= 1
		})
		close(release)
		wg.Wait()
		require.EqualValues(t, 1, st.calls.Load())
	})

	t.Run("SlowReadTimesOutAndLeavesTheGaugesOut", func(t *testing.T) {
		t.Parallel()
		m, st, c, _ := setup(t, Options{StatsTimeout: 20 * time.Millisecond})
		st.StatsFunc = func(ctx context.Context, _ *store.StatsParams) (*store.Stats, error) {
			<-ctx.Done() // a database that does not answer
			return nil, ctx.Err()
		}
		r := m.Registry()
		for _, name := range []string{NameQueueDue, NameQueueOldestDue, NameDeadLetterDepth, NameDeliveriesStatus} {
			_, ok := value(t, r, name)
			require.False(t, ok, "%s is left out while the store does not answer", name)
		}
		require.EqualValues(t, 1, st.calls.Load(), "the failure is cached like a success")
		require.Equal(t, 1.0, must(t, r, NameQueueReadErrors))
		_, ok := value(t, r, NameAttemptsInFlight)
		require.True(t, ok, "the rest of the scrape is unaffected")

		// The database is back. (It answers without regard to the 20 ms
		// bound, which a loaded test machine could miss.)
		st.StatsFunc = func(_ context.Context, p *store.StatsParams) (*store.Stats, error) {
			return st.Store.Stats(context.Background(), p)
		}
		c.Advance(time.Second)
		require.Equal(t, 0.0, must(t, r, NameQueueDue))
		require.Equal(t, 1.0, must(t, r, NameQueueReadErrors))
	})

	t.Run("FailedReadIsCountedAndLogged", func(t *testing.T) {
		t.Parallel()
		var logged syncbuf.Buffer
		m, st, _, _ := setup(t, Options{Logger: slog.New(slog.NewTextHandler(&logged, nil))})
		st.StatsFunc = func(context.Context, *store.StatsParams) (*store.Stats, error) {
			return nil, errors.New("connection refused")
		}
		_, ok := value(t, m.Registry(), NameQueueDue)
		require.False(t, ok)
		require.Equal(t, 1.0, must(t, m.Registry(), NameQueueReadErrors))
		require.Contains(t, logged.String(), "connection refused")
	})
}

func TestDispatchHooks(t *testing.T) {
	t.Parallel()

	t.Run("AttemptsByClassAndDuration", func(t *testing.T) {
		t.Parallel()
		m, _, _, _ := setup(t, Options{})
		for _, res := range []sender.Result{
			{Class: sender.Success, Duration: 20 * time.Millisecond},
			{Class: sender.Retryable, Duration: 3 * time.Second},
			{Class: sender.Retryable, Duration: time.Second},
			{Class: sender.Gone, Duration: 10 * time.Millisecond},
			{Class: sender.ClientError, Duration: 30 * time.Millisecond},
			{Class: 0, Duration: 40 * time.Millisecond}, // unknown: retried, so counted as retryable
		} {
			m.AttemptDone(&store.ClaimedDelivery{}, &res, &store.DeliveryOutcome{})
		}
		r := m.Registry()
		require.Equal(t, 1.0, must(t, r, NameAttempts, "class", "success"))
		require.Equal(t, 3.0, must(t, r, NameAttempts, "class", "retryable"))
		require.Equal(t, 1.0, must(t, r, NameAttempts, "class", "gone"))
		require.Equal(t, 1.0, must(t, r, NameAttempts, "class", "client_error"))
		n, sum := histogram(t, r, NameAttemptDuration)
		require.EqualValues(t, 6, n)
		require.InDelta(t, 4.1, sum, 1e-9)
	})

	t.Run("InFlight", func(t *testing.T) {
		t.Parallel()
		m, _, _, _ := setup(t, Options{})
		m.AttemptsInFlight(1)
		m.AttemptsInFlight(1)
		m.AttemptsInFlight(-1)
		require.Equal(t, 1.0, must(t, m.Registry(), NameAttemptsInFlight))
	})

	t.Run("Redelivered", func(t *testing.T) {
		t.Parallel()
		m, _, _, _ := setup(t, Options{})
		require.Equal(t, 0.0, must(t, m.Registry(), NameRedelivered))
		m.Redelivered(&store.ClaimedDelivery{Redelivered: true})
		m.Redelivered(&store.ClaimedDelivery{Redelivered: true})
		require.Equal(t, 2.0, must(t, m.Registry(), NameRedelivered))
	})

	t.Run("AttemptSkippedLeaseExpired", func(t *testing.T) {
		t.Parallel()
		m, _, _, _ := setup(t, Options{})
		require.Equal(t, 0.0, must(t, m.Registry(), NameLeaseTooShort))
		m.AttemptSkippedLeaseExpired(&store.ClaimedDelivery{})
		require.Equal(t, 1.0, must(t, m.Registry(), NameLeaseTooShort))
		require.Equal(t, 0.0, must(t, m.Registry(), NameAttempts, "class", "success"), "no attempt was made")
	})

	t.Run("AttemptFrozen", func(t *testing.T) {
		t.Parallel()
		m, _, _, _ := setup(t, Options{})
		require.Equal(t, 0.0, must(t, m.Registry(), NameAttemptsFrozen))
		m.AttemptFrozen(&store.ClaimedDelivery{})
		require.Equal(t, 1.0, must(t, m.Registry(), NameAttemptsFrozen))
	})

	t.Run("OutcomesAppliedAreCounted", func(t *testing.T) {
		t.Parallel()
		m, _, _, _ := setup(t, Options{})
		c := &store.ClaimedDelivery{Event: herald.Event{CreatedAt: start}}
		m.OutcomeWritten(c, &store.DeliveryOutcome{Status: herald.StatusDelivered}, start.Add(3*time.Second), true)
		m.OutcomeWritten(c, &store.DeliveryOutcome{Status: herald.StatusPending, RetryIn: time.Minute}, start, true)
		m.OutcomeWritten(c, &store.DeliveryOutcome{Status: herald.StatusDead, DeadReason: herald.DeadExhausted}, start, true)
		m.OutcomeWritten(c, &store.DeliveryOutcome{Status: herald.StatusDead, DeadReason: herald.DeadGone}, start, true)
		m.OutcomeWritten(c, &store.DeliveryOutcome{Status: herald.StatusDead, DeadReason: herald.DeadClientError}, start, true)
		m.OutcomeWritten(c, &store.DeliveryOutcome{Status: herald.StatusDead, DeadReason: "novel"}, start, true)

		r := m.Registry()
		require.Equal(t, 1.0, must(t, r, NameDeliveries, "outcome", "delivered"))
		require.Equal(t, 1.0, must(t, r, NameDeliveries, "outcome", "retry"))
		require.Equal(t, 4.0, must(t, r, NameDeliveries, "outcome", "dead"))
		for _, reason := range []string{"exhausted", "gone", "client_error", "novel"} {
			require.Equal(t, 1.0, must(t, r, NameDeliveriesDead, "reason", reason), reason)
		}
		require.Equal(t, 0.0, must(t, r, NameOutcomesStale))
		n, sum := histogram(t, r, NameDeliveryLatency)
		require.EqualValues(t, 1, n, "only delivered outcomes have a latency")
		require.Equal(t, 3.0, sum)
	})

	t.Run("DeadAtClaimCounted", func(t *testing.T) {
		t.Parallel()
		m, _, _, _ := setup(t, Options{})
		require.Equal(t, 0.0, must(t, m.Registry(), NameDeliveriesDead, "reason", "lease_lost"))
		m.DeliveryDead(herald.DeadLeaseLost)
		r := m.Registry()
		require.Equal(t, 1.0, must(t, r, NameDeliveriesDead, "reason", "lease_lost"))
		require.Equal(t, 1.0, must(t, r, NameDeliveries, "outcome", "dead"))
	})

	t.Run("LatencyNeverNegative", func(t *testing.T) {
		t.Parallel()
		m, _, _, _ := setup(t, Options{})
		// The database clock, which stamped the event, runs ahead of this node's.
		c := &store.ClaimedDelivery{Event: herald.Event{CreatedAt: start.Add(2 * time.Second)}}
		m.OutcomeWritten(c, &store.DeliveryOutcome{Status: herald.StatusDelivered}, start, true)
		n, sum := histogram(t, m.Registry(), NameDeliveryLatency)
		require.EqualValues(t, 1, n)
		require.Equal(t, 0.0, sum)
	})

	t.Run("OutcomeNotAppliedCountsOnlyAsNotApplied", func(t *testing.T) {
		t.Parallel()
		m, _, _, _ := setup(t, Options{})
		c := &store.ClaimedDelivery{Event: herald.Event{CreatedAt: start}}
		m.OutcomeWritten(c, &store.DeliveryOutcome{Status: herald.StatusDelivered}, start, false)
		r := m.Registry()
		require.Equal(t, 1.0, must(t, r, NameOutcomesStale))
		require.Equal(t, 0.0, must(t, r, NameDeliveries, "outcome", "delivered"))
		n, _ := histogram(t, r, NameDeliveryLatency)
		require.Zero(t, n)
	})
}

func TestCountIngest(t *testing.T) {
	t.Parallel()
	m, st, c, _ := setup(t, Options{})
	counted := m.CountIngest(st.Store)
	ctx := context.Background()
	ev := func(key string) store.EventIngestItem {
		return store.EventIngestItem{ConsumerID: "c1", EventType: "a.b", Payload: []byte(`{}`), IdempotencyKey: key}
	}
	_, err := counted.EventIngest(ctx, &store.EventIngestParams{Now: c.Now(), Events: []store.EventIngestItem{ev("k1"), ev("k1"), ev("")}})
	require.NoError(t, err)
	require.Equal(t, 2.0, must(t, m.Registry(), NameEventsIngested), "the duplicate in the batch is not counted")

	_, err = counted.EventIngest(ctx, &store.EventIngestParams{Now: c.Now(), Events: []store.EventIngestItem{ev("k1")}})
	require.NoError(t, err)
	require.Equal(t, 2.0, must(t, m.Registry(), NameEventsIngested), "a repeated key creates nothing")

	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	_, err = counted.EventIngest(cancelled, &store.EventIngestParams{Now: c.Now(), Events: []store.EventIngestItem{ev("")}})
	require.Error(t, err, "a failed ingest commits nothing")
	require.Equal(t, 2.0, must(t, m.Registry(), NameEventsIngested), "and counts nothing")

	_, err = counted.EventGet(ctx, "evt_missing")
	require.ErrorIs(t, err, store.ErrNotFound, "other calls pass through")
}

func TestExposition(t *testing.T) {
	t.Parallel()

	t.Run("ServedOverHTTPInTheTextFormat", func(t *testing.T) {
		t.Parallel()
		m, _, _, _ := setup(t, Options{})
		m.EventsIngested(3)
		srv := httptest.NewServer(m.Handler())
		defer srv.Close()
		resp, err := http.Get(srv.URL)
		require.NoError(t, err)
		defer resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode)
		require.Contains(t, resp.Header.Get("Content-Type"), "text/plain")
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		require.Contains(t, string(body), "\n"+NameEventsIngested+" 3\n")
		require.Contains(t, string(body), "\ngo_goroutines ")
		require.Contains(t, string(body), "\n"+NameQueueDue+" 0\n")
	})

	t.Run("NamesLabelsAndLint", func(t *testing.T) {
		t.Parallel()
		m, _, _, _ := setup(t, Options{})
		// Give every vector a child, so that every family is in the scrape.
		m.OutcomeWritten(&store.ClaimedDelivery{}, &store.DeliveryOutcome{Status: herald.StatusDelivered}, start, true)
		mfs, err := m.Registry().Gather()
		require.NoError(t, err)
		own := map[string]bool{}
		allowed := map[string]bool{"outcome": true, "reason": true, "class": true, "status": true, "table": true, "kind": true, "result": true}
		for _, mf := range mfs {
			name := mf.GetName()
			if strings.HasPrefix(name, "go_") || strings.HasPrefix(name, "process_") {
				continue
			}
			require.True(t, strings.HasPrefix(name, "herald_"), name)
			own[name] = true
			for _, metric := range mf.GetMetric() {
				for _, lp := range metric.GetLabel() {
					require.True(t, allowed[lp.GetName()], "%s has label %s: labels take values from a small fixed set only", name, lp.GetName())
				}
			}
		}
		for _, name := range []string{
			NameEventsIngested, NameDeliveries, NameDeliveriesDead, NameOutcomesStale, NameRedelivered, NameLeaseTooShort, NameAttemptsFrozen, NameAttempts,
			NameAttemptDuration, NameDeliveryLatency, NameAttemptsInFlight, NameQueueDue,
			NameQueueOldestDue, NameDeadLetterDepth, NameDeliveriesStatus, NameQueueReadErrors, NamePurgedRows, NameNoticesSent,
			NameLockConflicts, NameRequestLimitFailedOpen,
		} {
			require.True(t, own[name], "%s is in the scrape", name)
		}
		problems, err := testutil.GatherAndLint(m.Registry())
		require.NoError(t, err)
		for _, p := range problems {
			if strings.HasPrefix(p.Metric, "herald_") {
				t.Errorf("lint: %s: %s", p.Metric, p.Text)
			}
		}
	})

	t.Run("LockConflictsAreTheStores", func(t *testing.T) {
		t.Parallel()
		lc := &lockCountingStore{}
		m := New(lc, Options{})
		require.Equal(t, 0.0, gatherValue(t, m, NameLockConflicts))
		lc.n.Store(7)
		require.Equal(t, 7.0, gatherValue(t, m, NameLockConflicts), "read at each scrape")
		plain, _, _, _ := setup(t, Options{})
		require.Equal(t, 0.0, gatherValue(t, plain, NameLockConflicts), "a store that counts none")
	})

	t.Run("EachMetricsHasItsOwnRegistry", func(t *testing.T) {
		t.Parallel()
		a, _, _, _ := setup(t, Options{})
		b, _, _, _ := setup(t, Options{})
		a.EventsIngested(5)
		require.Equal(t, 5.0, must(t, a.Registry(), NameEventsIngested))
		require.Equal(t, 0.0, must(t, b.Registry(), NameEventsIngested))
	})
}

// lockCountingStore is a queue that is always empty and a LockCounter.
type lockCountingStore struct{ n atomic.Int64 }

func (s *lockCountingStore) Stats(context.Context, *store.StatsParams) (*store.Stats, error) {
	return &store.Stats{}, nil
}

func (s *lockCountingStore) LockConflicts() int64 { return s.n.Load() }

// gatherValue is the value of the one unlabelled counter or gauge name.
func gatherValue(t *testing.T, m *Metrics, name string) float64 {
	t.Helper()
	mfs, err := m.Registry().Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		require.Len(t, mf.GetMetric(), 1, name)
		met := mf.GetMetric()[0]
		if c := met.GetCounter(); c != nil {
			return c.GetValue()
		}
		return met.GetGauge().GetValue()
	}
	t.Fatalf("%s is not in the scrape", name)
	return 0
}

// TestCountIngestFilterErrors: an endpoint skipped because its filter
// could not be evaluated counts in herald_filter_errors_total; one whose
// filter is false does not.
func TestCountIngestFilterErrors(t *testing.T) {
	t.Parallel()
	m, st, c, _ := setup(t, Options{})
	ctx := context.Background()
	for _, f := range []string{"payload.missing.x == 1", "payload.n > 10"} {
		_, err := st.Store.EndpointCreate(ctx, &store.EndpointCreateParams{Now: c.Now(), Endpoint: &herald.Endpoint{
			ConsumerID: "c1", URL: "https://example.com/hooks", EventTypes: []string{"*"}, Enabled: true,
			Secret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", Filter: f,
		}})
		require.NoError(t, err)
	}
	counted := m.CountIngest(st.Store)
	_, err := counted.EventIngest(ctx, &store.EventIngestParams{Now: c.Now(), Events: []store.EventIngestItem{
		{ConsumerID: "c1", EventType: "a.b", Payload: []byte(`{"n": 1}`)},
		{ConsumerID: "c1", EventType: "a.b", Payload: []byte(`{"n": 1}`)},
	}})
	require.NoError(t, err)
	require.Equal(t, 2.0, must(t, m.Registry(), NameFilterErrors))
}
