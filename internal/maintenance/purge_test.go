package maintenance_test

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhooks/herald"
	"github.com/heraldhooks/herald/internal/clock"
	"github.com/heraldhooks/herald/internal/maintenance"
	"github.com/heraldhooks/herald/internal/ratelimit"
	"github.com/heraldhooks/herald/internal/store"
	"github.com/heraldhooks/herald/internal/store/sqlitestore"
	"github.com/heraldhooks/herald/internal/store/sqlitestore/sqlitetest"
	"github.com/heraldhooks/herald/internal/syncbuf"
)

var purgeStart = time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)

const (
	day   = 24 * time.Hour
	month = 30 * day
)

// fixture is a purger on a real SQLite store with the test clock, whose
// batches that deleted rows arrive on purged.
type fixture struct {
	store  store.Store
	clock  *clock.Test
	log    *syncbuf.Buffer
	purged chan store.PurgeResult
	p      *maintenance.Purger
}

func setup(t *testing.T, st store.Store) *fixture {
	t.Helper()
	if st == nil {
		s, err := sqlitestore.Open(t.Context(), sqlitetest.Path(t), nil)
		require.NoError(t, err)
		t.Cleanup(func() { require.NoError(t, s.Close()) })
		require.NoError(t, s.Migrate(t.Context()))
		st = s
	}
	f := &fixture{store: st, clock: clock.NewTest(purgeStart), log: &syncbuf.Buffer{}, purged: make(chan store.PurgeResult, 100)}
	f.p = maintenance.NewPurger(maintenance.PurgerConfig{
		Store:     st,
		Clock:     f.clock,
		Logger:    slog.New(slog.NewTextHandler(f.log, nil)),
		Retention: month,
		Limit:     2,
		Interval:  time.Hour,
		Pause:     time.Nanosecond,
		Purged:    func(r store.PurgeResult) { f.purged <- r },
	})
	return f
}

// ingest makes n events of a consumer with no endpoint (no deliveries) at
// the clock's time.
func (f *fixture) ingest(t *testing.T, n int) {
	t.Helper()
	items := make([]store.EventIngestItem, n)
	for i := range items {
		items[i] = store.EventIngestItem{ConsumerID: "nobody", EventType: "order.created", Payload: []byte(`{}`)}
	}
	_, err := f.store.EventIngest(t.Context(), &store.EventIngestParams{Events: items, Now: f.clock.Now()})
	require.NoError(t, err)
}

func TestPassPurgesInBatchesAndSaysSo(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	f.ingest(t, 5)

	f.clock.Advance(month - time.Second)
	res, err := f.p.Pass(t.Context())
	require.NoError(t, err)
	require.True(t, res.Done)
	require.Zero(t, res.Rows(), "not yet past the retention")
	require.Empty(t, f.log.String(), "a pass that deleted nothing logs nothing")

	f.clock.Advance(2 * time.Second)
	res, err = f.p.Pass(t.Context())
	require.NoError(t, err)
	require.True(t, res.Done)
	require.EqualValues(t, 5, res.Events)
	var sum int64
	for range 3 { // 2 + 2 + 1
		r := <-f.purged
		require.LessOrEqual(t, r.Events, int64(2), "a batch looks at Limit events")
		sum += r.Events
	}
	require.EqualValues(t, 5, sum)
	require.Contains(t, f.log.String(), `msg="purged history past retention" events=5 deliveries=0 attempts=0 batches=3 retention=720h0m0s`)
}

