package storetest

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhooks/herald"
	"github.com/heraldhooks/herald/internal/store"
)

func completeCases() []testCase {
	return []testCase{
		{"DeliveredLogsAttempt", testCompleteDelivered},
		{"RetryIsDueAfterRetryIn", testCompleteRetry},
		{"DeadKeepsReason", testCompleteDead},
		{"BatchAppliesEachOutcome", testCompleteBatch},
		{"StaleLeaseIsFenced", testCompleteStaleLease},
		{"CancelledLeaseIsFenced", testCompleteCancelled},
		{"DisableEndpointSendsOthersDead", testCompleteDisableEndpoint},
		{"StaleOutcomeDisablesNothing", testCompleteStaleDisable},
		{"DisableMidBatchAppliesTheRest", testCompleteDisableMidBatch},
	}
}

func testCompleteDelivered(t *testing.T, s store.Store) {
	ep := createEndpoint(t, s, newEndpoint("c", "order.*"), at(0))
	id := ingestFor(t, s, at(0), ep)
	c := claimOne(t, s, at(time.Second), id)

	body := bytes.Repeat([]byte("ok \x00\xff "), 100)
	applied := complete(t, s, at(3*time.Second), store.DeliveryOutcome{
		Lease:  store.Lease{DeliveryID: id, LeaseToken: c.LeaseToken},
		Status: herald.StatusDelivered,
		Attempt: herald.Attempt{
			Number:      1,
			AttemptedAt: at(1500 * time.Millisecond),
			Duration:    1234 * time.Millisecond,
			StatusCode:  204,
			Response:    body,
		},
	})
	require.Equal(t, []bool{true}, applied)

	d := requireStatus(t, s, id, herald.StatusDelivered)
	require.Equal(t, 1, d.AttemptCount)
	require.Equal(t, 204, d.LastStatusCode)
	require.Empty(t, d.LastError)
	require.Empty(t, d.DeadReason)
	require.Nil(t, d.NextAttemptAt)
	requireTimePtr(t, at(3*time.Second), d.DeliveredAt)
	requireTime(t, at(3*time.Second), d.UpdatedAt)
	requireTime(t, at(0), d.CreatedAt)

	atts := attempts(t, s, id)
	require.Len(t, atts, 1)
	a := atts[0]
	require.Regexp(t, `^att_[0-9a-z]{26}$`, a.ID)
	require.Equal(t, id, a.DeliveryID)
	require.Equal(t, ep.ID, a.EndpointID)
	require.Equal(t, 1, a.Number)
	requireTime(t, at(1500*time.Millisecond), a.AttemptedAt)
	require.Equal(t, 1234*time.Millisecond, a.Duration)
	require.Equal(t, 204, a.StatusCode)
	require.Equal(t, body, a.Response)
	require.Empty(t, a.Error)

	requireNoneDue(t, s, at(24*time.Hour))
	// Completing it again under the same lease does nothing more.
	require.Equal(t, []bool{false}, complete(t, s, at(4*time.Second), outcome(c, herald.StatusDead, at(4*time.Second))))
	requireStatus(t, s, id, herald.StatusDelivered)
}

