package storetest

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhooks/herald"
	"github.com/heraldhooks/herald/internal/store"
)

func claimCases() []testCase {
	return []testCase{
		{"TakesOnlyDue", testClaimOnlyDue},
		{"OldestDueFirstWithinLimit", testClaimOrderAndLimit},
		{"LeasesWithEventAndEndpoint", testClaimLease},
		{"ExpiredLeaseIsClaimedAgain", testClaimExpiredLease},
		{"RedeliveredOnlyAfterAnExpiredLease", testClaimRedelivered},
		{"SkipsDisabledEndpoints", testClaimSkipsDisabled},
		{"ConcurrentClaimersNeverShare", testClaimConcurrent},
		{"ZeroNowUsesDatabaseClock", testZeroNow},
	}
}

func testClaimOnlyDue(t *testing.T, s store.Store) {
	ep := createEndpoint(t, s, newEndpoint("c"), at(0))
	first := ingestFor(t, s, at(0), ep)
	later := ingestFor(t, s, at(20*time.Second), ep)

	// A delivery is due from the moment it was made, not before.
	claimOne(t, s, at(10*time.Second), first)
	requireNoneDue(t, s, at(20*time.Second-time.Microsecond))
	claimOne(t, s, at(20*time.Second), later)
	requireNoneDue(t, s, at(20*time.Second))
}

func testClaimOrderAndLimit(t *testing.T, s store.Store) {
	// Two endpoints: a claim answers oldest due first across them.
	createEndpoint(t, s, newEndpoint("c", "a"), at(0))
	createEndpoint(t, s, newEndpoint("c", "b"), at(0))
	first := ingestOne(t, s, at(0), "c", "a")
	require.Len(t, first.Deliveries, 1)
	taken := claimOne(t, s, at(0), first.Deliveries[0].ID)
	o := outcome(taken, herald.StatusPending, at(0))
	o.RetryIn = 5500 * time.Millisecond // due at 5.5 s
	require.Equal(t, []bool{true}, complete(t, s, at(0), o))
	ids := []string{first.Deliveries[0].ID}
	for i := 1; i < 5; i++ {
		typ := "a"
		if i%2 == 1 {
			typ = "b"
		}
		res := ingestOne(t, s, at(time.Duration(i)*time.Second), "c", typ)
		require.Len(t, res.Deliveries, 1)
		ids = append(ids, res.Deliveries[0].ID)
	}
	last := ingestOne(t, s, at(6*time.Second), "c", "a")
	require.Len(t, last.Deliveries, 1)
	newest := last.Deliveries[0].ID

	// Within endpoint a new deliveries go first, so its retry (due 5.5 s)
	// comes after its newest delivery (due 6 s).
	order := []string{ids[1], ids[2], ids[3], ids[4], newest, ids[0]}
	var got []string
	for _, limit := range []int{2, 3, 2} {
		claimed := claim(t, s, at(10*time.Second), limit)
		require.LessOrEqual(t, len(claimed), limit)
		for _, c := range claimed {
			got = append(got, c.Delivery.ID)
		}
	}
	require.Equal(t, order, got)
	requireNoneDue(t, s, at(10*time.Second))
}

func testClaimLease(t *testing.T, s store.Store) {
	in := fullEndpoint()
	in.Timeout = 10 * time.Second
	ep := createEndpoint(t, s, in, at(0))
	res := ingest(t, s, at(time.Second), store.EventIngestItem{
		ConsumerID: ep.ConsumerID, EventType: "order.created", Payload: []byte(`{"id": "o_1"}`), IdempotencyKey: "key-1",
	})[0]
	require.Len(t, res.Deliveries, 1)
	id := res.Deliveries[0].ID

	c := claimOne(t, s, at(time.Minute), id)
	requireTime(t, at(time.Minute+2*10*time.Second+leaseMargin), c.LeaseExpiresAt)

	d := c.Delivery
	require.Equal(t, id, d.ID)
	require.Equal(t, herald.StatusDelivering, d.Status)
	require.Equal(t, res.Event.ID, d.EventID)
	require.Equal(t, ep.ID, d.EndpointID)
	require.Equal(t, ep.ConsumerID, d.ConsumerID)
	require.Equal(t, "order.created", d.EventType)
	require.Zero(t, d.AttemptCount)
	require.Nil(t, d.NextAttemptAt)
	requireTime(t, at(time.Second), d.CreatedAt)

	require.Equal(t, res.Event.ID, c.Event.ID)
	require.Equal(t, ep.ConsumerID, c.Event.ConsumerID)
	require.Equal(t, "order.created", c.Event.EventType)
	require.Equal(t, `{"id": "o_1"}`, string(c.Event.Payload))
	require.Equal(t, "key-1", c.Event.IdempotencyKey)
	requireTime(t, at(time.Second), c.Event.CreatedAt)

	requireEndpoint(t, ep, &c.Endpoint)

	read := requireStatus(t, s, id, herald.StatusDelivering)
	require.Nil(t, read.NextAttemptAt)
	require.Zero(t, read.AttemptCount)

	// A lease follows each endpoint's own timeout.
	finish(t, s, at(time.Minute), c, herald.StatusDelivered)
	slow := newEndpoint("slow")
	slow.Timeout = 45 * time.Second
	slowEp := createEndpoint(t, s, slow, at(0))
	sid := ingestFor(t, s, at(2*time.Minute), slowEp)
	sc := claimOne(t, s, at(3*time.Minute), sid)
	requireTime(t, at(3*time.Minute+90*time.Second+leaseMargin), sc.LeaseExpiresAt)
}