// TestPassPurgesOldActivity: a pass deletes the activity series' minutes
// and the depth series' samples older than 25 hours, with a retention of
// 0 too (every event kept).
func TestPassPurgesOldActivity(t *testing.T) {
	t.Parallel()
	st, err := sqlitestore.Open(t.Context(), sqlitetest.Path(t), nil)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, st.Close()) })
	require.NoError(t, st.Migrate(t.Context()))
	c := clock.NewTest(purgeStart)
	p := maintenance.NewPurger(maintenance.PurgerConfig{Store: st, Clock: c, Pause: time.Nanosecond})

	ep, err := st.EndpointCreate(t.Context(), &store.EndpointCreateParams{Now: purgeStart, Endpoint: &herald.Endpoint{
		ConsumerID: "c", URL: "https://example.com/hook", EventTypes: []string{"*"}, Secret: "whsec_dGVzdA==",
		Enabled: true, Timeout: 10 * time.Second, SignatureScheme: herald.SchemeStandard}})
	require.NoError(t, err)
	_, err = st.EventIngest(t.Context(), &store.EventIngestParams{Now: purgeStart, Events: []store.EventIngestItem{
		{ConsumerID: ep.ConsumerID, EventType: "order.created", Payload: []byte(`{}`)}}})
	require.NoError(t, err)
	claimed, err := st.DeliveryClaim(t.Context(), &store.DeliveryClaimParams{Limit: 1, LeaseMargin: time.Minute, Now: purgeStart})
	require.NoError(t, err)
	require.Len(t, claimed, 1)
	_, err = st.DeliveryCompleteMany(t.Context(), &store.DeliveryCompleteManyParams{Now: purgeStart, Outcomes: []store.DeliveryOutcome{{
		Lease: store.Lease{DeliveryID: claimed[0].Delivery.ID, LeaseToken: claimed[0].LeaseToken}, Status: herald.StatusDelivered,
		Attempt: herald.Attempt{StatusCode: 200, Duration: time.Millisecond}}}})
	require.NoError(t, err)
	attempts := func() int64 {
		points, err := st.ActivitySeries(t.Context(), &store.ActivitySeriesParams{Window: 24 * time.Hour, Step: time.Hour, Now: purgeStart.Add(time.Hour)})
		require.NoError(t, err)
		var n int64
		for _, pt := range points {
			n += pt.Attempts
		}
		return n
	}
	wrote, err := st.DepthSample(t.Context(), &store.DepthSampleParams{Now: purgeStart})
	require.NoError(t, err)
	require.True(t, wrote)
	samples := func() int {
		points, err := st.DepthSeries(t.Context(), &store.DepthSeriesParams{Window: 24 * time.Hour, Step: time.Hour, Now: purgeStart.Add(time.Hour)})
		require.NoError(t, err)
		n := 0
		for _, pt := range points {
			if pt.Sampled {
				n++
			}
		}
		return n
	}

	c.Advance(24 * time.Hour)
	_, err = p.Pass(t.Context())
	require.NoError(t, err)
	require.EqualValues(t, 1, attempts(), "a day old: kept")
	require.Equal(t, 1, samples(), "a day old: kept")
	c.Advance(2 * time.Hour)
	_, err = p.Pass(t.Context())
	require.NoError(t, err)
	require.Zero(t, attempts(), "26 hours old: purged")
	require.Zero(t, samples(), "26 hours old: purged")
	_, err = st.EventGet(t.Context(), claimed[0].Event.ID)
	require.NoError(t, err, "a retention of 0 keeps every event")
}

// TestPassForgetsRefilledRequestBuckets: a pass deletes the request
// limits' shared buckets that have refilled by its time, and keeps the
// others.
func TestPassForgetsRefilledRequestBuckets(t *testing.T) {
	t.Parallel()
	st, err := sqlitestore.Open(t.Context(), sqlitetest.Path(t), nil)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, st.Close()) })
	require.NoError(t, st.Migrate(t.Context()))
	c := clock.NewTest(purgeStart)
	p := maintenance.NewPurger(maintenance.PurgerConfig{Store: st, Clock: c, Pause: time.Nanosecond})
	r := ratelimit.Rate{PerSecond: 1, Burst: 10}
	for name, want := range map[string]int{"key a": 10, "key b": 1} {
		got, err := st.RequestBucketTake(t.Context(), &store.RequestBucketTakeParams{Name: name, Rate: r, Want: want, Now: purgeStart})
		require.NoError(t, err)
		require.Equal(t, want, got.Got)
	}
	purge := func(d time.Duration) int {
		n, err := st.RequestBucketPurge(t.Context(), &store.RequestBucketPurgeParams{Now: purgeStart.Add(d)})
		require.NoError(t, err)
		return n
	}

	c.Advance(5 * time.Second)
	_, err = p.Pass(t.Context())
	require.NoError(t, err)
	require.Zero(t, purge(5*time.Second), "b, full after a second, is gone")
	require.Equal(t, 1, purge(10*time.Second), "a, full after 10 s, was kept")
}

