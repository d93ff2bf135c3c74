package bench

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhooks/herald/verify"
)

func TestTally(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

	t.Run("CountsEveryDeliveryOnceWithItsLatency", func(t *testing.T) {
		t.Parallel()
		tl := NewTally(10)
		for i := range 10 {
			id := fmt.Sprintf("evt_%02d#0", i)
			tl.Accepted(id, at(i))
			tl.Arrived(id, at(i+i+1)) // latency i+1 ms
		}
		c := tl.Report()
		require.Equal(t, int64(10), c.Expected)
		require.Equal(t, int64(10), c.Delivered)
		require.Zero(t, c.Missing)
		require.Zero(t, c.Duplicated)
		require.Zero(t, c.Unexpected)
		require.Equal(t, 10, c.Latency.Samples)
		require.Equal(t, 5*time.Millisecond, c.Latency.P50)
		require.Equal(t, 9*time.Millisecond, c.Latency.P90)
		require.Equal(t, 10*time.Millisecond, c.Latency.P99)
		require.Equal(t, 10*time.Millisecond, c.Latency.Max)
		requireTime(t, at(0), c.FirstAccept)
		requireTime(t, at(1), c.FirstArrival)
		requireTime(t, at(19), c.LastArrival)
	})

	t.Run("FindsAPlantedDuplicate", func(t *testing.T) {
		t.Parallel()
		tl := NewTally(3)
		for _, id := range []string{"evt_a#0", "evt_b#0", "evt_c#0"} {
			tl.Accepted(id, at(0))
			tl.Arrived(id, at(5))
		}
		tl.Arrived("evt_b#0", at(50))
		tl.Arrived("evt_b#0", at(60))
		c := tl.Report()
		require.Equal(t, int64(3), c.Delivered)
		require.Equal(t, int64(1), c.Duplicated)
		require.Equal(t, int64(2), c.Repeats)
		require.Zero(t, c.Missing)
		require.Equal(t, 5*time.Millisecond, c.Latency.Max, "latency is to the first arrival")
		requireTime(t, at(5), c.LastArrival) // a repeat does not extend the delivery window
	})

	t.Run("FindsAPlantedMissingDelivery", func(t *testing.T) {
		t.Parallel()
		tl := NewTally(3)
		for _, id := range []string{"evt_a#0", "evt_a#1", "evt_b#0"} {
			tl.Accepted(id, at(0))
		}
		tl.Arrived("evt_a#0", at(3))
		tl.Arrived("evt_b#0", at(4))
		c := tl.Report()
		require.Equal(t, int64(3), c.Expected)
		require.Equal(t, int64(2), c.Delivered)
		require.Equal(t, int64(1), c.Missing)
		require.Equal(t, []string{"evt_a#1"}, c.MissingSample)
		require.Zero(t, c.Duplicated)
		require.Equal(t, 2, c.Latency.Samples)
		accepted, arrived, arrivals := tl.Progress()
		require.Equal(t, [3]int64{3, 2, 2}, [3]int64{accepted, arrived, arrivals})
	})

	t.Run("ArrivalBeforeAcceptCountsWithZeroLatency", func(t *testing.T) {
		t.Parallel()
		tl := NewTally(1)
		tl.Arrived("evt_fast#0", at(2))
		_, arrived, _ := tl.Progress()
		require.Zero(t, arrived, "not accepted yet")
		tl.Accepted("evt_fast#0", at(3))
		accepted, arrived, _ := tl.Progress()
		require.Equal(t, int64(1), accepted)
		require.Equal(t, int64(1), arrived)
		c := tl.Report()
		require.Equal(t, int64(1), c.Delivered)
		require.Equal(t, int64(1), c.ArrivedBeforeAccept)
		require.Zero(t, c.Unexpected)
		require.Zero(t, c.Latency.Max)
	})

	t.Run("ArrivalNeverAcceptedIsUnexpected", func(t *testing.T) {
		t.Parallel()
		tl := NewTally(1)
		tl.Accepted("evt_a#0", at(0))
		tl.Arrived("evt_a#0", at(1))
		tl.Arrived("evt_stray#0", at(1))
		c := tl.Report()
		require.Equal(t, int64(1), c.Expected)
		require.Equal(t, int64(1), c.Delivered)
		require.Equal(t, int64(1), c.Unexpected)
	})

	t.Run("LongIdsAreKeptExactly", func(t *testing.T) {
		t.Parallel()
		tl := NewTally(2)
		long := strings.Repeat("x", keySize) + "#1"
		tl.Accepted(long, at(0))
		tl.Accepted(long[:keySize-1], at(0)) // the longest id kept inline
		tl.arrivedBytes([]byte(long), at(7))
		c := tl.Report()
		require.Equal(t, int64(2), c.Expected)
		require.Equal(t, int64(1), c.Delivered)
		require.Equal(t, []string{long[:keySize-1]}, c.MissingSample)
		require.Equal(t, 7*time.Millisecond, c.Latency.Max)
	})

	t.Run("ConcurrentUse", func(t *testing.T) {
		t.Parallel()
		tl := NewTally(0)
		var wg sync.WaitGroup
		for w := range 8 {
			wg.Go(func() {
				for i := range 500 {
					id := fmt.Sprintf("evt_%d_%d#%d", w, i, i%3)
					tl.Accepted(id, at(i))
					tl.arrivedBytes([]byte(id), at(i+1))
				}
			})
		}
		wg.Wait()
		c := tl.Report()
		require.Equal(t, int64(4000), c.Expected)
		require.Equal(t, int64(4000), c.Delivered)
		require.Zero(t, c.Duplicated)
		require.Equal(t, time.Millisecond, c.Latency.P99)
	})

	t.Run("Empty", func(t *testing.T) {
		t.Parallel()
		c := NewTally(0).Report()
		require.Zero(t, c.Expected)
		require.True(t, c.FirstAccept.IsZero())
		require.True(t, c.LastArrival.IsZero())
		require.Zero(t, c.Latency)
	})
}