func testClaimExpiredLease(t *testing.T, s store.Store) {
	ep := createEndpoint(t, s, newEndpoint("c"), at(0)) // 10 s timeout
	id := ingestFor(t, s, at(0), ep)

	first := claimOne(t, s, at(time.Second), id)
	expiry := at(time.Second + 20*time.Second + leaseMargin)
	requireTime(t, expiry, first.LeaseExpiresAt)

	requireNoneDue(t, s, expiry.Add(-time.Microsecond))
	second := claimOne(t, s, expiry, id)
	require.NotEqual(t, first.LeaseToken, second.LeaseToken)
	requireTime(t, expiry.Add(20*time.Second+leaseMargin), second.LeaseExpiresAt)
	require.Zero(t, second.Delivery.AttemptCount, "a lost lease spends no attempt")

	third := claimOne(t, s, second.LeaseExpiresAt, id)
	require.NotEqual(t, first.LeaseToken, third.LeaseToken)
	require.NotEqual(t, second.LeaseToken, third.LeaseToken)
}

// testClaimRedelivered: a claim says whether it took the delivery from an
// expired lease (its earlier attempt was lost, and may have reached the
// receiver) rather than from pending: not on the first claim, not after a
// retry was written, not after a lease was handed back; only after a lease
// ran out with no outcome. FIFO endpoints take their head by another path,
// and say so too.
func testClaimRedelivered(t *testing.T, s store.Store) {
	for _, tc := range []struct {
		name string
		ep   *herald.Endpoint
	}{
		{"Unordered", quietEndpoint("c")}, // 10 s timeout
		{"FIFO", fifoEndpoint("f")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ep := createEndpoint(t, s, tc.ep, at(0))
			id := ingestFor(t, s, at(0), ep)

			first := claimOne(t, s, at(time.Second), id)
			require.False(t, first.Redelivered, "a first claim takes a pending delivery")

			// The lease runs out with no outcome written: a lost attempt.
			requireNoneDue(t, s, first.LeaseExpiresAt.Add(-time.Microsecond))
			lost := claimOne(t, s, first.LeaseExpiresAt, id)
			require.True(t, lost.Redelivered, "taken from an expired lease")
			require.Equal(t, herald.StatusDelivering, lost.Delivery.Status)

			// Its attempt fails and is written with a retry: the next claim
			// takes a pending delivery again.
			now := lost.LeaseExpiresAt.Add(-time.Second)
			fail(t, s, now, lost, 30*time.Second)
			now = now.Add(30 * time.Second)
			retried := claimOne(t, s, now, id)
			require.False(t, retried.Redelivered, "a retry written normally is not a redelivery")
			require.Equal(t, 1, retried.Delivery.AttemptCount)

			// A lease handed back is not lost either.
			require.NoError(t, s.DeliveryRelease(t.Context(), &store.DeliveryReleaseParams{
				Leases: []store.Lease{{DeliveryID: id, LeaseToken: retried.LeaseToken}},
				Now:    now,
			}))
			released := claimOne(t, s, now, id)
			require.False(t, released.Redelivered, "a released lease is not a redelivery")

			// A lease that runs out after a retry makes a redelivery again,
			// and then a delivered outcome ends it.
			again := claimOne(t, s, released.LeaseExpiresAt, id)
			require.True(t, again.Redelivered)
			require.Equal(t, 1, again.Delivery.AttemptCount, "a lost lease spends no attempt")
			finish(t, s, again.LeaseExpiresAt.Add(-time.Second), again, herald.StatusDelivered)
			requireNoneDue(t, s, again.LeaseExpiresAt.Add(time.Hour))
		})
	}
}

func testClaimSkipsDisabled(t *testing.T, s store.Store) {
	on := createEndpoint(t, s, newEndpoint("c"), at(0))
	off := createEndpoint(t, s, newEndpoint("c"), at(0))
	disableEndpoint(t, s, off.ID, at(0))
	offLater := createEndpoint(t, s, newEndpoint("c"), at(0))
	gone := createEndpoint(t, s, newEndpoint("c"), at(0))

	res := ingestOne(t, s, at(time.Second), "c", "order.created")
	require.Len(t, res.Deliveries, 3)
	disableEndpoint(t, s, offLater.ID, at(2*time.Second))
	require.NoError(t, s.EndpointDelete(t.Context(), &store.EndpointDeleteParams{ID: gone.ID, Now: at(2 * time.Second)}))

	claimed := claim(t, s, at(time.Minute), store.MaxListLimit)
	require.Len(t, claimed, 1)
	require.Equal(t, on.ID, claimed[0].Endpoint.ID)
	finish(t, s, at(time.Minute), claimed[0], herald.StatusDelivered)

	// Nothing brings a disabled endpoint's delivery back to the queue.
	for _, ref := range res.Deliveries {
		if ref.EndpointID == offLater.ID {
			_, err := s.DeliveryReplay(t.Context(), &store.DeliveryReplayParams{ID: ref.ID, Now: at(time.Hour)})
			expectConflict(t, err)
		}
	}
	n, err := s.DeliveryReplayMany(t.Context(), &store.DeliveryReplayManyParams{EventID: res.Event.ID, Now: at(time.Hour)})
	require.NoError(t, err)
	require.Equal(t, 1, n, "only the enabled endpoint's delivery comes back")
	again := claim(t, s, at(time.Hour), store.MaxListLimit)
	require.Len(t, again, 1)
	require.Equal(t, on.ID, again[0].Endpoint.ID)
}

