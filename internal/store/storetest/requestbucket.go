package storetest

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/heraldhooks/herald/internal/ratelimit"
	"github.com/heraldhooks/herald/internal/store"
)

func requestBucketCases() []testCase {
	return []testCase{
		{"TakesUpToWantAndSaysWhenMore", testRequestBucketTake},
		{"ConcurrentTakersGetNoMoreThanRateTimesTimePlusBurst", testRequestBucketConcurrent},
		{"PurgeForgetsOnlyFullBuckets", testRequestBucketPurge},
	}
}

func takeTokens(t *testing.T, s store.Store, name string, r ratelimit.Rate, want int, now time.Time) store.RequestBucketTaken {
	t.Helper()
	got, err := s.RequestBucketTake(t.Context(), &store.RequestBucketTakeParams{Name: name, Rate: r, Want: want, Now: now})
	require.NoError(t, err)
	return got
}

// testRequestBucketTake: a bucket of 5 a second with a burst of 10 starts
// full, gives what it holds when asked for more, and, empty, says how
// long until what was asked for is there; it refills at the rate, and
// another bucket counts apart.
func testRequestBucketTake(t *testing.T, s store.Store) {
	r := ratelimit.Rate{PerSecond: 5, Burst: 10}
	require.Equal(t, store.RequestBucketTaken{Got: 4}, takeTokens(t, s, "key a", r, 4, at(0)))
	require.Equal(t, store.RequestBucketTaken{Got: 4}, takeTokens(t, s, "key a", r, 4, at(0)))
	require.Equal(t, store.RequestBucketTaken{Got: 2}, takeTokens(t, s, "key a", r, 4, at(0)), "what is left")
	require.Equal(t, store.RequestBucketTaken{Wait: 800 * time.Millisecond}, takeTokens(t, s, "key a", r, 4, at(0)),
		"4 tokens come back in 800 ms")
	require.Equal(t, store.RequestBucketTaken{Got: 4}, takeTokens(t, s, "session b", r, 4, at(0)), "another bucket is full")
	require.Equal(t, store.RequestBucketTaken{Got: 2}, takeTokens(t, s, "key a", r, 4, at(400*time.Millisecond)))
	require.Equal(t, store.RequestBucketTaken{Got: 10}, takeTokens(t, s, "key a", r, 20, at(time.Hour)), "no more than the burst")

	// With no Now, the database clock: a new bucket is full.
	require.Equal(t, store.RequestBucketTaken{Got: 3}, takeTokens(t, s, "key c", r, 3, time.Time{}))
}

// testRequestBucketConcurrent: nodes taking lots of 3 at once from a
// bucket of 10 a second with a burst of 20, over ten steps of half a
// second, are granted no more than 20 + 10 × elapsed together, and, as
// they ask for more than that, exactly that.
func testRequestBucketConcurrent(t *testing.T, s store.Store) {
	r := ratelimit.Rate{PerSecond: 10, Burst: 20}
	var granted atomic.Int64
	for step := range 10 {
		elapsed := time.Duration(step) * 500 * time.Millisecond
		var wg sync.WaitGroup
		for range 16 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				got, err := s.RequestBucketTake(t.Context(), &store.RequestBucketTakeParams{
					Name: "key k", Rate: r, Want: 3, Now: at(elapsed),
				})
				if assert.NoError(t, err) {
					granted.Add(int64(got.Got))
				}
			}()
		}
		wg.Wait()
		limit := int64(20 + 10*elapsed.Seconds())
		require.Equal(t, limit, granted.Load(), "by %s", elapsed)
	}
}

// testRequestBucketPurge: a purge deletes the buckets that have refilled
// by its time and keeps the others; a purged bucket is full again.
func testRequestBucketPurge(t *testing.T, s store.Store) {
	r := ratelimit.Rate{PerSecond: 5, Burst: 10}
	purge := func(now time.Time) int {
		n, err := s.RequestBucketPurge(t.Context(), &store.RequestBucketPurgeParams{Now: now})
		require.NoError(t, err)
		return n
	}
	require.Equal(t, store.RequestBucketTaken{Got: 10}, takeTokens(t, s, "key a", r, 10, at(0)))
	require.Equal(t, store.RequestBucketTaken{Got: 1}, takeTokens(t, s, "key b", r, 1, at(0)))
	require.Zero(t, purge(at(100*time.Millisecond)), "neither has refilled")
	require.Equal(t, 1, purge(at(200*time.Millisecond)), "b has refilled its one token")
	require.Zero(t, purge(at(1700*time.Millisecond)), "a refills in 2 s")
	require.Equal(t, store.RequestBucketTaken{Got: 9}, takeTokens(t, s, "key a", r, 10, at(1800*time.Millisecond)),
		"a kept its row")
	require.Zero(t, purge(at(3700*time.Millisecond)))
	require.Equal(t, 1, purge(at(3800*time.Millisecond)))
	require.Equal(t, store.RequestBucketTaken{Got: 10}, takeTokens(t, s, "key a", r, 10, at(3800*time.Millisecond)))
	require.Equal(t, store.RequestBucketTaken{Got: 10}, takeTokens(t, s, "key b", r, 10, at(3800*time.Millisecond)))
	require.Zero(t, purge(at(3800*time.Millisecond)))
}
