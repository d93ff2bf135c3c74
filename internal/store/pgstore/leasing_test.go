package pgstore

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/heraldhooks/herald"
	"github.com/heraldhooks/herald/internal/store"
)

// slotTaker is a store.Taker with a fixed number of free slots, which
// keeps what it is handed and checks that every reservation is taken
// once, its slots given back or filled.
type slotTaker struct {
	t      *testing.T
	mu     sync.Mutex
	free   int
	open   map[*int]int // reservation -> slots
	taken  []*store.ClaimedDelivery
	from   time.Time
	margin time.Duration
}

func newSlotTaker(t *testing.T, free int) *slotTaker {
	k := &slotTaker{t: t, free: free, open: map[*int]int{}, from: t0.Add(-time.Second), margin: 15 * time.Second}
	t.Cleanup(func() {
		k.mu.Lock()
		defer k.mu.Unlock()
		require.Empty(t, k.open, "reservations never taken")
	})
	return k
}

// setTaker makes a slotTaker with free slots s's taker.
func setTaker(t *testing.T, s *Store, free int) *slotTaker {
	k := newSlotTaker(t, free)
	s.SetTaker(k)
	return k
}

func (k *slotTaker) Reserve(n int) store.Reservation {
	k.mu.Lock()
	defer k.mu.Unlock()
	n = min(n, k.free)
	k.free -= n
	ref := new(int)
	k.open[ref] = n
	return store.Reservation{Slots: n, From: k.from, LeaseMargin: k.margin, Ref: ref}
}

func (k *slotTaker) Take(r store.Reservation, claimed []*store.ClaimedDelivery) {
	k.mu.Lock()
	defer k.mu.Unlock()
	ref := r.Ref.(*int)
	n, ok := k.open[ref]
	require.True(k.t, ok, "a reservation taken twice, or never made")
	delete(k.open, ref)
	require.Equal(k.t, r.Slots, n)
	require.LessOrEqual(k.t, len(claimed), n, "more leased than reserved")
	k.free += n - len(claimed)
	k.taken = append(k.taken, claimed...)
}

func (k *slotTaker) got() []*store.ClaimedDelivery {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.taken
}

// statuses counts the deliveries of ep by status.
func statuses(t *testing.T, s *Store, ep string) map[string]int {
	t.Helper()
	rows, err := s.pool.Query(t.Context(), `SELECT status, count(*) FROM deliveries WHERE endpoint_id = $1 GROUP BY status`, ep)
	require.NoError(t, err)
	out := map[string]int{}
	for rows.Next() {
		var st string
		var n int
		require.NoError(t, rows.Scan(&st, &n))
		out[st] = n
	}
	require.NoError(t, rows.Err())
	return out
}

// TestIngestLeasesToTheTaker: with a taker, what a claim would take at
// once is leased at ingest and handed over whole (event, endpoint with its
// secret, lease token and expiry); claims do not take it while the lease
// holds, take it again as a redelivery once it ran out, and an outcome
// under the ingest's lease applies.
func TestIngestLeasesToTheTaker(t *testing.T) {
	t.Parallel()
	s := openNodes(t, 1)[0]
	ctx := t.Context()
	ep := createEndpoint(t, s, "c1")
	k := setTaker(t, s, 10)
	res := ingest(t, s, "c1", 3)

	got := k.got()
	require.Len(t, got, 3)
	for i, c := range got {
		require.Equal(t, res[i].Deliveries[0].ID, c.Delivery.ID, "in ingest order")
		require.Equal(t, herald.StatusDelivering, c.Delivery.Status)
		require.Equal(t, res[i].Event.ID, c.Event.ID)
		require.Equal(t, res[i].Event.Payload, c.Event.Payload)
		require.Equal(t, ep.ID, c.Endpoint.ID)
		require.Equal(t, ep.Secret, c.Endpoint.Secret)
		require.Equal(t, int64(1), c.LeaseToken)
		lease := (&store.DeliveryClaimParams{LeaseMargin: k.margin}).LeaseFor(ep)
		require.Equal(t, t0.Add(lease), c.LeaseExpiresAt, "the lease counted from the ingest's now")
		require.False(t, c.Redelivered)
	}
	require.Equal(t, map[string]int{"delivering": 3}, statuses(t, s, ep.ID))
	require.Empty(t, queueMismatches(t, s))

	none, err := s.DeliveryClaim(ctx, &store.DeliveryClaimParams{Limit: 10, LeaseMargin: time.Second, Now: t0})
	require.NoError(t, err)
	require.Empty(t, none, "leased at ingest")

	applied, err := s.DeliveryCompleteMany(ctx, &store.DeliveryCompleteManyParams{
		Outcomes: []store.DeliveryOutcome{delivered(got[0])}, Now: t0})
	require.NoError(t, err)
	require.Equal(t, []bool{true}, applied, "the ingest's lease holds")

	later := got[1].LeaseExpiresAt.Add(time.Second)
	again, err := s.DeliveryClaim(ctx, &store.DeliveryClaimParams{Limit: 10, LeaseMargin: time.Second, Now: later})
	require.NoError(t, err)
	require.Len(t, again, 2, "the leases ran out: the endpoint's due mark found them")
	for _, c := range again {
		require.True(t, c.Redelivered)
		require.Equal(t, int64(2), c.LeaseToken)
	}
	require.Empty(t, queueMismatches(t, s))
}

