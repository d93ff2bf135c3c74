package storetest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhooks/herald"
	"github.com/heraldhooks/herald/internal/store"
)

func activityCases() []testCase {
	return []testCase{
		{"OutcomesAreCountedInTheirMinute", testActivityCounts},
		{"StaleOutcomeCountsItsAttemptOnly", testActivityStale},
		{"StepsSumTheirMinutes", testActivitySteps},
		{"PurgeKeepsADayAndAnHour", testActivityPurge},
		{"SeriesMustBeWholeSteps", testActivityBadSeries},
	}
}

// series reads the activity of window in steps at now.
func series(t *testing.T, s store.Store, now time.Time, window, step time.Duration) []store.ActivityPoint {
	t.Helper()
	got, err := s.ActivitySeries(t.Context(), &store.ActivitySeriesParams{Window: window, Step: step, Now: now})
	require.NoError(t, err)
	require.Len(t, got, int(window/step))
	for i := 1; i < len(got); i++ {
		require.Equal(t, step, got[i].At.Sub(got[i-1].At), "points %d apart", i)
	}
	return got
}

// pointAt finds the point that starts at minute.
func pointAt(t *testing.T, points []store.ActivityPoint, minute time.Time) store.Activity {
	t.Helper()
	for _, p := range points {
		if p.At.Equal(minute) {
			return p.Activity
		}
	}
	t.Fatalf("no point at %s", minute)
	return store.Activity{}
}

// sumActivity adds every point of a series.
func sumActivity(points []store.ActivityPoint) store.Activity {
	var a store.Activity
	for i := range points {
		a.Add(&points[i].Activity)
	}
	return a
}

// testActivityCounts: each outcome write adds its attempts, their results,
// retries, deaths and latencies to the minute it was written in; the minute
// under way is left out until it is over.
func testActivityCounts(t *testing.T, s store.Store) {
	ep := createEndpoint(t, s, newEndpoint("c"), at(0))
	ids := []string{ingestFor(t, s, at(0), ep), ingestFor(t, s, at(0), ep), ingestFor(t, s, at(0), ep), ingestFor(t, s, at(0), ep)}
	leases := claimAll(t, s, at(0))
	require.Len(t, leases, 4)
	ok := outcome(leases[ids[0]], herald.StatusDelivered, at(10*time.Second))
	ok.Attempt.Duration = 3 * time.Millisecond
	slow := outcome(leases[ids[1]], herald.StatusDelivered, at(10*time.Second))
	slow.Attempt.Duration = 2 * time.Second
	retry := outcome(leases[ids[2]], herald.StatusPending, at(10*time.Second))
	dead := outcome(leases[ids[3]], herald.StatusDead, at(10*time.Second))
	require.Equal(t, []bool{true, true, true, true}, complete(t, s, at(10*time.Second), ok, slow, retry, dead))

	minute := Base.Truncate(time.Minute)
	want := store.Activity{Attempts: 4, Succeeded: 2, Failed: 2, Retries: 1, Exhausted: 1}
	want.Latency[store.LatencyBucket(3*time.Millisecond)] = 1
	want.Latency[store.LatencyBucket(2*time.Second)] = 1
	want.Latency[store.LatencyBucket(120*time.Millisecond)] = 2
	require.Equal(t, int64(1), want.Latency[1], "3 ms is in the bucket [2, 5) ms")

	// The minute under way is not in the series yet.
	require.Equal(t, store.Activity{}, sumActivity(series(t, s, at(20*time.Second), time.Hour, time.Minute)))
	points := series(t, s, minute.Add(time.Minute), time.Hour, time.Minute)
	require.Equal(t, minute, points[59].At, "the last point is the last whole minute")
	require.Equal(t, want, points[59].Activity)
	require.Equal(t, want, sumActivity(points))

	// A second write in the same minute adds to it; one in the next minute
	// goes to the next point.
	again := claimOne(t, s, at(45*time.Second), ids[2])
	finish(t, s, at(50*time.Second), again, herald.StatusDelivered)
	points = series(t, s, minute.Add(3*time.Minute), time.Hour, time.Minute)
	want.Attempts, want.Succeeded = 5, 3
	want.Latency[store.LatencyBucket(120*time.Millisecond)] = 3
	require.Equal(t, want, pointAt(t, points, minute), "50 s after Base is the same minute")

	// A minute falls out of an hour's window once the hour has passed.
	require.Equal(t, int64(5), sumActivity(series(t, s, minute.Add(time.Hour), time.Hour, time.Minute)).Attempts)
	require.Zero(t, sumActivity(series(t, s, minute.Add(time.Hour+time.Minute), time.Hour, time.Minute)).Attempts)

	p50, ok50 := want.LatencyQuantile(0.5)
	require.True(t, ok50)
	require.InDelta(t, 125, p50, 25, "p50 of 3 ms, 120 ms x3, 2 s lies in the bucket of 120 ms")
}

