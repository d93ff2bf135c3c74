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

func limitCases() []testCase {
	return []testCase{
		{"InFlightCapCountsUnexpiredLeases", testLimitInFlight},
		{"TokenBucketRefillsAtTheRate", testLimitBucket},
		{"ConcurrentClaimersNeverOverspendTheBucket", testLimitBucketConcurrent},
		{"RetryAfterPausesTheEndpoint", testLimitPause},
		{"ThrottledHalvesTheInFlightCap", testLimitThrottled},
	}
}

func testLimitInFlight(t *testing.T, s store.Store) {
	in := quietEndpoint("c")
	in.MaxInFlight = 3
	ep := createEndpoint(t, s, in, at(0)) // leases of 27 s
	ids := ingestN(t, s, at(0), ep, 10)

	first := claimN(t, s, at(0), 10, 3)
	requireNoneDue(t, s, at(0))
	for _, id := range ids {
		d := getDelivery(t, s, id)
		require.Zero(t, d.AttemptCount, "waiting for room spends no attempt")
	}

	// Completing one frees one place.
	finish(t, s, at(time.Second), first[0], herald.StatusDelivered)
	claimN(t, s, at(time.Second), 10, 1) // its lease runs to 28 s
	requireNoneDue(t, s, at(time.Second))

	// Expired leases hold no place: at 27 s two of the first claim's are
	// lost, and the one claimed at 1 s still counts.
	requireNoneDue(t, s, first[1].LeaseExpiresAt.Add(-time.Microsecond))
	claimN(t, s, first[1].LeaseExpiresAt, 10, 2)
	requireNoneDue(t, s, first[1].LeaseExpiresAt)
}

func testLimitBucket(t *testing.T, s store.Store) {
	in := quietEndpoint("c")
	in.RateLimit = &herald.RateLimit{PerSecond: 2, Burst: 2}
	ep := createEndpoint(t, s, in, at(0))
	ingestN(t, s, at(0), ep, 10)

	start := at(time.Second)
	claimN(t, s, start, 10, 2)
	requireNoneDue(t, s, start)
	claimN(t, s, start.Add(500*time.Millisecond), 10, 1)
	requireNoneDue(t, s, start.Add(500*time.Millisecond))
	// A second and a half later the bucket is full again, and no fuller.
	claimN(t, s, start.Add(2*time.Second), 10, 2)
}

func testLimitBucketConcurrent(t *testing.T, s store.Store) {
	in := quietEndpoint("c")
	in.MaxInFlight = 100
	in.RateLimit = &herald.RateLimit{PerSecond: 0.001, Burst: 5}
	ep := createEndpoint(t, s, in, at(0))
	ingestN(t, s, at(0), ep, 50)

	const workers = 2
	now := at(time.Second)
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		total int
		errs  []error
		start = make(chan struct{})
	)
	for range workers {
		wg.Go(func() {
			<-start
			for range 10 {
				got, err := s.DeliveryClaim(t.Context(), &store.DeliveryClaimParams{Limit: 3, LeaseMargin: leaseMargin, Now: now})
				mu.Lock()
				if err != nil {
					errs = append(errs, fmt.Errorf("claim: %w", err))
				}
				total += len(got)
				mu.Unlock()
			}
		})
	}
	close(start)
	wg.Wait()
	require.Empty(t, errs)
	require.LessOrEqual(t, total, 5, "the bucket holds five")
	// Whatever a claimer skipped while the other held the endpoint is
	// there for the next claim, and no more.
	total += len(claim(t, s, now, 10))
	require.Equal(t, 5, total)
}

func testLimitPause(t *testing.T, s store.Store) {
	ep := createEndpoint(t, s, quietEndpoint("c"), at(0))
	ids := ingestN(t, s, at(0), ep, 3)
	c := claimN(t, s, at(0), 1, 1)[0]

	// A 503 asking for 30 s: the retry is due at once, the others were
	// due already, but the whole endpoint waits.
	o := outcome(c, herald.StatusPending, at(time.Second))
	o.RetryIn = 0
	o.PauseFor = 30 * time.Second
	require.Equal(t, []bool{true}, complete(t, s, at(time.Second), o))
	h := healthOf(t, s, ep.ID, at(time.Second))
	requireTimePtr(t, at(31*time.Second), h.PausedUntil)
	require.Equal(t, herald.BreakerClosed, h.BreakerState)

	requireNoneDue(t, s, at(2*time.Second))
	requireNoneDue(t, s, at(31*time.Second-time.Microsecond))
	for _, id := range ids {
		requireStatus(t, s, id, herald.StatusPending)
	}
	claimN(t, s, at(31*time.Second), 10, 3)
}

func testLimitThrottled(t *testing.T, s store.Store) {
	ep := createEndpoint(t, s, quietEndpoint("c"), at(0)) // max_in_flight 10
	ingestN(t, s, at(0), ep, 1)
	c := claimN(t, s, at(0), 10, 1)[0]

	// A 429 without Retry-After: half speed.
	o := outcome(c, herald.StatusPending, at(time.Second))
	o.Attempt.StatusCode = 429
	o.Attempt.Error = "HTTP 429"
	o.RetryIn = time.Hour
	o.Throttled = true
	require.Equal(t, []bool{true}, complete(t, s, at(time.Second), o))
	require.Equal(t, 0.5, healthOf(t, s, ep.ID, at(time.Second)).RateFactor)

	ingestN(t, s, at(2*time.Second), ep, 20)
	claimN(t, s, at(2*time.Second), 20, 5)
	requireNoneDue(t, s, at(2*time.Second))
}