func testCompleteRetry(t *testing.T, s store.Store) {
	ep := createEndpoint(t, s, newEndpoint("c", "order.*"), at(0))
	id := ingestFor(t, s, at(0), ep)
	c := claimOne(t, s, at(0), id)

	applied := complete(t, s, at(time.Second), store.DeliveryOutcome{
		Lease:   store.Lease{DeliveryID: id, LeaseToken: c.LeaseToken},
		Status:  herald.StatusPending,
		RetryIn: 30 * time.Second,
		Attempt: herald.Attempt{
			Number: 1, AttemptedAt: at(0), Duration: 10 * time.Second,
			Error: "context deadline exceeded",
		},
	})
	require.Equal(t, []bool{true}, applied)

	d := requireStatus(t, s, id, herald.StatusPending)
	require.Equal(t, 1, d.AttemptCount)
	require.Zero(t, d.LastStatusCode)
	require.Equal(t, "context deadline exceeded", d.LastError)
	requireTimePtr(t, at(31*time.Second), d.NextAttemptAt)
	require.Nil(t, d.DeliveredAt)

	requireNoneDue(t, s, at(31*time.Second-time.Microsecond))
	c2 := claimOne(t, s, at(31*time.Second), id)
	require.Equal(t, 1, c2.Delivery.AttemptCount)
	require.NotEqual(t, c.LeaseToken, c2.LeaseToken)

	applied = complete(t, s, at(32*time.Second), store.DeliveryOutcome{
		Lease:   store.Lease{DeliveryID: id, LeaseToken: c2.LeaseToken},
		Status:  herald.StatusPending,
		RetryIn: 5 * time.Minute,
		Attempt: herald.Attempt{
			Number: 2, AttemptedAt: at(31 * time.Second), Duration: 80 * time.Millisecond,
			StatusCode: 503, Response: []byte("busy"), Error: "HTTP 503",
		},
	})
	require.Equal(t, []bool{true}, applied)
	d = requireStatus(t, s, id, herald.StatusPending)
	require.Equal(t, 2, d.AttemptCount)
	require.Equal(t, 503, d.LastStatusCode)
	require.Equal(t, "HTTP 503", d.LastError)
	requireTimePtr(t, at(32*time.Second+5*time.Minute), d.NextAttemptAt)

	c3 := claimOne(t, s, at(32*time.Second+5*time.Minute), id)
	finish(t, s, at(6*time.Minute), c3, herald.StatusDelivered)
	d = requireStatus(t, s, id, herald.StatusDelivered)
	require.Equal(t, 3, d.AttemptCount)
	require.Equal(t, 200, d.LastStatusCode)
	require.Empty(t, d.LastError, "a success clears the last error")

	atts := attempts(t, s, id)
	require.Len(t, atts, 3)
	require.Equal(t, []int{1, 2, 3}, []int{atts[0].Number, atts[1].Number, atts[2].Number})
	require.Equal(t, "context deadline exceeded", atts[0].Error)
	require.Equal(t, 10*time.Second, atts[0].Duration)
	require.Empty(t, atts[0].Response)
	require.Equal(t, 503, atts[1].StatusCode)
	require.Equal(t, "busy", string(atts[1].Response))
}

func testCompleteDead(t *testing.T, s store.Store) {
	ep := createEndpoint(t, s, newEndpoint("c", "order.*"), at(0))
	id := ingestFor(t, s, at(0), ep)
	c := claimOne(t, s, at(0), id)

	applied := complete(t, s, at(time.Second), store.DeliveryOutcome{
		Lease:      store.Lease{DeliveryID: id, LeaseToken: c.LeaseToken},
		Status:     herald.StatusDead,
		DeadReason: herald.DeadExhausted,
		Attempt: herald.Attempt{
			Number: 1, AttemptedAt: at(0), Duration: time.Millisecond,
			Error: "dial tcp 203.0.113.9:443: connect: connection refused",
		},
	})
	require.Equal(t, []bool{true}, applied)
	d := requireStatus(t, s, id, herald.StatusDead)
	require.Equal(t, herald.DeadExhausted, d.DeadReason)
	require.Equal(t, 1, d.AttemptCount)
	require.Equal(t, "dial tcp 203.0.113.9:443: connect: connection refused", d.LastError)
	require.Nil(t, d.NextAttemptAt)
	require.Nil(t, d.DeliveredAt)
	requireNoneDue(t, s, at(48*time.Hour))
}

