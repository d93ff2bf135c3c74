package storetest

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhooks/herald"
	"github.com/heraldhooks/herald/internal/store"
)

// The endpoint queue: claims find endpoints with due work through a due
// mark per endpoint, lowered by every write that makes a delivery pending
// and raised only by EndpointQueueTidy. These cases pin that a tidy keeps
// the queue small (it forgets endpoints with nothing live and moves the
// mark of those whose work lies ahead) and never hides due work, whatever
// write comes after it.
func queueCases() []testCase {
	return []testCase{
		{"TidyForgetsEndpointsWithNothingLive", testTidyForgets},
		{"TidyMovesTheMarkToTheNextRetry", testTidyMovesToRetry},
		{"TidyLeavesDueWorkMarked", testTidyLeavesDueWork},
		{"LeaseExpiryAfterTidy", testTidyLeaseExpiry},
		{"SoonerRetryAfterTidy", testTidySoonerRetry},
		{"ReleaseAfterTidy", testTidyRelease},
		{"ReplayAfterTidy", testTidyReplay},
		{"ManyEndpointsInOneIngest", testTidyManyEndpoints},
		{"RandomWritesNeverHideDueWork", testTidyRandomWrites},
	}
}

// tidy tidies up to store.TidyLimit marks at now and says how many moved.
func tidy(t *testing.T, s store.Store, now time.Time) int {
	t.Helper()
	n, err := s.EndpointQueueTidy(t.Context(), &store.EndpointQueueTidyParams{Now: now, Limit: store.TidyLimit})
	require.NoError(t, err)
	return n
}

func testTidyForgets(t *testing.T, s store.Store) {
	ep := createEndpoint(t, s, newEndpoint("c"), at(0))
	require.Zero(t, tidy(t, s, at(0)), "nothing was ever due")
	id := ingestFor(t, s, at(0), ep)
	require.Zero(t, tidy(t, s, at(0)), "due work keeps its mark")
	c := claimOne(t, s, at(0), id)
	finish(t, s, at(time.Second), c, herald.StatusDelivered)
	require.Equal(t, 1, tidy(t, s, at(time.Second)), "nothing live: the mark goes")
	require.Zero(t, tidy(t, s, at(time.Second)), "and stays gone")
	require.Zero(t, tidy(t, s, at(time.Hour)))

	id = ingestFor(t, s, at(2*time.Second), ep)
	claimOne(t, s, at(2*time.Second), id)
}

func testTidyMovesToRetry(t *testing.T, s store.Store) {
	ep := createEndpoint(t, s, newEndpoint("c"), at(0))
	id := ingestFor(t, s, at(0), ep)
	c := claimOne(t, s, at(0), id)
	finish(t, s, at(time.Second), c, herald.StatusPending) // retry in 30 s
	require.Equal(t, 1, tidy(t, s, at(time.Second)))
	require.Zero(t, tidy(t, s, at(2*time.Second)), "the mark is 31 s out: not due")
	requireNoneDue(t, s, at(30*time.Second))
	claimOne(t, s, at(31*time.Second), id)
}

// testTidyLeavesDueWork: due work held back by a cap or a FIFO head in
// flight keeps its endpoint marked, and goes once there is room.
func testTidyLeavesDueWork(t *testing.T, s store.Store) {
	capped := newEndpoint("capped")
	capped.MaxInFlight = 1
	capped = createEndpoint(t, s, capped, at(0))
	fifo := newEndpoint("fifo")
	fifo.Ordering = herald.OrderingFIFO
	fifo = createEndpoint(t, s, fifo, at(0))
	c1 := ingestFor(t, s, at(0), capped)
	c2 := ingestFor(t, s, at(0), capped)
	f1 := ingestFor(t, s, at(0), fifo)
	f2 := ingestFor(t, s, at(0), fifo)
	got := claimAll(t, s, at(0))
	require.Len(t, got, 2)
	require.Contains(t, got, c1)
	require.Contains(t, got, f1)
	require.Zero(t, tidy(t, s, at(time.Second)), "both still have due work")
	requireNoneDue(t, s, at(time.Second))
	finish(t, s, at(2*time.Second), got[c1], herald.StatusDelivered)
	finish(t, s, at(2*time.Second), got[f1], herald.StatusDelivered)
	require.Zero(t, tidy(t, s, at(2*time.Second)))
	got = claimAll(t, s, at(2*time.Second))
	require.Len(t, got, 2)
	require.Contains(t, got, c2)
	require.Contains(t, got, f2)
}

