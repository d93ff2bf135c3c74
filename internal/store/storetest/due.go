package storetest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhooks/herald"
	"github.com/heraldhooks/herald/internal/store"
)

func nextDueCases() []testCase {
	return []testCase{
		{"NoneWhenEmpty", testNextDueNone},
		{"RetryAndLeaseExpiry", testNextDueRetryAndLease},
		{"DueNowIsNotToCome", testNextDueSkipsDueNow},
		{"FinishedRowsDoNotCount", testNextDueFinished},
		{"DueNowIsWorkNotLeased", testNextDueDueNow},
	}
}

func nextDue(t *testing.T, s store.Store, now time.Time) (time.Duration, bool) {
	t.Helper()
	next := readNextDue(t, s, now)
	return next.Wait, next.Found
}

func readNextDue(t *testing.T, s store.Store, now time.Time) store.NextDue {
	t.Helper()
	next, err := s.DeliveryNextDue(t.Context(), &store.DeliveryNextDueParams{Now: now})
	require.NoError(t, err)
	if !next.Found {
		require.Zero(t, next.Wait, "no wait without a time to come")
	}
	return next
}

func testNextDueNone(t *testing.T, s store.Store) {
	_, ok := nextDue(t, s, at(0))
	require.False(t, ok)
}

// testNextDueRetryAndLease: a retry 1.2 s away is the next due time; a
// leased delivery counts with its lease expiry, when it may be claimed
// again.
func testNextDueRetryAndLease(t *testing.T, s store.Store) {
	ep := createEndpoint(t, s, newEndpoint("c"), at(0)) // 10 s timeout
	retried := ingestFor(t, s, at(0), ep)
	ingestFor(t, s, at(0), ep) // stays leased
	cs := claim(t, s, at(0), store.MaxListLimit)
	require.Len(t, cs, 2)
	byID := map[string]*store.ClaimedDelivery{cs[0].Delivery.ID: cs[0], cs[1].Delivery.ID: cs[1]}

	wait, ok := nextDue(t, s, at(time.Second))
	require.True(t, ok)
	require.Equal(t, 20*time.Second+leaseMargin-time.Second, wait, "the leases expire first")

	o := outcome(byID[retried], herald.StatusPending, at(time.Second))
	o.RetryIn = 1200 * time.Millisecond
	require.Equal(t, []bool{true}, complete(t, s, at(time.Second), o))
	wait, ok = nextDue(t, s, at(time.Second))
	require.True(t, ok)
	require.Equal(t, 1200*time.Millisecond, wait)

	// From half a second later, it is 0.7 s away.
	wait, ok = nextDue(t, s, at(1500*time.Millisecond))
	require.True(t, ok)
	require.Equal(t, 700*time.Millisecond, wait)
}

// testNextDueSkipsDueNow: a delivery already due is not still to come,
// whatever keeps it from a claim.
func testNextDueSkipsDueNow(t *testing.T, s store.Store) {
	ep := createEndpoint(t, s, newEndpoint("c"), at(0))
	ingestFor(t, s, at(0), ep)
	_, ok := nextDue(t, s, at(0))
	require.False(t, ok, "due at once: a claim takes it, no wait")
	ingestFor(t, s, at(10*time.Second), ep)
	wait, ok := nextDue(t, s, at(5*time.Second))
	require.True(t, ok)
	require.Equal(t, 5*time.Second, wait, "the first is due already; the second comes in 5 s")
}

// testNextDueFinished: delivered and dead deliveries have no due time.
func testNextDueFinished(t *testing.T, s store.Store) {
	ep := createEndpoint(t, s, newEndpoint("c"), at(0))
	id := ingestFor(t, s, at(0), ep)
	c := claimOne(t, s, at(0), id)
	require.Equal(t, []bool{true}, complete(t, s, at(time.Second), outcome(c, herald.StatusDelivered, at(time.Second))))
	_, ok := nextDue(t, s, at(time.Second))
	require.False(t, ok)
}

// testNextDueDueNow: DueNow is live work due at Now and not under an
// unexpired lease, whatever keeps it from a claim; work leased, finished
// or due later is not.
func testNextDueDueNow(t *testing.T, s store.Store) {
	require.False(t, readNextDue(t, s, at(0)).DueNow, "nothing at all")
	ep := createEndpoint(t, s, newEndpoint("c"), at(0)) // 10 s timeout
	first := ingestFor(t, s, at(0), ep)
	require.True(t, readNextDue(t, s, at(0)).DueNow, "pending and due")

	c := claimOne(t, s, at(0), first)
	next := readNextDue(t, s, at(time.Second))
	require.False(t, next.DueNow, "leased")
	require.True(t, next.Found)
	require.Equal(t, 20*time.Second+leaseMargin-time.Second, next.Wait, "the lease's expiry is still to come")
	require.True(t, readNextDue(t, s, at(21*time.Second+leaseMargin)).DueNow, "its lease expired: a claim may take it again")

	o := outcome(c, herald.StatusPending, at(2*time.Second))
	o.RetryIn = 3 * time.Second
	require.Equal(t, []bool{true}, complete(t, s, at(2*time.Second), o))
	next = readNextDue(t, s, at(2*time.Second))
	require.False(t, next.DueNow, "its retry is 3 s away")
	require.Equal(t, 3*time.Second, next.Wait)
	require.True(t, readNextDue(t, s, at(5*time.Second)).DueNow, "its retry is due")

	c = claimOne(t, s, at(5*time.Second), first)
	require.Equal(t, []bool{true}, complete(t, s, at(6*time.Second), outcome(c, herald.StatusDelivered, at(6*time.Second))))
	next = readNextDue(t, s, at(6*time.Second))
	require.False(t, next.DueNow, "delivered")
	require.False(t, next.Found)
}

// testSubscribeSoonRetry: an outcome that schedules a retry due within
// store.SoonRetry wakes every subscriber (on PostgreSQL, every node), so an
// idle node learns of it at once.
func testSubscribeSoonRetry(t *testing.T, s store.Store) {
	ep := createEndpoint(t, s, newEndpoint("c"), at(0))
	id := ingestFor(t, s, at(0), ep)
	c := claimOne(t, s, at(0), id)
	ch := subscribe(t, s)
	o := outcome(c, herald.StatusPending, at(time.Second))
	o.RetryIn = 800 * time.Millisecond
	require.Equal(t, []bool{true}, complete(t, s, at(time.Second), o))
	require.True(t, waitSignal(t, ch))
}
