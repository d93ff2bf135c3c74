package ratelimit_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhooks/herald"
	"github.com/heraldhooks/herald/internal/ratelimit"
)

var t0 = time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)

func ptr(t time.Time) *time.Time { return &t }

func health(factor float64) *herald.EndpointHealth {
	h := herald.NewEndpointHealth()
	h.RateFactor = factor
	return &h
}

func limited(perSecond float64, burst int) *herald.Endpoint {
	return &herald.Endpoint{RateLimit: &herald.RateLimit{PerSecond: perSecond, Burst: burst}}
}

func TestMaxInFlight(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		ep     herald.Endpoint
		factor float64
		want   int
	}{
		{"DefaultIsTen", herald.Endpoint{}, 1, 10},
		{"OwnCap", herald.Endpoint{MaxInFlight: 3}, 1, 3},
		{"HalvedByThrottling", herald.Endpoint{}, 0.5, 5},
		{"RoundedDown", herald.Endpoint{MaxInFlight: 3}, 0.5, 1},
		{"NeverBelowOne", herald.Endpoint{}, 1.0 / 64, 1},
		{"FactorOutOfRangeIsFullSpeed", herald.Endpoint{MaxInFlight: 4}, 0, 4},
		{"FactorAboveOneIsFullSpeed", herald.Endpoint{MaxInFlight: 4}, 3, 4},
		{"FIFOIsOne", herald.Endpoint{MaxInFlight: 50, Ordering: herald.OrderingFIFO}, 1, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tc.want, ratelimit.MaxInFlight(&tc.ep, health(tc.factor)))
		})
	}
}

func TestRefill(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		ep     *herald.Endpoint
		factor float64
		b      ratelimit.Bucket
		now    time.Time
		want   ratelimit.Bucket
	}{
		{"NoLimitIsEmptyAndUnused", &herald.Endpoint{}, 1, ratelimit.Bucket{Tokens: 3, At: t0}, t0.Add(time.Second), ratelimit.Bucket{At: t0.Add(time.Second)}},
		{"ZeroRateIsNoLimit", limited(0, 5), 1, ratelimit.Bucket{}, t0, ratelimit.Bucket{At: t0}},
		{"ZeroBucketIsFull", limited(2, 5), 1, ratelimit.Bucket{}, t0, ratelimit.Bucket{Tokens: 5, At: t0}},
		{"BurstIsAtLeastOne", limited(2, 0), 1, ratelimit.Bucket{}, t0, ratelimit.Bucket{Tokens: 1, At: t0}},
		{"RefillsAtTheRate", limited(2, 5), 1, ratelimit.Bucket{Tokens: 0, At: t0}, t0.Add(750 * time.Millisecond), ratelimit.Bucket{Tokens: 1.5, At: t0.Add(750 * time.Millisecond)}},
		{"CappedAtBurst", limited(2, 5), 1, ratelimit.Bucket{Tokens: 4, At: t0}, t0.Add(time.Hour), ratelimit.Bucket{Tokens: 5, At: t0.Add(time.Hour)}},
		{"ThrottledRefillsSlower", limited(2, 5), 0.25, ratelimit.Bucket{Tokens: 0, At: t0}, t0.Add(2 * time.Second), ratelimit.Bucket{Tokens: 1, At: t0.Add(2 * time.Second)}},
		{"NeverBackwards", limited(2, 5), 1, ratelimit.Bucket{Tokens: 1, At: t0}, t0.Add(-time.Second), ratelimit.Bucket{Tokens: 1, At: t0}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := ratelimit.Refill(tc.ep, health(tc.factor), tc.b, tc.now)
			require.InDelta(t, tc.want.Tokens, got.Tokens, 1e-9)
			require.Equal(t, tc.want.At, got.At)
		})
	}
}