// testTidyLeaseExpiry: a leased delivery's mark moves to its lease expiry,
// when a claim takes it again.
func testTidyLeaseExpiry(t *testing.T, s store.Store) {
	ep := createEndpoint(t, s, newEndpoint("c"), at(0)) // 10 s timeout
	id := ingestFor(t, s, at(0), ep)
	claimOne(t, s, at(0), id)
	require.Equal(t, 1, tidy(t, s, at(time.Second)))
	expiry := 20*time.Second + leaseMargin
	requireNoneDue(t, s, at(expiry-time.Millisecond))
	again := claimOne(t, s, at(expiry), id)
	require.True(t, again.Redelivered)
}

// testTidySoonerRetry: an outcome that schedules a retry before the lease
// would have run out (the mark's time after a tidy) lowers the mark.
func testTidySoonerRetry(t *testing.T, s store.Store) {
	ep := createEndpoint(t, s, newEndpoint("c"), at(0))
	id := ingestFor(t, s, at(0), ep)
	c := claimOne(t, s, at(0), id)
	require.Equal(t, 1, tidy(t, s, at(time.Second)), "moved to the lease expiry")
	o := outcome(c, herald.StatusPending, at(time.Second))
	o.RetryIn = 2 * time.Second
	require.Equal(t, []bool{true}, complete(t, s, at(time.Second), o))
	requireNoneDue(t, s, at(2*time.Second))
	claimOne(t, s, at(3*time.Second), id)
}

// testTidyRelease: a lease handed back after a tidy is due at once.
func testTidyRelease(t *testing.T, s store.Store) {
	ep := createEndpoint(t, s, newEndpoint("c"), at(0))
	id := ingestFor(t, s, at(0), ep)
	c := claimOne(t, s, at(0), id)
	require.Equal(t, 1, tidy(t, s, at(time.Second)))
	require.NoError(t, s.DeliveryRelease(t.Context(), &store.DeliveryReleaseParams{
		Leases: []store.Lease{{DeliveryID: id, LeaseToken: c.LeaseToken}}, Now: at(time.Second),
	}))
	claimOne(t, s, at(time.Second), id)
}

// testTidyReplay: a replay after the mark is gone is due at once, for one
// delivery and for many.
func testTidyReplay(t *testing.T, s store.Store) {
	ep := createEndpoint(t, s, newEndpoint("c"), at(0))
	a := ingestFor(t, s, at(0), ep)
	b := ingestFor(t, s, at(0), ep)
	got := claimAll(t, s, at(0))
	finish(t, s, at(time.Second), got[a], herald.StatusDead)
	finish(t, s, at(time.Second), got[b], herald.StatusDead)
	require.Equal(t, 1, tidy(t, s, at(time.Second)))

	_, err := s.DeliveryReplay(t.Context(), &store.DeliveryReplayParams{ID: a, Now: at(2 * time.Second)})
	require.NoError(t, err)
	c := claimOne(t, s, at(2*time.Second), a)
	finish(t, s, at(3*time.Second), c, herald.StatusDead)
	require.Equal(t, 1, tidy(t, s, at(3*time.Second)))

	n, err := s.DeliveryReplayMany(t.Context(), &store.DeliveryReplayManyParams{EndpointID: ep.ID, Now: at(4 * time.Second)})
	require.NoError(t, err)
	require.Equal(t, 2, n)
	got = claimAll(t, s, at(4*time.Second))
	require.Len(t, got, 2)
}