func testCompleteBatch(t *testing.T, s store.Store) {
	ep := createEndpoint(t, s, newEndpoint("c", "order.*"), at(0))
	a := ingestFor(t, s, at(0), ep)
	b := ingestFor(t, s, at(time.Second), ep)
	c := ingestFor(t, s, at(2*time.Second), ep)
	leases := claimAll(t, s, at(3*time.Second))
	require.Len(t, leases, 3)

	retry := outcome(leases[b], herald.StatusPending, at(3*time.Second))
	retry.RetryIn = time.Hour
	dead := outcome(leases[c], herald.StatusDead, at(3*time.Second))
	dead.DeadReason = herald.DeadClientError
	applied := complete(t, s, at(4*time.Second),
		outcome(leases[a], herald.StatusDelivered, at(3*time.Second)), retry, dead)
	require.Equal(t, []bool{true, true, true}, applied)

	requireStatus(t, s, a, herald.StatusDelivered)
	requireTimePtr(t, at(4*time.Second+time.Hour), requireStatus(t, s, b, herald.StatusPending).NextAttemptAt)
	require.Equal(t, herald.DeadClientError, requireStatus(t, s, c, herald.StatusDead).DeadReason)
	for _, id := range []string{a, b, c} {
		require.Len(t, attempts(t, s, id), 1)
	}

	// An empty batch is fine.
	require.Empty(t, complete(t, s, at(5*time.Second)))
}

func testCompleteStaleLease(t *testing.T, s store.Store) {
	ep := createEndpoint(t, s, newEndpoint("c", "order.*"), at(0))
	id := ingestFor(t, s, at(0), ep)
	old := claimOne(t, s, at(0), id)

	// The first claimer stalls past its lease; another claims it again.
	fresh := claimOne(t, s, old.LeaseExpiresAt, id)
	require.NotEqual(t, old.LeaseToken, fresh.LeaseToken)
	other := ingestFor(t, s, old.LeaseExpiresAt, ep)
	leases := map[string]*store.ClaimedDelivery{other: claimOne(t, s, old.LeaseExpiresAt, other)}

	// The stalled outcome and a good one come in one batch: only the good
	// one applies, but the stalled attempt really happened and is logged.
	applied := complete(t, s, old.LeaseExpiresAt.Add(time.Second),
		outcome(old, herald.StatusDead, old.LeaseExpiresAt),
		outcome(leases[other], herald.StatusDelivered, at(time.Second)))
	require.Equal(t, []bool{false, true}, applied)
	d := requireStatus(t, s, id, herald.StatusDelivering)
	require.Zero(t, d.AttemptCount, "a stale outcome spends no attempt")
	require.Empty(t, d.DeadReason)
	require.Len(t, attempts(t, s, id), 1)
	requireStatus(t, s, other, herald.StatusDelivered)

	// A stale release does nothing either.
	require.NoError(t, s.DeliveryRelease(t.Context(), &store.DeliveryReleaseParams{
		Leases: []store.Lease{{DeliveryID: id, LeaseToken: old.LeaseToken}}, Now: old.LeaseExpiresAt,
	}))
	requireStatus(t, s, id, herald.StatusDelivering)

	// The fresh claim's outcome applies.
	require.Equal(t, []bool{true}, complete(t, s, old.LeaseExpiresAt.Add(2*time.Second),
		outcome(fresh, herald.StatusDelivered, old.LeaseExpiresAt.Add(time.Second))))
	d = requireStatus(t, s, id, herald.StatusDelivered)
	require.Equal(t, 1, d.AttemptCount)

	// And the stalled one, arriving later still, cannot overwrite it.
	require.Equal(t, []bool{false}, complete(t, s, old.LeaseExpiresAt.Add(time.Minute),
		outcome(old, herald.StatusPending, old.LeaseExpiresAt)))
	requireStatus(t, s, id, herald.StatusDelivered)
	require.Len(t, attempts(t, s, id), 3)
}

