package storetest

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/heraldhooks/herald"
	"github.com/heraldhooks/herald/internal/store"
)

// Leasing at ingest (store.Taker): every backend is a store.Leaser, which
// the cases reach by a type assertion, store.Store having no place for it
// (a node's dispatcher is not part of the storage seam).

func leasingCases() []testCase {
	return []testCase{
		{"LeasesToTheTaker", testLeasingToTheTaker},
		{"LeasesOnlyWhatAClaimWouldTake", testLeasingOnlyWhatAClaimWouldTake},
		{"LeasesWithinSlotsAndCaps", testLeasingWithinSlotsAndCaps},
	}
}

// SlotTaker is a store.Taker with a fixed number of free slots, for the
// leasing cases here and a backend's own: it keeps what it is handed, and
// checks that every reservation is taken exactly once, with no more than
// its slots, the slots it leaves free given back. Its checks report with
// tb.Errorf, as the store may call it from another goroutine than the
// test's (SQLite's group commit: the call that leads the group).
type SlotTaker struct {
	tb   testing.TB
	from time.Time

	mu    sync.Mutex
	free  int
	open  map[*int]int // reservation -> slots
	taken []*store.ClaimedDelivery
}

// takerLeaseMargin is the LeaseMargin of a SlotTaker's reservations.
const takerLeaseMargin = 15 * time.Second

// NewSlotTaker is a SlotTaker with free slots whose clock reads from at
// each reservation. When tb ends, every reservation must have been taken.
func NewSlotTaker(tb testing.TB, free int, from time.Time) *SlotTaker {
	k := &SlotTaker{tb: tb, from: from, free: free, open: map[*int]int{}}
	tb.Cleanup(func() {
		k.mu.Lock()
		defer k.mu.Unlock()
		assert.Empty(tb, k.open, "reservations never taken")
	})
	return k
}

// Reserve sets aside up to n of the free slots.
func (k *SlotTaker) Reserve(n int) store.Reservation {
	k.mu.Lock()
	defer k.mu.Unlock()
	n = min(n, k.free)
	k.free -= n
	ref := new(int)
	k.open[ref] = n
	return store.Reservation{Slots: n, From: k.from, LeaseMargin: takerLeaseMargin, Ref: ref}
}

// ReserveBatch is Reserve: a SlotTaker has no bound on attempts under
// way.
func (k *SlotTaker) ReserveBatch(n int) store.Reservation { return k.Reserve(n) }

// Take keeps what was leased under r and gives back the slots left.
func (k *SlotTaker) Take(r store.Reservation, claimed []*store.ClaimedDelivery) {
	k.mu.Lock()
	defer k.mu.Unlock()
	ref, _ := r.Ref.(*int)
	n, ok := k.open[ref]
	if !assert.True(k.tb, ok, "a reservation taken twice, or never made") {
		return
	}
	delete(k.open, ref)
	assert.Equal(k.tb, n, r.Slots, "the reservation's slots")
	assert.LessOrEqual(k.tb, len(claimed), n, "more leased than reserved")
	k.free += n - len(claimed)
	k.taken = append(k.taken, claimed...)
}

// Taken is every delivery handed over so far, in the order handed.
func (k *SlotTaker) Taken() []*store.ClaimedDelivery {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]*store.ClaimedDelivery(nil), k.taken...)
}

// LeaseFor is how long a lease of ep taken under this taker's
// reservations lasts.
func (k *SlotTaker) LeaseFor(ep *herald.Endpoint) time.Duration {
	return (&store.DeliveryClaimParams{LeaseMargin: takerLeaseMargin}).LeaseFor(ep)
}

// setTaker makes a SlotTaker with free slots, reserving a second before
// now (before the ingest at now began), s's taker.
func setTaker(t *testing.T, s store.Store, free int, now time.Time) *SlotTaker {
	t.Helper()
	taking, ok := s.(store.Leaser)
	require.True(t, ok, "%T is no store.Leaser: every backend leases at ingest", s)
	k := NewSlotTaker(t, free, now.Add(-time.Second))
	taking.SetTaker(k)
	return k
}

// statusesOf counts the deliveries of endpoint id by status.
func statusesOf(t *testing.T, s store.Store, id string) map[herald.Status]int {
	t.Helper()
	page, err := s.DeliveryList(t.Context(), &store.DeliveryListParams{EndpointID: id, Limit: store.MaxListLimit})
	require.NoError(t, err)
	require.Empty(t, page.NextCursor)
	out := map[herald.Status]int{}
	for _, d := range page.Items {
		out[d.Status]++
	}
	return out
}