// testActivityStale: an outcome whose lease is gone still counts as an
// attempt made, but retried or sent dead nothing.
func testActivityStale(t *testing.T, s store.Store) {
	ep := createEndpoint(t, s, newEndpoint("c"), at(0))
	id := ingestFor(t, s, at(0), ep)
	first := claimOne(t, s, at(0), id)
	claimOne(t, s, first.LeaseExpiresAt.Add(time.Second), id) // the lease ran out and was taken again
	require.Equal(t, []bool{false}, complete(t, s, first.LeaseExpiresAt.Add(2*time.Second),
		outcome(first, herald.StatusDead, first.LeaseExpiresAt.Add(2*time.Second))))
	got := sumActivity(series(t, s, at(time.Hour), time.Hour, time.Minute))
	want := store.Activity{Attempts: 1, Failed: 1}
	want.Latency[store.LatencyBucket(120*time.Millisecond)] = 1
	require.Equal(t, want, got)
}

// testActivitySteps: a day in 15-minute steps sums each step's minutes.
func testActivitySteps(t *testing.T, s store.Store) {
	ep := createEndpoint(t, s, newEndpoint("c"), at(0))
	minute := Base.Truncate(time.Minute)
	for i, after := range []time.Duration{0, 5 * time.Minute, 40 * time.Minute, 20 * time.Hour} {
		now := minute.Add(after)
		id := ingestFor(t, s, now, ep)
		finish(t, s, now, claimOne(t, s, now, id), herald.StatusDelivered)
		_ = i
	}
	now := minute.Add(24 * time.Hour)
	points := series(t, s, now, 24*time.Hour, 15*time.Minute)
	require.Len(t, points, 96)
	require.Equal(t, now.Add(-24*time.Hour), points[0].At)
	var counts []int64
	for _, p := range points {
		counts = append(counts, p.Attempts)
	}
	require.Equal(t, int64(2), counts[0], "minutes 0 and 5 share the first step")
	require.Equal(t, int64(1), counts[2], "minute 40 is in the third step")
	require.Equal(t, int64(1), counts[80], "hour 20 is in step 80")
	require.Equal(t, int64(4), sumActivity(points).Succeeded)
}

// testActivityPurge: the purge deletes minutes older than the kept span
// (never less than 25 h), oldest first, a batch at a time.
func testActivityPurge(t *testing.T, s store.Store) {
	ep := createEndpoint(t, s, newEndpoint("c"), at(0))
	minute := Base.Truncate(time.Minute)
	for _, after := range []time.Duration{0, time.Hour, 2 * time.Hour} {
		now := minute.Add(after)
		id := ingestFor(t, s, now, ep)
		finish(t, s, now, claimOne(t, s, now, id), herald.StatusDelivered)
	}
	purge := func(now time.Time, keep time.Duration, limit int) int {
		n, err := s.ActivityPurge(t.Context(), &store.ActivityPurgeParams{Keep: keep, Limit: limit, Now: now})
		require.NoError(t, err)
		return n
	}
	now := minute.Add(25*time.Hour + 30*time.Second)
	require.Zero(t, purge(now, time.Hour, 10), "a keep under 25 h keeps 25 h")
	require.Equal(t, int64(3), sumActivity(series(t, s, minute.Add(2*time.Hour+time.Minute), 24*time.Hour, 15*time.Minute)).Attempts)

	now = minute.Add(27*time.Hour + 30*time.Second)
	require.Equal(t, 1, purge(now, 25*time.Hour, 1), "the minutes before 2 h ago: the oldest first")
	require.Equal(t, 1, purge(now, 25*time.Hour, 1))
	require.Zero(t, purge(now, 25*time.Hour, 1))
	got := sumActivity(series(t, s, minute.Add(2*time.Hour+time.Minute), 24*time.Hour, 15*time.Minute))
	require.Equal(t, int64(1), got.Attempts, "the minute at 2 h stays")
}

// testActivityBadSeries: a window that is not whole steps of whole
// minutes is refused.
func testActivityBadSeries(t *testing.T, s store.Store) {
	for _, p := range []store.ActivitySeriesParams{
		{Window: time.Hour, Step: 30 * time.Second},
		{Window: time.Hour, Step: 7 * time.Minute},
		{Window: time.Minute, Step: time.Hour},
		{Window: time.Hour},
	} {
		_, err := s.ActivitySeries(t.Context(), &p)
		require.Error(t, err, "%+v", p)
	}
}