// testTidyManyEndpoints: one ingest that fans out to more endpoints than a
// writer locks one by one (PostgreSQL then takes one lock for all) marks
// every one of them.
func testTidyManyEndpoints(t *testing.T, s store.Store) {
	const n = 40
	for range n {
		createEndpoint(t, s, newEndpoint("c"), at(0))
	}
	res := ingestOne(t, s, at(0), "c", "order.created")
	require.Len(t, res.Deliveries, n)
	require.Zero(t, tidy(t, s, at(0)))
	require.Len(t, claimAll(t, s, at(0)), n)
	require.Equal(t, n, tidy(t, s, at(time.Second)), "every mark moves to its lease expiry")
}

// testTidyRandomWrites runs a seeded random mix of ingests, claims,
// outcomes (delivered, dead, retries near and far), releases, replays and
// tidies over a few endpoints, and after each step drains what is due:
// afterwards no pending delivery may be due. A mark raised too far, or
// not lowered by a write, leaves one behind.
func testTidyRandomWrites(t *testing.T, s store.Store) {
	seed := uint64(time.Now().UnixNano())
	rng := rand.New(rand.NewPCG(seed, 7))
	var eps []*herald.Endpoint
	for i := range 4 {
		ep := newEndpoint(fmt.Sprintf("c%d", i))
		if i == 3 {
			ep.Ordering = herald.OrderingFIFO
		}
		eps = append(eps, createEndpoint(t, s, ep, at(0)))
	}
	now := at(0)
	leased := map[string]*store.ClaimedDelivery{}
	var finished []string
	for step := range 120 {
		now = now.Add(time.Duration(rng.IntN(3000)) * time.Millisecond)
		switch op := rng.IntN(7); {
		case op <= 1:
			ingestFor(t, s, now, eps[rng.IntN(len(eps))])
		case op == 2:
			for id, c := range claimAll(t, s, now) {
				leased[id] = c
			}
		case op == 3:
			for id, c := range leased {
				o := outcome(c, []herald.Status{herald.StatusDelivered, herald.StatusDead, herald.StatusPending}[rng.IntN(3)], now)
				if o.Status == herald.StatusPending {
					o.RetryIn = time.Duration(rng.IntN(40000)) * time.Millisecond
				} else {
					finished = append(finished, id)
				}
				complete(t, s, now, o)
				delete(leased, id)
				break
			}
		case op == 4:
			for id, c := range leased {
				require.NoError(t, s.DeliveryRelease(t.Context(), &store.DeliveryReleaseParams{
					Leases: []store.Lease{{DeliveryID: id, LeaseToken: c.LeaseToken}}, Now: now,
				}))
				delete(leased, id)
				break
			}
		case op == 5 && len(finished) > 0:
			i := rng.IntN(len(finished))
			_, err := s.DeliveryReplay(t.Context(), &store.DeliveryReplayParams{ID: finished[i], Now: now})
			require.NoError(t, err)
			finished = append(finished[:i], finished[i+1:]...)
		default:
			tidy(t, s, now)
		}
		// Whatever is due now must be claimable now: take it all, then
		// no pending delivery may be due any more.
		for id, c := range claimAll(t, s, now) {
			leased[id] = c
		}
		page, err := s.DeliveryList(t.Context(), &store.DeliveryListParams{Status: herald.StatusPending, Limit: store.MaxListLimit})
		require.NoError(t, err)
		live := map[string]int{} // per endpoint: pending and leased
		inFlight := map[string]int{}
		for _, d := range page.Items {
			live[d.EndpointID]++
		}
		for _, c := range leased {
			live[c.Delivery.EndpointID]++
			inFlight[c.Delivery.EndpointID]++
		}
		for _, d := range page.Items {
			if d.NextAttemptAt == nil || d.NextAttemptAt.After(now) {
				continue
			}
			ep, err := s.EndpointGet(t.Context(), d.EndpointID)
			require.NoError(t, err)
			switch until := ep.Health.BlockedUntil(); {
			case until != nil && until.After(now):
				continue // the breaker holds it back
			case inFlight[d.EndpointID] >= herald.DefaultMaxInFlight:
				continue // no room
			case ep.Ordering == herald.OrderingFIFO && live[d.EndpointID] > 1:
				continue // it may wait for its head
			}
			require.Failf(t, "due work hidden", "seed %d step %d: delivery %s due at %s left unclaimed at %s",
				seed, step, d.ID, d.NextAttemptAt, now)
		}
	}
}