func testCompleteCancelled(t *testing.T, s store.Store) {
	ep := createEndpoint(t, s, newEndpoint("c", "order.*"), at(0))
	id := ingestFor(t, s, at(0), ep)
	c := claimOne(t, s, at(0), id)

	got, err := s.DeliveryCancel(t.Context(), &store.DeliveryCancelParams{ID: id, Now: at(time.Second)})
	require.NoError(t, err)
	require.Equal(t, herald.StatusCancelled, got.Status)

	require.Equal(t, []bool{false}, complete(t, s, at(2*time.Second), outcome(c, herald.StatusDelivered, at(time.Second))))
	d := requireStatus(t, s, id, herald.StatusCancelled)
	require.Zero(t, d.AttemptCount)
	require.Nil(t, d.DeliveredAt)
	require.Len(t, attempts(t, s, id), 1, "the attempt happened and is logged")
	requireNoneDue(t, s, at(time.Hour))
}

func testCompleteDisableEndpoint(t *testing.T, s store.Store) {
	ep := createEndpoint(t, s, newEndpoint("c", "order.*"), at(0))
	other := createEndpoint(t, s, newEndpoint("c2", "order.*"), at(0))
	done := ingestFor(t, s, at(0), ep)
	finish(t, s, at(0), claimOne(t, s, at(0), done), herald.StatusDelivered)
	gone := ingestFor(t, s, at(0), ep)
	inFlight := ingestFor(t, s, at(time.Second), ep)
	otherInFlight := ingestFor(t, s, at(time.Second), other)
	leases := claimAll(t, s, at(2*time.Second))
	require.Len(t, leases, 3)
	waiting := ingestFor(t, s, at(3*time.Second), ep)

	o := outcome(leases[gone], herald.StatusDead, at(5*time.Second))
	o.Attempt.StatusCode = 410
	o.Attempt.Error = "HTTP 410"
	o.DeadReason = herald.DeadGone
	o.DisableEndpoint = "gone"
	require.Equal(t, []bool{true}, complete(t, s, at(6*time.Second), o))

	read, err := s.EndpointGet(t.Context(), ep.ID)
	require.NoError(t, err)
	require.False(t, read.Enabled)
	require.Equal(t, "gone", read.DisabledReason)

	d := requireStatus(t, s, gone, herald.StatusDead)
	require.Equal(t, herald.DeadGone, d.DeadReason, "its own outcome keeps its reason")
	require.Equal(t, 410, d.LastStatusCode)
	requireStatus(t, s, done, herald.StatusDelivered)
	for _, id := range []string{inFlight, waiting} {
		d := requireStatus(t, s, id, herald.StatusDead)
		require.Equal(t, herald.DeadEndpointDisabled, d.DeadReason, "delivery %s", id)
	}
	requireStatus(t, s, otherInFlight, herald.StatusDelivering)

	require.Equal(t, []bool{false, true}, complete(t, s, at(7*time.Second),
		outcome(leases[inFlight], herald.StatusDelivered, at(6*time.Second)),
		outcome(leases[otherInFlight], herald.StatusDelivered, at(6*time.Second))))
	requireStatus(t, s, inFlight, herald.StatusDead)
	requireStatus(t, s, otherInFlight, herald.StatusDelivered)
	requireNoneDue(t, s, at(time.Hour))
}

// testCompleteDisableMidBatch: an outcome that disables its endpoint does
// not undo what the batch's later outcomes for that endpoint record. A
// delivery that arrived stays delivered; one put back to pending goes dead
// with the endpoint's other live deliveries.
func testCompleteDisableMidBatch(t *testing.T, s store.Store) {
	ep := createEndpoint(t, s, newEndpoint("c", "order.*"), at(0))
	gone := ingestFor(t, s, at(0), ep)
	arrived := ingestFor(t, s, at(0), ep)
	retry := ingestFor(t, s, at(0), ep)
	leases := claimAll(t, s, at(time.Second))
	require.Len(t, leases, 3)

	o := outcome(leases[gone], herald.StatusDead, at(2*time.Second))
	o.Attempt.StatusCode = 410
	o.DeadReason = herald.DeadGone
	o.DisableEndpoint = "gone"
	require.Equal(t, []bool{true, true, true}, complete(t, s, at(3*time.Second), o,
		outcome(leases[arrived], herald.StatusDelivered, at(2*time.Second)),
		outcome(leases[retry], herald.StatusPending, at(2*time.Second))))

	read, err := s.EndpointGet(t.Context(), ep.ID)
	require.NoError(t, err)
	require.False(t, read.Enabled)
	require.Equal(t, herald.DeadGone, requireStatus(t, s, gone, herald.StatusDead).DeadReason)
	requireStatus(t, s, arrived, herald.StatusDelivered)
	require.Equal(t, herald.DeadEndpointDisabled, requireStatus(t, s, retry, herald.StatusDead).DeadReason)
	for _, id := range []string{gone, arrived, retry} {
		require.Len(t, attempts(t, s, id), 1, "delivery %s: its attempt is logged", id)
	}
}