func TestAllowance(t *testing.T) {
	t.Parallel()
	paused := health(1)
	paused.PausedUntil = ptr(t0.Add(time.Second))
	pausedUntilNow := health(1)
	pausedUntilNow.PausedUntil = ptr(t0)
	cases := []struct {
		name     string
		ep       *herald.Endpoint
		h        *herald.EndpointHealth
		b        ratelimit.Bucket
		inFlight int
		want     int
	}{
		{"FreeEndpointTakesItsCap", &herald.Endpoint{}, health(1), ratelimit.Bucket{}, 0, 10},
		{"InFlightTakeTheirPlaces", &herald.Endpoint{MaxInFlight: 3}, health(1), ratelimit.Bucket{}, 2, 1},
		{"FullCapGivesNothing", &herald.Endpoint{MaxInFlight: 3}, health(1), ratelimit.Bucket{}, 3, 0},
		{"OverCapGivesNothing", &herald.Endpoint{MaxInFlight: 3}, health(1), ratelimit.Bucket{}, 7, 0},
		{"ThrottledCap", &herald.Endpoint{}, health(0.5), ratelimit.Bucket{}, 0, 5},
		{"PausedGivesNothing", &herald.Endpoint{}, paused, ratelimit.Bucket{}, 0, 0},
		{"PauseEndsAtItsTime", &herald.Endpoint{}, pausedUntilNow, ratelimit.Bucket{}, 0, 10},
		{"FIFOOneAtATime", &herald.Endpoint{Ordering: herald.OrderingFIFO}, health(1), ratelimit.Bucket{}, 0, 1},
		{"FIFOHeadInFlight", &herald.Endpoint{Ordering: herald.OrderingFIFO}, health(1), ratelimit.Bucket{}, 1, 0},
		{"FullBucketGivesBurst", limited(2, 4), health(1), ratelimit.Bucket{}, 0, 4},
		{"BucketBelowCap", limited(2, 20), health(1), ratelimit.Bucket{Tokens: 2.5, At: t0}, 0, 2},
		{"CapBelowBucket", &herald.Endpoint{MaxInFlight: 2, RateLimit: &herald.RateLimit{PerSecond: 2, Burst: 20}}, health(1), ratelimit.Bucket{Tokens: 9, At: t0}, 0, 2},
		{"EmptyBucketGivesNothing", limited(2, 4), health(1), ratelimit.Bucket{Tokens: 0.9, At: t0}, 0, 0},
		{"RoundingDoesNotLoseAToken", limited(2, 4), health(1), ratelimit.Bucket{Tokens: 1 - 1e-12, At: t0}, 0, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tc.want, ratelimit.Allowance(tc.ep, tc.h, tc.b, tc.inFlight, t0))
		})
	}
}

func TestTake(t *testing.T) {
	t.Parallel()
	ep := limited(2, 4)
	h := health(1)
	b := ratelimit.Take(ep, h, ratelimit.Bucket{}, 3, t0)
	require.Equal(t, ratelimit.Bucket{Tokens: 1, At: t0}, b, "a full bucket of 4, less 3")
	b = ratelimit.Take(ep, h, b, 5, t0)
	require.Equal(t, ratelimit.Bucket{Tokens: 0, At: t0}, b, "never below empty")

	// Without a rate limit there is nothing to spend.
	b = ratelimit.Take(&herald.Endpoint{}, h, ratelimit.Bucket{}, 3, t0)
	require.Equal(t, ratelimit.Bucket{At: t0}, b)
}

// TestBucketOverTime follows one endpoint limited to 2 per second with a
// burst of 2 through a run of claims.
func TestBucketOverTime(t *testing.T) {
	t.Parallel()
	ep := limited(2, 2)
	ep.MaxInFlight = 100
	h := health(1)
	var b ratelimit.Bucket
	steps := []struct {
		at   time.Duration
		want int
	}{
		{0, 2},
		{0, 0},
		{500 * time.Millisecond, 1},
		{500 * time.Millisecond, 0},
		{750 * time.Millisecond, 0}, // half a token
		{time.Second, 1},
		{time.Hour, 2}, // no more than the burst
	}
	for _, st := range steps {
		now := t0.Add(st.at)
		n := ratelimit.Allowance(ep, h, b, 0, now)
		require.Equal(t, st.want, n, "at %s", st.at)
		b = ratelimit.Take(ep, h, b, n, now)
	}
}

