package storetest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhooks/herald"
	"github.com/heraldhooks/herald/internal/store"
)

func healthCases() []testCase {
	return []testCase{
		{"SuccessRateOfTheLastHour", testHealthSuccessRate},
		{"UnknownOrDeletedIsNotFound", testHealthNotFound},
		{"LastSuccessIsKeptToTheSecond", testHealthLastSuccessPrecision},
		{"NoStreakNoFailingSince", testHealthNoFailingSince},
		{"LastSuccessIsKeptToTheSecondInAMixedBatch", testHealthLastSuccessPrecisionInAMixedBatch},
	}
}

// testHealthLastSuccessPrecision requires a success that changes nothing
// else to move LastSuccessAt only once the one kept is
// store.LastSuccessPrecision old, and a success after a failure to be
// written whatever its time.
func testHealthLastSuccessPrecision(t *testing.T, s store.Store) {
	ep := createEndpoint(t, s, quietEndpoint("c"), at(0))
	ids := ingestN(t, s, at(0), ep, 6)
	byID := claimAll(t, s, at(0))
	require.Len(t, byID, 6)
	succeed := func(i int, when time.Time) {
		t.Helper()
		require.Equal(t, []bool{true}, complete(t, s, when, outcome(byID[ids[i]], herald.StatusDelivered, when)))
	}
	t1 := at(time.Second)
	succeed(0, t1)
	requireTimePtr(t, t1, healthOf(t, s, ep.ID, t1).LastSuccessAt)

	half := t1.Add(store.LastSuccessPrecision / 2)
	succeed(1, half)
	h := healthOf(t, s, ep.ID, half)
	requireTimePtr(t, t1, h.LastSuccessAt, "a success within the precision of the last one kept is not written")
	require.Equal(t, 2, h.Attempts1h, "its attempt is logged all the same")

	t2 := t1.Add(store.LastSuccessPrecision)
	succeed(2, t2)
	requireTimePtr(t, t2, healthOf(t, s, ep.ID, t2).LastSuccessAt)

	// A failure, then a success at once: the success resets the streak.
	failAt := t2.Add(store.LastSuccessPrecision / 10)
	fail(t, s, failAt, byID[ids[3]], time.Hour)
	h = healthOf(t, s, ep.ID, failAt)
	require.Equal(t, 1, h.ConsecutiveFailures)
	requireTimePtr(t, t2, h.LastSuccessAt)
	t3 := failAt.Add(store.LastSuccessPrecision / 10)
	succeed(4, t3)
	h = healthOf(t, s, ep.ID, t3)
	require.Zero(t, h.ConsecutiveFailures)
	require.Nil(t, h.FailingSince)
	requireTimePtr(t, t3, h.LastSuccessAt, "a success that ends a streak is written")

	// A success with a pause asked changes more than the last success.
	pausedAt := t3.Add(store.LastSuccessPrecision / 10)
	o := outcome(byID[ids[5]], herald.StatusDelivered, pausedAt)
	o.PauseFor = time.Minute
	require.Equal(t, []bool{true}, complete(t, s, pausedAt, o))
	h = healthOf(t, s, ep.ID, pausedAt)
	requireTimePtr(t, pausedAt.Add(time.Minute), h.PausedUntil)
	requireTimePtr(t, pausedAt, h.LastSuccessAt)
}

func testHealthSuccessRate(t *testing.T, s store.Store) {
	ep := createEndpoint(t, s, quietEndpoint("c"), at(0))
	other := createEndpoint(t, s, quietEndpoint("c2"), at(0))
	now := at(5 * time.Hour)

	h := healthOf(t, s, ep.ID, now)
	require.Nil(t, h.SuccessRate1h, "no attempts, no rate")
	require.Zero(t, h.Attempts1h)
	require.Equal(t, herald.BreakerClosed, h.BreakerState)

	// Attempts in (now - 1h, now] count; the hour's first instant does not.
	attemptsAt := []struct {
		before time.Duration
		ok     bool
	}{
		{2 * time.Hour, false},
		{time.Hour, true},
		{59 * time.Minute, true},
		{30 * time.Minute, false},
		{10 * time.Minute, true},
		{0, true},
		{-time.Minute, false},
	}
	ids := ingestN(t, s, at(0), ep, len(attemptsAt))
	oid := ingestFor(t, s, at(0), other)
	byID := claimAll(t, s, at(0))
	require.Len(t, byID, len(attemptsAt)+1)
	for i, a := range attemptsAt {
		when := now.Add(-a.before)
		status := herald.StatusDelivered
		if !a.ok {
			status = herald.StatusPending
		}
		require.Equal(t, []bool{true}, complete(t, s, when, outcome(byID[ids[i]], status, when)))
	}
	// Another endpoint's attempts are its own.
	fail(t, s, now, byID[oid], time.Hour)

	h = healthOf(t, s, ep.ID, now)
	require.Equal(t, 4, h.Attempts1h)
	require.NotNil(t, h.SuccessRate1h)
	require.InDelta(t, 0.75, *h.SuccessRate1h, 1e-9)
	// The stored health comes with it: the last outcome was a failure.
	require.Equal(t, 1, h.ConsecutiveFailures)
	requireTimePtr(t, now.Add(time.Minute), h.LastFailureAt)
	requireTimePtr(t, now, h.LastSuccessAt)

	h = healthOf(t, s, other.ID, now)
	require.Equal(t, 1, h.Attempts1h)
	require.InDelta(t, 0.0, *h.SuccessRate1h, 1e-9)

	h = healthOf(t, s, ep.ID, now.Add(2*time.Hour))
	require.Zero(t, h.Attempts1h)
	require.Nil(t, h.SuccessRate1h)
}

func testHealthNotFound(t *testing.T, s store.Store) {
	_, err := s.EndpointHealthGet(t.Context(), &store.EndpointHealthGetParams{ID: "ep_00000000000000000000000000", Now: at(0)})
	expectNotFound(t, err)
	ep := createEndpoint(t, s, quietEndpoint("c"), at(0))
	require.NoError(t, s.EndpointDelete(t.Context(), &store.EndpointDeleteParams{ID: ep.ID, Now: at(time.Second)}))
	_, err = s.EndpointHealthGet(t.Context(), &store.EndpointHealthGetParams{ID: ep.ID, Now: at(time.Second)})
	expectNotFound(t, err)
}