// deliveryIDs are the ids of claimed deliveries, in their order.
func deliveryIDs(claimed []*store.ClaimedDelivery) []string {
	ids := make([]string, len(claimed))
	for i, c := range claimed {
		ids[i] = c.Delivery.ID
	}
	return ids
}

// testLeasingToTheTaker: with a taker, what a claim would take at once is
// leased at ingest and handed over whole (event, endpoint with its
// secret, lease token and expiry); claims do not take it while the lease
// holds, take it again as a redelivery once it ran out (the endpoint's
// due mark finds it), and an outcome under the ingest's lease applies.
func testLeasingToTheTaker(t *testing.T, s store.Store) {
	ep := createEndpoint(t, s, quietEndpoint("c"), at(0))
	k := setTaker(t, s, 10, at(0))
	items := make([]store.EventIngestItem, 3)
	for i := range items {
		items[i] = store.EventIngestItem{ConsumerID: "c", EventType: "order.created", Payload: fmt.Appendf(nil, `{"n":%d}`, i)}
	}
	res := ingest(t, s, at(0), items...)

	got := k.Taken()
	require.Len(t, got, 3)
	expiry := at(0).Add(k.LeaseFor(ep))
	for i, c := range got {
		require.Len(t, res[i].Deliveries, 1)
		require.Equal(t, res[i].Deliveries[0].ID, c.Delivery.ID, "in ingest order")
		require.Equal(t, herald.StatusDelivering, c.Delivery.Status)
		require.Equal(t, res[i].Event.ID, c.Delivery.EventID)
		require.Equal(t, ep.ID, c.Delivery.EndpointID)
		require.Equal(t, "c", c.Delivery.ConsumerID)
		require.Equal(t, "order.created", c.Delivery.EventType)
		require.Zero(t, c.Delivery.AttemptCount)
		require.Equal(t, res[i].Event.ID, c.Event.ID)
		require.Equal(t, res[i].Event.Payload, c.Event.Payload)
		require.Equal(t, "order.created", c.Event.EventType)
		require.Equal(t, ep.ID, c.Endpoint.ID)
		require.Equal(t, ep.Secret, c.Endpoint.Secret, "the secret open")
		require.Equal(t, int64(1), c.LeaseToken)
		requireTime(t, expiry, c.LeaseExpiresAt, "the lease counted from the ingest's now")
		require.False(t, c.Redelivered)
		d := requireStatus(t, s, c.Delivery.ID, herald.StatusDelivering)
		require.Zero(t, d.AttemptCount)
	}
	require.Equal(t, map[herald.Status]int{herald.StatusDelivering: 3}, statusesOf(t, s, ep.ID))
	requireNoneDue(t, s, at(0)) // leased at ingest

	finish(t, s, at(time.Second), got[0], herald.StatusDelivered) // the ingest's lease holds

	requireNoneDue(t, s, expiry.Add(-time.Microsecond))
	again := claimN(t, s, expiry, store.MaxListLimit, 2) // the leases ran out: the endpoint's due mark found them
	require.ElementsMatch(t, deliveryIDs(got[1:]), deliveryIDs(again))
	for _, c := range again {
		require.True(t, c.Redelivered)
		require.Equal(t, int64(2), c.LeaseToken)
	}
}

