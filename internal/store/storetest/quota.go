package storetest

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/heraldhooks/herald/internal/store"
)

func quotaCases() []testCase {
	return []testCase{
		{"SlidingWindowPerConsumerAndKind", testQuotaWindow},
		{"ConcurrentTakesGrantNoMoreThanTheLimit", testQuotaConcurrent},
		{"ZeroNowUsesDatabaseClock", testQuotaDatabaseClock},
	}
}

func takeQuota(t *testing.T, s store.Store, consumer, kind string, limit int, window time.Duration, now time.Time) store.QuotaTaken {
	t.Helper()
	got, err := s.ConsumerQuotaTake(t.Context(), &store.ConsumerQuotaTakeParams{
		ConsumerID: consumer, Kind: kind, Limit: limit, Window: window, Now: now,
	})
	require.NoError(t, err)
	return got
}

// testQuotaWindow: 3 an hour are granted, the 4th is refused until the
// first leaves the window (a refusal spends nothing), whatever else the
// consumer does; another consumer and another kind count apart.
func testQuotaWindow(t *testing.T, s store.Store) {
	const mail = store.QuotaConfirmationMail
	for i, d := range []time.Duration{0, time.Minute, 2 * time.Minute} {
		got := takeQuota(t, s, "c", mail, 3, time.Hour, at(d))
		require.True(t, got.OK, "take %d", i)
		requireTime(t, at(d), got.Now)
	}
	for _, d := range []time.Duration{3 * time.Minute, 30 * time.Minute, time.Hour - time.Microsecond} {
		got := takeQuota(t, s, "c", mail, 3, time.Hour, at(d))
		require.False(t, got.OK, "the 4th within the hour, at %s", d)
		requireTime(t, at(time.Hour), got.RetryAt)
	}
	require.True(t, takeQuota(t, s, "other", mail, 3, time.Hour, at(3*time.Minute)).OK, "another consumer counts apart")
	require.True(t, takeQuota(t, s, "c", store.QuotaTestEvent, 3, time.Hour, at(3*time.Minute)).OK, "another kind counts apart")

	// The first leaves the window an hour after it: one more, and the
	// next waits for the second.
	require.True(t, takeQuota(t, s, "c", mail, 3, time.Hour, at(time.Hour)).OK)
	got := takeQuota(t, s, "c", mail, 3, time.Hour, at(time.Hour+time.Second))
	require.False(t, got.OK)
	requireTime(t, at(time.Hour+time.Minute), got.RetryAt)
}

// testQuotaConcurrent: 20 takes at once of a limit of 10 (nodes asking
// together) grant exactly 10.
func testQuotaConcurrent(t *testing.T, s store.Store) {
	const n, limit = 20, 10
	var wg sync.WaitGroup
	var granted atomic.Int64
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got, err := s.ConsumerQuotaTake(t.Context(), &store.ConsumerQuotaTakeParams{
				ConsumerID: "c", Kind: store.QuotaTestEvent, Limit: limit, Window: time.Minute, Now: at(time.Second),
			})
			if assert.NoError(t, err) && got.OK {
				granted.Add(1)
			}
		}()
	}
	wg.Wait()
	require.EqualValues(t, limit, granted.Load())
	require.False(t, takeQuota(t, s, "c", store.QuotaTestEvent, limit, time.Minute, at(2*time.Second)).OK)
}

// testQuotaDatabaseClock: with no Now, the take is timed by the database
// clock, and says so.
func testQuotaDatabaseClock(t *testing.T, s store.Store) {
	before := time.Now().Add(-time.Minute)
	got := takeQuota(t, s, "c", store.QuotaTestEvent, 1, time.Hour, time.Time{})
	require.True(t, got.OK)
	require.WithinDuration(t, time.Now(), got.Now, 2*time.Minute)
	got = takeQuota(t, s, "c", store.QuotaTestEvent, 1, time.Hour, time.Time{})
	require.False(t, got.OK)
	require.True(t, got.RetryAt.After(before.Add(time.Hour)), "an hour after the first: %s", got.RetryAt)
}
