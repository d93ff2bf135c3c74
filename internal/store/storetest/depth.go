package storetest

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhooks/herald"
	"github.com/heraldhooks/herald/internal/store"
)

func depthCases() []testCase {
	return []testCase{
		{"SampleKeepsTheQueueOfItsMinute", testDepthSample},
		{"OneSampleAMinute", testDepthOnce},
		{"NodesSamplingAtOnceWriteOne", testDepthConcurrent},
		{"StepsKeepTheHighest", testDepthSteps},
		{"PurgeKeepsADayAndAnHour", testDepthPurge},
		{"SeriesMustBeWholeSteps", testDepthBadSeries},
	}
}

// depthSeries reads the depth of window in steps at now.
func depthSeries(t *testing.T, s store.Store, now time.Time, window, step time.Duration) []store.DepthPoint {
	t.Helper()
	got, err := s.DepthSeries(t.Context(), &store.DepthSeriesParams{Window: window, Step: step, Now: now})
	require.NoError(t, err)
	require.Len(t, got, int(window/step))
	for i := 1; i < len(got); i++ {
		require.Equal(t, step, got[i].At.Sub(got[i-1].At), "points %d apart", i)
	}
	return got
}

// sampleDepth samples at now and says whether it wrote.
func sampleDepth(t *testing.T, s store.Store, now time.Time) bool {
	t.Helper()
	wrote, err := s.DepthSample(t.Context(), &store.DepthSampleParams{Now: now})
	require.NoError(t, err)
	return wrote
}

// sampled counts the points with a sample.
func sampled(points []store.DepthPoint) int {
	n := 0
	for _, p := range points {
		if p.Sampled {
			n++
		}
	}
	return n
}

// testDepthSample: a sample keeps what Stats with QueueOnly measures at
// its time (every consumer's due deliveries, how long the oldest waited,
// the dead ones) as its minute's point; the minute under way is left out
// of the series until it is over, and minutes without a sample are
// unknown, not zero.
func testDepthSample(t *testing.T, s store.Store) {
	ep := createEndpoint(t, s, newEndpoint("c"), at(0))
	other := createEndpoint(t, s, newEndpoint("d"), at(0))
	ingestFor(t, s, at(0), ep)
	ingestFor(t, s, at(5*time.Second), other)
	gone := createEndpoint(t, s, newEndpoint("e"), at(0))
	ingestFor(t, s, at(0), gone)
	disableEndpoint(t, s, gone.ID, at(time.Second)) // its delivery goes dead

	minute := Base.Truncate(time.Minute)
	require.True(t, sampleDepth(t, s, at(30*time.Second)))
	require.Zero(t, sampled(depthSeries(t, s, at(40*time.Second), time.Hour, time.Minute)), "the minute under way is not in the series")

	points := depthSeries(t, s, minute.Add(time.Minute), time.Hour, time.Minute)
	last := points[59]
	require.Equal(t, minute, last.At, "the last point is the last whole minute")
	require.True(t, last.Sampled)
	require.Equal(t, store.Depth{DueNow: 2, OldestDueAge: 30 * time.Second, Dead: 1}, last.Depth)
	require.Equal(t, 1, sampled(points), "no other minute has a sample")
	require.Equal(t, store.Depth{}, points[58].Depth)

	st, err := s.Stats(t.Context(), &store.StatsParams{QueueOnly: true, Now: at(30 * time.Second)})
	require.NoError(t, err)
	require.Equal(t, store.DepthOf(st), last.Depth, "the figures of GET /v1/stats?counts=false")

	// A minute falls out of an hour's window once the hour has passed.
	require.Equal(t, 1, sampled(depthSeries(t, s, minute.Add(time.Hour), time.Hour, time.Minute)))
	require.Zero(t, sampled(depthSeries(t, s, minute.Add(time.Hour+time.Minute), time.Hour, time.Minute)))
}

// testDepthOnce: a minute's sample is written once; a later sample of the
// same minute writes nothing, however the queue changed, and the next
// minute gets its own.
func testDepthOnce(t *testing.T, s store.Store) {
	ep := createEndpoint(t, s, newEndpoint("c"), at(0))
	ingestFor(t, s, at(0), ep)
	minute := Base.Truncate(time.Minute)
	require.True(t, sampleDepth(t, s, at(10*time.Second)))
	ingestFor(t, s, at(15*time.Second), ep)
	require.False(t, sampleDepth(t, s, at(20*time.Second)), "the minute has its sample")
	require.True(t, sampleDepth(t, s, minute.Add(time.Minute)), "the next minute")

	points := depthSeries(t, s, minute.Add(2*time.Minute), time.Hour, time.Minute)
	require.Equal(t, store.Depth{DueNow: 1, OldestDueAge: 10 * time.Second}, points[58].Depth, "the first sample stays")
	require.Equal(t, store.Depth{DueNow: 2, OldestDueAge: time.Minute - 5*time.Second}, points[59].Depth)
}

// testDepthConcurrent: samples of one minute taken at once (nodes whose
// timers fire together) write one row between them.
func testDepthConcurrent(t *testing.T, s store.Store) {
	ep := createEndpoint(t, s, newEndpoint("c"), at(0))
	ingestFor(t, s, at(0), ep)
	const nodes = 8
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		wrote int
		errs  []error
	)
	for range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ok, err := s.DepthSample(t.Context(), &store.DepthSampleParams{Now: at(20 * time.Second)})
			mu.Lock()
			defer mu.Unlock()
			if ok {
				wrote++
			}
			if err != nil {
				errs = append(errs, err)
			}
		}()
	}
	wg.Wait()
	require.Empty(t, errs)
	require.Equal(t, 1, wrote, "one sample a minute")
	points := depthSeries(t, s, at(time.Minute), time.Hour, time.Minute)
	require.Equal(t, 1, sampled(points))
	require.Equal(t, store.Depth{DueNow: 1, OldestDueAge: 20 * time.Second}, points[59].Depth)
}