// testLeasingOnlyWhatAClaimWouldTake: FIFO endpoints, rate limits, breakers
// not closed, pauses and endpoints slowed down by 429s get nothing leased
// at ingest; their deliveries are queued and claims take them as ever. A
// plain endpoint of the same ingest gets its leased.
func testLeasingOnlyWhatAClaimWouldTake(t *testing.T, s store.Store) {
	fifo := createEndpoint(t, s, fifoEndpoint("c"), at(0))
	in := quietEndpoint("c")
	in.RateLimit = &herald.RateLimit{PerSecond: 100, Burst: 100}
	limited := createEndpoint(t, s, in, at(0))
	// Each of these takes events of its own type too, to be brought to its
	// state alone.
	open := createEndpoint(t, s, newEndpoint("c", "order.*", "open.*"), at(0))
	paused := createEndpoint(t, s, newEndpoint("c", "order.*", "paused.*"), at(0))
	slowed := createEndpoint(t, s, newEndpoint("c", "order.*", "slowed.*"), at(0))
	plain := createEndpoint(t, s, quietEndpoint("c"), at(0))

	// Five failures at 1 s open the breaker until 5 min 1 s.
	ids := ingestTo(t, s, at(0), open, "open", 5)
	leases := claimAll(t, s, at(0))
	require.Len(t, leases, 5)
	for _, id := range ids {
		fail(t, s, at(time.Second), leases[id], time.Second)
	}
	require.Equal(t, herald.BreakerOpen, healthOf(t, s, open.ID, at(time.Second)).BreakerState)

	// A 503 asking for 10 min at 2 s pauses the next until 10 min 2 s.
	id := ingestTo(t, s, at(2*time.Second), paused, "paused", 1)[0]
	o := outcome(claimOne(t, s, at(2*time.Second), id), herald.StatusPending, at(2*time.Second))
	o.RetryIn = time.Hour
	o.PauseFor = 10 * time.Minute
	require.Equal(t, []bool{true}, complete(t, s, at(2*time.Second), o))
	requireTimePtr(t, at(10*time.Minute+2*time.Second), healthOf(t, s, paused.ID, at(2*time.Second)).PausedUntil)

	// A 429 at 3 s slows the next down to half speed.
	id = ingestTo(t, s, at(3*time.Second), slowed, "slowed", 1)[0]
	o = outcome(claimOne(t, s, at(3*time.Second), id), herald.StatusPending, at(3*time.Second))
	o.Attempt.StatusCode, o.Attempt.Error = 429, "HTTP 429"
	o.RetryIn = time.Hour
	o.Throttled = true
	require.Equal(t, []bool{true}, complete(t, s, at(3*time.Second), o))
	require.Equal(t, 0.5, healthOf(t, s, slowed.ID, at(3*time.Second)).RateFactor)

	// The taker comes now: the claims above were not its business.
	now := at(4 * time.Second)
	k := setTaker(t, s, 10, now)
	res := ingest(t, s, now,
		store.EventIngestItem{ConsumerID: "c", EventType: "order.created", Payload: []byte(`{"n":1}`)},
		store.EventIngestItem{ConsumerID: "c", EventType: "order.created", Payload: []byte(`{"n":2}`)})

	var plainIDs []string
	for _, r := range res {
		require.Len(t, r.Deliveries, 6)
		for _, d := range r.Deliveries {
			if d.EndpointID == plain.ID {
				plainIDs = append(plainIDs, d.ID)
				requireStatus(t, s, d.ID, herald.StatusDelivering)
				continue
			}
			requireStatus(t, s, d.ID, herald.StatusPending)
		}
	}
	require.Equal(t, plainIDs, deliveryIDs(k.Taken()))

	claimed := countByEndpoint(claim(t, s, now, store.MaxListLimit))
	require.Equal(t, map[string]int{
		fifo.ID:    1, // the head
		limited.ID: 2,
		slowed.ID:  2, // half the cap is room enough
	}, claimed, "the breaker is open, the pause holds, plain's are leased")
}

// testLeasingWithinSlotsAndCaps: no more is leased than the slots
// reserved, nor than the room under the endpoint's in-flight cap, counting
// its leases and the new deliveries already due (a claim takes those).
func testLeasingWithinSlotsAndCaps(t *testing.T, s store.Store) {
	in := quietEndpoint("c")
	in.MaxInFlight = 4
	ep := createEndpoint(t, s, in, at(0))

	k := setTaker(t, s, 0, at(0)) // no slot free: all queued
	first := ingestN(t, s, at(0), ep, 2)
	require.Empty(t, k.Taken())

	k = setTaker(t, s, 1, at(0)) // one slot
	second := ingestN(t, s, at(0), ep, 3)
	require.Equal(t, second[:1], deliveryIDs(k.Taken()), "the first in ingest order")
	require.Equal(t, map[herald.Status]int{herald.StatusPending: 4, herald.StatusDelivering: 1}, statusesOf(t, s, ep.ID))

	// Cap 4: one leased and four new due leave no room.
	k = setTaker(t, s, 10, at(0))
	ingestN(t, s, at(0), ep, 1)
	require.Empty(t, k.Taken())

	claimed := claimN(t, s, at(0), 10, 3) // the cap's room
	require.ElementsMatch(t, []string{first[0], first[1], second[1]}, deliveryIDs(claimed), "oldest first")
	// Four in flight, two due: an ingest leases nothing.
	ingestN(t, s, at(0), ep, 1)
	require.Empty(t, k.Taken())
	require.Equal(t, map[herald.Status]int{herald.StatusPending: 3, herald.StatusDelivering: 4}, statusesOf(t, s, ep.ID))
}