func requireTime(t *testing.T, want, got time.Time) {
	t.Helper()
	require.True(t, want.Equal(got), "want %s, got %s", want, got)
}

func TestPercentile(t *testing.T) {
	t.Parallel()
	ms := func(v ...int) []time.Duration {
		out := make([]time.Duration, len(v))
		for i, x := range v {
			out[i] = time.Duration(x) * time.Millisecond
		}
		return out
	}
	for _, tc := range []struct {
		name   string
		sorted []time.Duration
		p      float64
		want   time.Duration
	}{
		{"None", nil, 0.5, 0},
		{"One", ms(7), 0.99, 7 * time.Millisecond},
		{"MedianOfFour", ms(1, 2, 3, 4), 0.5, 2 * time.Millisecond},
		{"P90OfTen", ms(1, 2, 3, 4, 5, 6, 7, 8, 9, 10), 0.9, 9 * time.Millisecond},
		{"P99OfHundredIsTheNinetyNinth", ms(seq(100)...), 0.99, 99 * time.Millisecond},
		{"MaxIsTheLast", ms(1, 5, 9), 1, 9 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tc.want, Percentile(tc.sorted, tc.p))
		})
	}
}

func seq(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i + 1
	}
	return out
}

// TestSlowReceiver: with a delay, the receiver counts a delivery as
// arrived when it comes and answers the delay later; a sender that gives
// up first gets no answer, and the arrival still counts.
func TestSlowReceiver(t *testing.T) {
	t.Parallel()
	const delay = 150 * time.Millisecond
	tally := NewTally(4)
	r, err := startReceiver(tally, nil, delay)
	require.NoError(t, err)
	t.Cleanup(func() { r.close() })
	send := func(ctx context.Context, id string) (*http.Response, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.url(3), strings.NewReader("{}"))
		require.NoError(t, err)
		req.Header.Set(verify.HeaderStandardID, id)
		return http.DefaultClient.Do(req)
	}

	start := time.Now()
	res, err := send(t.Context(), "msg_1")
	require.NoError(t, err)
	res.Body.Close()
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.GreaterOrEqual(t, time.Since(start), delay, "answered before the delay")

	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
	defer cancel()
	_, err = send(ctx, "msg_2")
	require.ErrorIs(t, err, context.DeadlineExceeded, "a sender's timeout cuts the wait")
	// The receiver counts msg_2 as it reads its headers, which may be
	// after the sender gave up.
	require.Eventually(t, func() bool {
		_, _, arrivals := tally.Progress()
		return arrivals == 2
	}, 10*time.Second, 5*time.Millisecond, "both deliveries arrived")
}