func TestRunPassesEveryIntervalOnTheClock(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- f.p.Run(ctx) }()
	waitWaiting(t, f.clock)

	f.ingest(t, 3)
	f.clock.Advance(month + time.Hour) // the retention passes, and so does the interval
	var sum int64
	for sum < 3 {
		select {
		case r := <-f.purged:
			sum += r.Events
		case <-time.After(time.Minute):
			t.Fatal("no purge after the interval")
		}
	}
	require.EqualValues(t, 3, sum)

	cancel()
	require.NoError(t, <-done)
}

// fakeStore answers EventPurge with EventPurgeFunc and purges no
// activity, depth or request bucket; the rest of the store, which the fixture holds, is
// not used.
type fakeStore struct {
	store.Store
	mu             sync.Mutex
	calls          int
	EventPurgeFunc func(p *store.EventPurgeParams) (store.PurgeResult, error)
}

func (s *fakeStore) ActivityPurge(context.Context, *store.ActivityPurgeParams) (int, error) {
	return 0, nil
}

func (s *fakeStore) DepthPurge(context.Context, *store.DepthPurgeParams) (int, error) {
	return 0, nil
}

func (s *fakeStore) RequestBucketPurge(context.Context, *store.RequestBucketPurgeParams) (int, error) {
	return 0, nil
}

func (s *fakeStore) EventPurge(_ context.Context, p *store.EventPurgeParams) (store.PurgeResult, error) {
	s.mu.Lock()
	s.calls++
	s.mu.Unlock()
	return s.EventPurgeFunc(p)
}

func TestABusyStoreEndsThePass(t *testing.T) {
	t.Parallel()
	fs := &fakeStore{EventPurgeFunc: func(p *store.EventPurgeParams) (store.PurgeResult, error) {
		return store.PurgeResult{Busy: true, Next: p.After}, nil
	}}
	f := setup(t, fs)
	res, err := f.p.Pass(t.Context())
	require.NoError(t, err)
	require.True(t, res.Busy)
	require.Equal(t, 1, fs.calls, "another node purges: this one waits for its next pass")
}

func TestAFailedPassIsLoggedAndTheNextOneComes(t *testing.T) {
	t.Parallel()
	fs := &fakeStore{EventPurgeFunc: func(p *store.EventPurgeParams) (store.PurgeResult, error) {
		return store.PurgeResult{}, errors.New("database away")
	}}
	f := setup(t, fs)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- f.p.Run(ctx) }()
	waitWaiting(t, f.clock)
	require.Contains(t, f.log.String(), "database away")
	f.clock.Advance(time.Hour)
	waitWaiting(t, f.clock)
	fs.mu.Lock()
	require.Equal(t, 2, fs.calls)
	fs.mu.Unlock()
	cancel()
	require.NoError(t, <-done)
}

// waitWaiting waits until the purger sleeps on the clock, its pass over.
func waitWaiting(t *testing.T, c *clock.Test) {
	t.Helper()
	deadline := time.NewTimer(time.Minute)
	defer deadline.Stop()
	poll := time.NewTicker(time.Millisecond)
	defer poll.Stop()
	for c.Waiters() == 0 {
		select {
		case <-deadline.C:
			t.Fatal("the purger never went to sleep")
		case <-poll.C:
		}
	}
}