func testCompleteStaleDisable(t *testing.T, s store.Store) {
	ep := createEndpoint(t, s, newEndpoint("c", "order.*"), at(0))
	id := ingestFor(t, s, at(0), ep)
	old := claimOne(t, s, at(0), id)
	fresh := claimOne(t, s, old.LeaseExpiresAt, id)

	o := outcome(old, herald.StatusDead, at(time.Second))
	o.DeadReason = herald.DeadGone
	o.DisableEndpoint = "gone"
	require.Equal(t, []bool{false}, complete(t, s, old.LeaseExpiresAt.Add(time.Second), o))

	read, err := s.EndpointGet(t.Context(), ep.ID)
	require.NoError(t, err)
	require.True(t, read.Enabled, "a stale outcome disables nothing")
	requireStatus(t, s, id, herald.StatusDelivering)
	finish(t, s, old.LeaseExpiresAt.Add(2*time.Second), fresh, herald.StatusDelivered)
}

func releaseCases() []testCase {
	return []testCase{
		{"PutsBackDueNowWithoutSpendingAttempt", testRelease},
	}
}

func testRelease(t *testing.T, s store.Store) {
	slow := newEndpoint("c", "order.*")
	slow.Timeout = time.Minute // leases of 2m7s: none expires here
	ep := createEndpoint(t, s, slow, at(0))
	id := ingestFor(t, s, at(0), ep)
	other := ingestFor(t, s, at(0), ep)
	leases := claimAll(t, s, at(0))
	finish(t, s, at(time.Second), leases[id], herald.StatusPending) // due at 31 s
	c := claimOne(t, s, at(31*time.Second), id)
	require.Equal(t, 1, c.Delivery.AttemptCount)

	require.NoError(t, s.DeliveryRelease(t.Context(), &store.DeliveryReleaseParams{
		Leases: []store.Lease{
			{DeliveryID: id, LeaseToken: c.LeaseToken},
			{DeliveryID: other, LeaseToken: leases[other].LeaseToken},
		},
		Now: at(40 * time.Second),
	}))
	d := requireStatus(t, s, id, herald.StatusPending)
	require.Equal(t, 1, d.AttemptCount, "a release spends no attempt")
	requireTimePtr(t, at(40*time.Second), d.NextAttemptAt)
	require.Len(t, attempts(t, s, id), 1, "a release logs no attempt")
	o := requireStatus(t, s, other, herald.StatusPending)
	require.Zero(t, o.AttemptCount)

	// Due at once: the next claim takes both again.
	again := claimAll(t, s, at(40*time.Second))
	require.Len(t, again, 2)
	require.Equal(t, 1, again[id].Delivery.AttemptCount)
	require.NotEqual(t, c.LeaseToken, again[id].LeaseToken)

	// An old token releases nothing.
	require.NoError(t, s.DeliveryRelease(t.Context(), &store.DeliveryReleaseParams{
		Leases: []store.Lease{{DeliveryID: id, LeaseToken: c.LeaseToken}}, Now: at(41 * time.Second),
	}))
	requireStatus(t, s, id, herald.StatusDelivering)
	requireNoneDue(t, s, at(41*time.Second))

	// Releasing nothing is fine.
	require.NoError(t, s.DeliveryRelease(t.Context(), &store.DeliveryReleaseParams{Now: at(42 * time.Second)}))
}
