package storetest

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhooks/herald"
	"github.com/heraldhooks/herald/internal/store"
)

func breakerCases() []testCase {
	return []testCase{
		{"FiveFailuresOpenThenOneProbeDoublingToAnHour", testBreakerOpensAndProbes},
		{"HalfFailingWindowOfTwentyOpens", testBreakerWindow},
		{"WindowForgetsAttemptsOlderThanTenMinutes", testBreakerWindowAge},
		{"LostProbeIsRetriedWhenItsLeaseRunsOut", testBreakerLostProbe},
		{"EnableStartsHealthAfresh", testBreakerEnableResets},
	}
}

// quietEndpoint is an enabled endpoint of consumer for order.* events only:
// Herald's notifications about it reach no endpoint of this case.
func quietEndpoint(consumer string) *herald.Endpoint {
	return newEndpoint(consumer, "order.*")
}

// healthOf reads endpoint id's health at now.
func healthOf(t *testing.T, s store.Store, id string, now time.Time) *herald.EndpointHealth {
	t.Helper()
	h, err := s.EndpointHealthGet(t.Context(), &store.EndpointHealthGetParams{ID: id, Now: now})
	require.NoError(t, err)
	return h
}

// fail completes lease c at now with a 503 to retry after retryIn, and
// requires that it applied.
func fail(t *testing.T, s store.Store, now time.Time, c *store.ClaimedDelivery, retryIn time.Duration) {
	t.Helper()
	o := outcome(c, herald.StatusPending, now)
	o.RetryIn = retryIn
	require.Equal(t, []bool{true}, complete(t, s, now, o))
}

// ingestN ingests n order.created events for ep's consumer at now in one
// batch and returns their deliveries to ep, in ingest order.
func ingestN(t *testing.T, s store.Store, now time.Time, ep *herald.Endpoint, n int) []string {
	t.Helper()
	items := make([]store.EventIngestItem, n)
	for i := range items {
		items[i] = store.EventIngestItem{ConsumerID: ep.ConsumerID, EventType: "order.created", Payload: fmt.Appendf(nil, `{"i":%d}`, i)}
	}
	var ids []string
	for _, res := range ingest(t, s, now, items...) {
		require.Len(t, res.Deliveries, 1)
		require.Equal(t, ep.ID, res.Deliveries[0].EndpointID)
		ids = append(ids, res.Deliveries[0].ID)
	}
	return ids
}

// claimN claims at now and requires exactly n deliveries.
func claimN(t *testing.T, s store.Store, now time.Time, limit, n int) []*store.ClaimedDelivery {
	t.Helper()
	got := claim(t, s, now, limit)
	require.Len(t, got, n, "claim of %d at %s", limit, now.Sub(Base))
	return got
}

func testBreakerOpensAndProbes(t *testing.T, s store.Store) {
	ep := createEndpoint(t, s, quietEndpoint("c"), at(0))
	ids := ingestN(t, s, at(0), ep, 5)
	leases := claimAll(t, s, at(0))
	require.Len(t, leases, 5)

	failedAt := at(time.Second)
	for i, id := range ids {
		fail(t, s, failedAt, leases[id], time.Second)
		h := healthOf(t, s, ep.ID, failedAt)
		require.Equal(t, i+1, h.ConsecutiveFailures)
		if i < 4 {
			require.Equal(t, herald.BreakerClosed, h.BreakerState, "after %d failures", i+1)
		}
	}
	h := healthOf(t, s, ep.ID, failedAt)
	require.Equal(t, herald.BreakerOpen, h.BreakerState)
	require.Equal(t, 5*time.Minute, h.Cooldown)
	requireTimePtr(t, failedAt.Add(5*time.Minute), h.ProbeAt)
	requireTimePtr(t, failedAt, h.FailingSince)
	requireTimePtr(t, failedAt, h.LastFailureAt)
	read, err := s.EndpointGet(t.Context(), ep.ID)
	require.NoError(t, err)
	require.Equal(t, herald.BreakerOpen, read.Health.BreakerState, "the endpoint carries its health")

	// While open, due deliveries wait and spend no attempt.
	late := ingestFor(t, s, at(2*time.Second), ep)
	requireNoneDue(t, s, at(time.Minute))
	requireNoneDue(t, s, failedAt.Add(5*time.Minute-time.Microsecond))
	for _, id := range ids {
		d := requireStatus(t, s, id, herald.StatusPending)
		require.Equal(t, 1, d.AttemptCount)
	}
	require.Zero(t, getDelivery(t, s, late).AttemptCount)

	// After the cooldown exactly one probe goes; the breaker is half-open
	// until its lease runs out.
	probeAt := failedAt.Add(5 * time.Minute)
	c := claimN(t, s, probeAt, store.MaxListLimit, 1)[0]
	require.Equal(t, herald.BreakerHalfOpen, c.Endpoint.Health.BreakerState)
	h = healthOf(t, s, ep.ID, probeAt)
	require.Equal(t, herald.BreakerHalfOpen, h.BreakerState)
	requireTimePtr(t, c.LeaseExpiresAt, h.ProbeAt)
	requireNoneDue(t, s, probeAt)
	requireNoneDue(t, s, probeAt.Add(time.Second))

	// Each failed probe reopens it for twice as long, up to an hour.
	for _, cooldown := range []time.Duration{10 * time.Minute, 20 * time.Minute, 40 * time.Minute, time.Hour, time.Hour} {
		failAt := probeAt.Add(time.Second)
		fail(t, s, failAt, c, time.Second)
		h := healthOf(t, s, ep.ID, failAt)
		require.Equal(t, herald.BreakerOpen, h.BreakerState)
		require.Equal(t, cooldown, h.Cooldown)
		requireTimePtr(t, failAt.Add(cooldown), h.ProbeAt)
		requireNoneDue(t, s, failAt.Add(cooldown-time.Microsecond))
		probeAt = failAt.Add(cooldown)
		c = claimN(t, s, probeAt, store.MaxListLimit, 1)[0]
	}

	// A successful probe closes it, and the rest flow.
	doneAt := probeAt.Add(time.Second)
	finish(t, s, doneAt, c, herald.StatusDelivered)
	h = healthOf(t, s, ep.ID, doneAt)
	require.Equal(t, herald.BreakerClosed, h.BreakerState)
	require.Zero(t, h.ConsecutiveFailures)
	require.Nil(t, h.ProbeAt)
	require.Nil(t, h.FailingSince)
	requireTimePtr(t, doneAt, h.LastSuccessAt)
	rest := claimAll(t, s, doneAt)
	require.Len(t, rest, 5)
	require.NotContains(t, rest, c.Delivery.ID)
}