// TestIngestLeasesOnlyWhatAClaimWouldTake: FIFO endpoints, rate limits,
// breakers not closed, pauses and endpoints slowed down by 429s get
// nothing leased at ingest; their deliveries are queued and claims take
// them as ever. A plain endpoint of the same ingest gets its leased.
func TestIngestLeasesOnlyWhatAClaimWouldTake(t *testing.T) {
	t.Parallel()
	s := openNodes(t, 1)[0]
	ctx := t.Context()
	probeAt := t0.Add(time.Minute)
	pausedUntil := t0.Add(time.Minute)
	eps := []*herald.Endpoint{
		createEndpoint(t, s, "c1", func(e *herald.Endpoint) { e.Ordering = herald.OrderingFIFO }),
		createEndpoint(t, s, "c1", func(e *herald.Endpoint) { e.RateLimit = &herald.RateLimit{PerSecond: 100, Burst: 100} }),
		createEndpoint(t, s, "c1"),
		createEndpoint(t, s, "c1"),
		createEndpoint(t, s, "c1"),
	}
	plain := createEndpoint(t, s, "c1")
	for id, h := range map[string]herald.EndpointHealth{
		eps[2].ID: {BreakerState: herald.BreakerOpen, ProbeAt: &probeAt, ConsecutiveFailures: 5},
		eps[3].ID: {BreakerState: herald.BreakerClosed, PausedUntil: &pausedUntil},
		eps[4].ID: {BreakerState: herald.BreakerClosed, RateFactor: 0.5},
	} {
		doc, until := encodeHealth(h)
		_, err := s.pool.Exec(ctx, writeHealthSQL, []string{id}, []string{string(doc)}, []*time.Time{until})
		require.NoError(t, err)
	}
	k := setTaker(t, s, 10)
	ingest(t, s, "c1", 2)

	require.Len(t, k.got(), 2)
	for _, c := range k.got() {
		require.Equal(t, plain.ID, c.Endpoint.ID)
	}
	require.Equal(t, map[string]int{"delivering": 2}, statuses(t, s, plain.ID))
	for _, ep := range eps {
		require.Equal(t, map[string]int{"pending": 2}, statuses(t, s, ep.ID), ep.ID)
	}
	require.Empty(t, queueMismatches(t, s))
	claimed, err := s.DeliveryClaim(ctx, &store.DeliveryClaimParams{Limit: 10, LeaseMargin: time.Second, Now: t0})
	require.NoError(t, err)
	byEndpoint := map[string]int{}
	for _, c := range claimed {
		byEndpoint[c.Delivery.EndpointID]++
	}
	require.Equal(t, 1, byEndpoint[eps[0].ID], "the FIFO head")
	require.Zero(t, byEndpoint[eps[2].ID], "the breaker is open")
	require.Zero(t, byEndpoint[eps[3].ID], "paused")
}

// TestIngestLeasesWithinSlotsAndCaps: no more is leased than the slots
// reserved, nor than the room under the endpoint's in-flight cap, counting
// its leases and the new deliveries already due (a claim takes those).
func TestIngestLeasesWithinSlotsAndCaps(t *testing.T) {
	t.Parallel()
	s := openNodes(t, 1)[0]
	ctx := t.Context()
	ep := createEndpoint(t, s, "c1", func(e *herald.Endpoint) { e.MaxInFlight = 4 })

	k := newSlotTaker(t, 0) // no slot free: all queued
	s.SetTaker(k)
	ingest(t, s, "c1", 2)
	require.Empty(t, k.got())

	k = setTaker(t, s, 1) // one slot
	ingest(t, s, "c1", 3)
	require.Len(t, k.got(), 1)
	require.Equal(t, map[string]int{"pending": 4, "delivering": 1}, statuses(t, s, ep.ID))

	// Cap 4: one leased and four new due leave no room.
	k = setTaker(t, s, 10)
	ingest(t, s, "c1", 1)
	require.Empty(t, k.got())

	claimed, err := s.DeliveryClaim(ctx, &store.DeliveryClaimParams{Limit: 10, LeaseMargin: time.Second, Now: t0})
	require.NoError(t, err)
	require.Len(t, claimed, 3, "the cap's room, oldest first")
	// Four in flight, two due: an ingest leases nothing.
	ingest(t, s, "c1", 1)
	require.Empty(t, k.got())
	require.Empty(t, queueMismatches(t, s))
}