// testDepthSteps: a day in 15-minute steps keeps, of each figure, the
// highest of the step's samples (a level, not a sum), each figure on its
// own; a step without a sample is unknown.
func testDepthSteps(t *testing.T, s store.Store) {
	ep := createEndpoint(t, s, newEndpoint("c"), at(0))
	gone := createEndpoint(t, s, newEndpoint("g"), at(0))
	m0 := Base.Truncate(time.Minute)
	// Minute 0: three due.
	for range 3 {
		ingestFor(t, s, m0.Add(10*time.Second), ep)
	}
	require.True(t, sampleDepth(t, s, m0.Add(20*time.Second)))
	// Minute 3: two delivered at minute 1, one retrying since 1m30s.
	var outcomes []store.DeliveryOutcome
	for _, c := range claimAll(t, s, m0.Add(time.Minute)) {
		status := herald.StatusDelivered
		if len(outcomes) == 2 {
			status = herald.StatusPending // due again in 30 s
		}
		outcomes = append(outcomes, outcome(c, status, m0.Add(time.Minute)))
	}
	require.Len(t, outcomes, 3)
	complete(t, s, m0.Add(time.Minute), outcomes...)
	require.True(t, sampleDepth(t, s, m0.Add(3*time.Minute)))
	// Minute 5: that one delivered, and one dead.
	for _, c := range claimAll(t, s, m0.Add(4*time.Minute)) {
		finish(t, s, m0.Add(4*time.Minute), c, herald.StatusDelivered)
	}
	ingestFor(t, s, m0.Add(4*time.Minute), gone)
	disableEndpoint(t, s, gone.ID, m0.Add(4*time.Minute))
	require.True(t, sampleDepth(t, s, m0.Add(5*time.Minute)))
	// Minute 40: the dead one still.
	require.True(t, sampleDepth(t, s, m0.Add(40*time.Minute)))

	hour := depthSeries(t, s, m0.Add(time.Hour), time.Hour, time.Minute)
	require.Equal(t, store.Depth{DueNow: 3, OldestDueAge: 10 * time.Second}, hour[0].Depth)
	require.False(t, hour[1].Sampled)
	require.Equal(t, store.Depth{DueNow: 1, OldestDueAge: 90 * time.Second}, hour[3].Depth)
	require.Equal(t, store.Depth{Dead: 1}, hour[5].Depth)

	day := depthSeries(t, s, m0.Add(24*time.Hour), 24*time.Hour, 15*time.Minute)
	require.Equal(t, m0, day[0].At)
	require.True(t, day[0].Sampled)
	require.Equal(t, store.Depth{DueNow: 3, OldestDueAge: 90 * time.Second, Dead: 1}, day[0].Depth,
		"each figure's highest of minutes 0, 3 and 5")
	require.False(t, day[1].Sampled, "no sample from minute 15 to 30")
	require.True(t, day[2].Sampled)
	require.Equal(t, store.Depth{Dead: 1}, day[2].Depth)
	require.Equal(t, 2, sampled(day))
}

// testDepthPurge: the purge deletes samples older than the kept span
// (never less than 25 h), oldest first, a batch at a time.
func testDepthPurge(t *testing.T, s store.Store) {
	minute := Base.Truncate(time.Minute)
	for _, after := range []time.Duration{0, time.Hour, 2 * time.Hour} {
		require.True(t, sampleDepth(t, s, minute.Add(after)))
	}
	purge := func(now time.Time, keep time.Duration, limit int) int {
		n, err := s.DepthPurge(t.Context(), &store.DepthPurgeParams{Keep: keep, Limit: limit, Now: now})
		require.NoError(t, err)
		return n
	}
	now := minute.Add(25*time.Hour + 30*time.Second)
	require.Zero(t, purge(now, time.Hour, 10), "a keep under 25 h keeps 25 h")
	require.Equal(t, 3, sampled(depthSeries(t, s, minute.Add(2*time.Hour+time.Minute), 24*time.Hour, 15*time.Minute)))

	now = minute.Add(27*time.Hour + 30*time.Second)
	require.Equal(t, 1, purge(now, 25*time.Hour, 1), "the minutes before 2 h ago: the oldest first")
	require.Equal(t, 1, purge(now, 25*time.Hour, 1))
	require.Zero(t, purge(now, 25*time.Hour, 1))
	points := depthSeries(t, s, minute.Add(2*time.Hour+time.Minute), 24*time.Hour, 15*time.Minute)
	require.Equal(t, 1, sampled(points), "the minute at 2 h stays")
	require.True(t, sampleDepth(t, s, minute), "a purged minute can be sampled again")
}

// testDepthBadSeries: a window that is not whole steps of whole minutes is
// refused.
func testDepthBadSeries(t *testing.T, s store.Store) {
	for _, p := range []store.DepthSeriesParams{
		{Window: time.Hour, Step: 30 * time.Second},
		{Window: time.Hour, Step: 7 * time.Minute},
		{Window: time.Minute, Step: time.Hour},
		{Window: time.Hour},
	} {
		_, err := s.DepthSeries(t.Context(), &p)
		require.Error(t, err, "%+v", p)
	}
}