func TestSpend(t *testing.T) {
	t.Parallel()
	r := ratelimit.Rate{PerSecond: 50, Burst: 100}
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	cases := []struct {
		name     string
		rate     ratelimit.Rate
		b        ratelimit.Bucket
		now      time.Time
		ok       bool
		wait     time.Duration
		leftOver float64
	}{
		{"ZeroBucketIsFull", r, ratelimit.Bucket{}, at(0), true, 0, 99},
		{"LastToken", r, ratelimit.Bucket{Tokens: 1, At: at(0)}, at(0), true, 0, 0},
		{"EmptyWaitsForOneToken", r, ratelimit.Bucket{Tokens: 0, At: at(0)}, at(0), false, 20 * time.Millisecond, 0},
		{"HalfATokenWaitsForTheRest", r, ratelimit.Bucket{Tokens: 0, At: at(0)}, at(10 * time.Millisecond), false, 10 * time.Millisecond, 0.5},
		{"RefillsAtTheRate", r, ratelimit.Bucket{Tokens: 0, At: at(0)}, at(time.Second), true, 0, 49},
		{"RefillStopsAtTheBurst", r, ratelimit.Bucket{Tokens: 0, At: at(0)}, at(time.Hour), true, 0, 99},
		{"ClockBehindNeverRefillsBackwards", r, ratelimit.Bucket{Tokens: 0, At: at(time.Second)}, at(0), false, 20 * time.Millisecond, 0},
		{"NoRateNoLimit", ratelimit.Rate{}, ratelimit.Bucket{Tokens: 0, At: at(0)}, at(0), true, 0, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			b, wait, ok := ratelimit.Spend(c.rate, c.b, c.now)
			require.Equal(t, c.ok, ok)
			require.InDelta(t, c.wait, wait, float64(time.Microsecond))
			require.InDelta(t, c.leftOver, b.Tokens, 1e-9)
		})
	}

	// A burst of 100 at once, then 50 a second.
	var b ratelimit.Bucket
	for i := range 100 {
		var ok bool
		b, _, ok = ratelimit.Spend(r, b, t0)
		require.True(t, ok, "request %d of the burst", i)
	}
	_, wait, ok := ratelimit.Spend(r, b, t0)
	require.False(t, ok)
	require.Equal(t, 20*time.Millisecond, wait)
	require.False(t, ratelimit.Full(r, b, t0.Add(time.Second)))
	require.True(t, ratelimit.Full(r, b, t0.Add(2*time.Second)))
}

func TestTakeUpTo(t *testing.T) {
	t.Parallel()
	r := ratelimit.Rate{PerSecond: 50, Burst: 100}
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	cases := []struct {
		name     string
		rate     ratelimit.Rate
		b        ratelimit.Bucket
		want     int
		now      time.Time
		got      int
		wait     time.Duration
		leftOver float64
	}{
		{"ZeroBucketIsFull", r, ratelimit.Bucket{}, 10, at(0), 10, 0, 90},
		{"WhatIsLeftWhenLessThanWanted", r, ratelimit.Bucket{Tokens: 3.5, At: at(0)}, 10, at(0), 3, 0, 0.5},
		{"EmptyWaitsForAllThatIsWanted", r, ratelimit.Bucket{Tokens: 0, At: at(0)}, 10, at(0), 0, 200 * time.Millisecond, 0},
		{"WaitsForNoMoreThanTheBurst", ratelimit.Rate{PerSecond: 1, Burst: 2}, ratelimit.Bucket{Tokens: 0.5, At: at(0)}, 10, at(0), 0, 1500 * time.Millisecond, 0.5},
		{"RefillsAtTheRate", r, ratelimit.Bucket{Tokens: 0, At: at(0)}, 10, at(100 * time.Millisecond), 5, 0, 0},
		{"NoMoreThanTheBurst", r, ratelimit.Bucket{Tokens: 0, At: at(0)}, 500, at(time.Hour), 100, 0, 0},
		{"AtLeastOneIsAskedFor", r, ratelimit.Bucket{}, 0, at(0), 1, 0, 99},
		{"NoRateGrantsAll", ratelimit.Rate{}, ratelimit.Bucket{Tokens: 0, At: at(0)}, 10, at(0), 10, 0, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			b, got, wait := ratelimit.TakeUpTo(c.rate, c.b, c.want, c.now)
			require.Equal(t, c.got, got)
			require.Equal(t, c.wait, wait)
			require.InDelta(t, c.leftOver, b.Tokens, 1e-9)
			require.Equal(t, c.now, b.At)
		})
	}
}

func TestLotSizeAndFullAt(t *testing.T) {
	t.Parallel()
	require.Equal(t, 10, ratelimit.LotSize(ratelimit.Rate{PerSecond: 50, Burst: 100}), "a tenth of the burst")
	require.Equal(t, 2, ratelimit.LotSize(ratelimit.Rate{PerSecond: 5, Burst: 11}), "rounded up")
	require.Equal(t, 1, ratelimit.LotSize(ratelimit.Rate{PerSecond: 1.0 / 60, Burst: 2}), "at least one")

	r := ratelimit.Rate{PerSecond: 50, Burst: 100}
	require.Equal(t, t0.Add(2*time.Second), ratelimit.FullAt(r, ratelimit.Bucket{Tokens: 0, At: t0}))
	require.Equal(t, t0.Add(time.Second), ratelimit.FullAt(r, ratelimit.Bucket{Tokens: 50, At: t0}))
	require.Equal(t, t0, ratelimit.FullAt(r, ratelimit.Bucket{Tokens: 100, At: t0}))
	require.True(t, ratelimit.Full(r, ratelimit.Bucket{Tokens: 50, At: t0}, ratelimit.FullAt(r, ratelimit.Bucket{Tokens: 50, At: t0})))
}