// TestIngestLeasesNoEndpointAnotherWriterHolds: an endpoint locked by
// another transaction (a claim deciding for it, an outcome write) gets
// its deliveries queued, and the ingest does not wait for the lock.
func TestIngestLeasesNoEndpointAnotherWriterHolds(t *testing.T) {
	t.Parallel()
	s := openNodes(t, 1)[0]
	ctx := t.Context()
	ep := createEndpoint(t, s, "c1")
	tx, err := s.pool.Begin(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { _ = tx.Rollback(ctx) })
	var id string
	require.NoError(t, tx.QueryRow(ctx, `SELECT id FROM endpoints WHERE id = $1 FOR UPDATE`, ep.ID).Scan(&id))

	k := setTaker(t, s, 10)
	wake, err := s.Subscribe(ctx)
	require.NoError(t, err)
	ingest(t, s, "c1", 2)
	require.Empty(t, k.got())
	require.Equal(t, map[string]int{"pending": 2}, statuses(t, s, ep.ID))
	waitWake(t, wake) // queued: the dispatchers are woken
	require.NoError(t, tx.Rollback(ctx))

	ingest(t, s, "c1", 1)
	require.Len(t, k.got(), 1, "the lock is gone; the two queued are due, but the cap has room for all")
	require.Empty(t, queueMismatches(t, s))
}

// TestIngestLeasingLeavesNoWakeUp: an ingest that leased every delivery
// wakes no dispatcher; one that queued any does.
func TestIngestLeasingLeavesNoWakeUp(t *testing.T) {
	t.Parallel()
	s := openNodes(t, 1)[0]
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	createEndpoint(t, s, "c1")
	k := setTaker(t, s, 1)
	conn, err := pgx.ConnectConfig(ctx, s.pool.Config().ConnConfig.Copy())
	require.NoError(t, err)
	defer closeConn(conn)
	_, err = conn.Exec(ctx, "LISTEN "+pgx.Identifier{s.channel}.Sanitize())
	require.NoError(t, err)
	// wakeUps counts the wake-ups that came before a marker sent now:
	// notifications arrive in the order their transactions committed.
	wakeUps := func() int {
		_, err := s.pool.Exec(ctx, "SELECT pg_notify($1, 'marker')", s.channel)
		require.NoError(t, err)
		n := 0
		for {
			note, err := conn.WaitForNotification(ctx)
			require.NoError(t, err)
			if note.Payload == "marker" {
				return n
			}
			n++
		}
	}
	ingest(t, s, "c1", 1)
	require.Len(t, k.got(), 1)
	require.Zero(t, wakeUps(), "all leased: nothing to wake a node for")
	ingest(t, s, "c1", 2) // one slot was left: one leased, one queued
	require.Len(t, k.got(), 1)
	require.Equal(t, 1, wakeUps())
}

// TestIngestLeasesOnTheRowItLocks: what a lease depends on is checked
// again on the endpoint's row once it is locked. An endpoint disabled
// after the ingest read it (here while the ingest waits for another
// transaction's use of its idempotency key) gets nothing leased.
func TestIngestLeasesOnTheRowItLocks(t *testing.T) {
	t.Parallel()
	s := openNodes(t, 1)[0]
	ctx := t.Context()
	ep := createEndpoint(t, s, "c1")
	k := setTaker(t, s, 10)
	blocker, err := s.pool.Begin(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { _ = blocker.Rollback(ctx) })
	_, err = blocker.Exec(ctx, `INSERT INTO events (id, consumer_id, event_type, payload, idempotency_key, created_at)
		VALUES ('evt_blocker', 'c1', 'order.created', '\x7b7d', 'k1', $1)`, t0)
	require.NoError(t, err)
	var xid string
	require.NoError(t, blocker.QueryRow(ctx, `SELECT pg_current_xact_id()::text`).Scan(&xid))

	done := make(chan error, 1)
	go func() {
		_, err := s.EventIngest(ctx, &store.EventIngestParams{Now: t0, Events: []store.EventIngestItem{
			{ConsumerID: "c1", EventType: "order.created", Payload: []byte(`{}`), IdempotencyKey: "k1"}}})
		done <- err
	}()
	// The ingest has read its endpoints and waits for the key.
	require.Eventually(t, func() bool {
		var n int
		err := s.pool.QueryRow(ctx, `SELECT count(*) FROM pg_locks
			WHERE NOT granted AND locktype = 'transactionid' AND transactionid::text = $1`, xid).Scan(&n)
		return err == nil && n > 0
	}, 10*time.Second, 5*time.Millisecond)
	_, err = s.EndpointSetEnabled(ctx, &store.EndpointSetEnabledParams{ID: ep.ID, Enabled: false, Reason: "manual", Now: t0})
	require.NoError(t, err)
	require.NoError(t, blocker.Rollback(ctx))
	require.NoError(t, <-done)
	require.Empty(t, k.got(), "disabled after the read")
	require.NotContains(t, statuses(t, s, ep.ID), "delivering")
}