// alternate completes the leases in order at one-second steps from start,
// success first, then failure, and so on; check runs after each.
func alternate(t *testing.T, s store.Store, leases []*store.ClaimedDelivery, start time.Time, check func(i int, now time.Time)) {
	t.Helper()
	for i, c := range leases {
		now := start.Add(time.Duration(i) * time.Second)
		if i%2 == 0 {
			finish(t, s, now, c, herald.StatusDelivered)
		} else {
			fail(t, s, now, c, time.Hour)
		}
		check(i, now)
	}
}

func testBreakerWindow(t *testing.T, s store.Store) {
	in := quietEndpoint("c")
	in.MaxInFlight = 20
	ep := createEndpoint(t, s, in, at(0))
	ingestN(t, s, at(0), ep, 20)
	leases := claimN(t, s, at(0), 20, 20)

	// Never two failures in a row, but half of 20 attempts in 20 s.
	alternate(t, s, leases, at(time.Second), func(i int, now time.Time) {
		h := healthOf(t, s, ep.ID, now)
		require.LessOrEqual(t, h.ConsecutiveFailures, 1)
		if i < 19 {
			require.Equal(t, herald.BreakerClosed, h.BreakerState, "after %d attempts", i+1)
			return
		}
		require.Equal(t, herald.BreakerOpen, h.BreakerState, "20 attempts, 10 failed")
		requireTimePtr(t, now.Add(5*time.Minute), h.ProbeAt)
	})
	requireNoneDue(t, s, at(time.Minute))
}

func testBreakerWindowAge(t *testing.T, s store.Store) {
	in := quietEndpoint("c")
	in.MaxInFlight = 20
	ep := createEndpoint(t, s, in, at(0))
	ingestN(t, s, at(0), ep, 20)
	leases := claimN(t, s, at(0), 20, 20)

	// Ten attempts, then ten more eleven minutes later: never twenty in
	// one window.
	closed := func(i int, now time.Time) {
		require.Equal(t, herald.BreakerClosed, healthOf(t, s, ep.ID, now).BreakerState, "attempt %d", i+1)
	}
	alternate(t, s, leases[:10], at(time.Second), closed)
	alternate(t, s, leases[10:], at(11*time.Minute), closed)
}

func testBreakerLostProbe(t *testing.T, s store.Store) {
	ep := createEndpoint(t, s, quietEndpoint("c"), at(0))
	ingestN(t, s, at(0), ep, 5)
	for _, c := range claimN(t, s, at(0), 10, 5) {
		fail(t, s, at(time.Second), c, 0)
	}
	probeAt := at(time.Second + 5*time.Minute)
	probe := claimN(t, s, probeAt, 10, 1)[0]

	// The probe's node dies: nothing goes until its lease has run out,
	// then one probe again (the lost one, due once more, or another).
	requireNoneDue(t, s, probe.LeaseExpiresAt.Add(-time.Microsecond))
	again := claimN(t, s, probe.LeaseExpiresAt, 10, 1)[0]
	require.Equal(t, herald.BreakerHalfOpen, again.Endpoint.Health.BreakerState)
	requireTimePtr(t, again.LeaseExpiresAt, healthOf(t, s, ep.ID, probe.LeaseExpiresAt).ProbeAt)
	requireNoneDue(t, s, probe.LeaseExpiresAt)
}

func testBreakerEnableResets(t *testing.T, s store.Store) {
	in := quietEndpoint("c")
	// Five tokens, and about one more every seventeen minutes.
	in.RateLimit = &herald.RateLimit{PerSecond: 0.001, Burst: 5}
	ep := createEndpoint(t, s, in, at(0))
	ingestN(t, s, at(0), ep, 6)
	for _, c := range claimN(t, s, at(0), 10, 5) {
		fail(t, s, at(time.Second), c, 0)
	}
	require.Equal(t, herald.BreakerOpen, healthOf(t, s, ep.ID, at(time.Minute)).BreakerState)

	disableEndpoint(t, s, ep.ID, at(time.Minute))
	got, err := s.EndpointSetEnabled(t.Context(), &store.EndpointSetEnabledParams{ID: ep.ID, Enabled: true, Now: at(time.Minute)})
	require.NoError(t, err)
	require.Equal(t, herald.NewEndpointHealth(), got.Health)
	h := healthOf(t, s, ep.ID, at(time.Minute))
	require.Equal(t, herald.BreakerClosed, h.BreakerState)
	require.Zero(t, h.ConsecutiveFailures)
	require.Nil(t, h.FailingSince)
	require.Nil(t, h.ProbeAt)
	require.Equal(t, 1.0, h.RateFactor)

	// Work flows at once, with a full bucket again.
	ingestN(t, s, at(time.Minute), ep, 6)
	claimN(t, s, at(time.Minute), 10, 5)
	requireNoneDue(t, s, at(time.Minute))
}