func testClaimConcurrent(t *testing.T, s store.Store) {
	createEndpoint(t, s, newEndpoint("c"), at(0))
	const total = 500
	for b := range 5 {
		items := make([]store.EventIngestItem, total/5)
		for i := range items {
			items[i] = store.EventIngestItem{ConsumerID: "c", EventType: "order.created", Payload: fmt.Appendf(nil, `{"b":%d,"i":%d}`, b, i)}
		}
		ingest(t, s, at(time.Duration(b)*time.Second), items...)
	}

	const workers = 4
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		seen    = map[string]int{}
		errs    []error
		start   = make(chan struct{})
		claimAt = at(time.Minute)
	)
	for range workers {
		wg.Go(func() {
			<-start
			for range total {
				claimed, err := s.DeliveryClaim(t.Context(), &store.DeliveryClaimParams{Limit: 7, LeaseMargin: leaseMargin, Now: claimAt})
				if err != nil {
					mu.Lock()
					errs = append(errs, fmt.Errorf("claim: %w", err))
					mu.Unlock()
					return
				}
				if len(claimed) == 0 {
					return
				}
				outcomes := make([]store.DeliveryOutcome, len(claimed))
				mu.Lock()
				for i, c := range claimed {
					seen[c.Delivery.ID]++
					outcomes[i] = outcome(c, herald.StatusDelivered, claimAt)
				}
				mu.Unlock()
				applied, err := s.DeliveryCompleteMany(t.Context(), &store.DeliveryCompleteManyParams{Outcomes: outcomes, Now: claimAt})
				mu.Lock()
				if err != nil {
					errs = append(errs, fmt.Errorf("complete: %w", err))
				}
				for i, ok := range applied {
					if !ok {
						errs = append(errs, fmt.Errorf("outcome of %s not applied", outcomes[i].DeliveryID))
					}
				}
				mu.Unlock()
			}
		})
	}
	close(start)
	wg.Wait()

	require.Empty(t, errs)
	require.Len(t, seen, total, "every delivery was claimed")
	for id, n := range seen {
		require.Equal(t, 1, n, "delivery %s claimed %d times", id, n)
	}
	stats, err := s.Stats(t.Context(), &store.StatsParams{Now: claimAt})
	require.NoError(t, err)
	require.Equal(t, int64(total), stats.ByStatus[herald.StatusDelivered])
}

// testZeroNow checks that a zero Now means the database's clock, which on
// the machine running the tests is close to time.Now.
func testZeroNow(t *testing.T, s store.Store) {
	before := time.Now()
	ep := createEndpoint(t, s, newEndpoint("c"), time.Time{})
	require.WithinDuration(t, before, ep.CreatedAt, time.Minute)

	res := ingestOne(t, s, time.Time{}, "c", "order.created")
	require.WithinDuration(t, before, res.Event.CreatedAt, time.Minute)
	require.Len(t, res.Deliveries, 1)
	d := getDelivery(t, s, res.Deliveries[0].ID)
	require.NotNil(t, d.NextAttemptAt)
	require.WithinDuration(t, before, *d.NextAttemptAt, time.Minute)

	// Due at once by the database clock, and leased by it.
	c := claimOne(t, s, time.Time{}, d.ID)
	require.WithinDuration(t, before.Add(20*time.Second+leaseMargin), c.LeaseExpiresAt, time.Minute)
	require.True(t, c.LeaseExpiresAt.After(d.NextAttemptAt.Add(20*time.Second)))

	applied, err := s.DeliveryCompleteMany(t.Context(), &store.DeliveryCompleteManyParams{
		Outcomes: []store.DeliveryOutcome{outcome(c, herald.StatusDelivered, time.Now())},
	})
	require.NoError(t, err)
	require.Equal(t, []bool{true}, applied)
	done := requireStatus(t, s, d.ID, herald.StatusDelivered)
	require.NotNil(t, done.DeliveredAt)
	require.WithinDuration(t, before, *done.DeliveredAt, time.Minute)

	stats, err := s.Stats(t.Context(), &store.StatsParams{})
	require.NoError(t, err)
	require.Equal(t, int64(1), stats.ByStatus[herald.StatusDelivered])
}
