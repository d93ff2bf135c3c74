package verify

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// testClock is a time that only moves when the test says so.
type testClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *testClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func setupDeduper(maxEntries int, ttl time.Duration) (*MemoryDeduper, *testClock) {
	clk := &testClock{now: time.Unix(testTimestamp, 0)}
	return &MemoryDeduper{MaxEntries: maxEntries, TTL: ttl, Now: clk.Now}, clk
}

func TestMemoryDeduper(t *testing.T) {
	t.Parallel()

	t.Run("RemembersMarkedIDs", func(t *testing.T) {
		t.Parallel()
		d, _ := setupDeduper(0, 0)
		seen, err := d.Seen(t.Context(), "a")
		require.NoError(t, err)
		require.False(t, seen)
		require.NoError(t, d.MarkSeen(t.Context(), "a"))
		seen, err = d.Seen(t.Context(), "a")
		require.NoError(t, err)
		require.True(t, seen)
		seen, err = d.Seen(t.Context(), "b")
		require.NoError(t, err)
		require.False(t, seen)
	})

	t.Run("ForgetsAfterTTL", func(t *testing.T) {
		t.Parallel()
		d, clk := setupDeduper(0, time.Hour)
		require.NoError(t, d.MarkSeen(t.Context(), "a"))
		clk.Advance(30 * time.Minute)
		require.NoError(t, d.MarkSeen(t.Context(), "b"))
		clk.Advance(30*time.Minute - time.Nanosecond)
		seen, _ := d.Seen(t.Context(), "a")
		require.True(t, seen, "just before its TTL")
		clk.Advance(time.Nanosecond)
		seen, _ = d.Seen(t.Context(), "a")
		require.False(t, seen, "at its TTL")
		seen, _ = d.Seen(t.Context(), "b")
		require.True(t, seen)
		require.Equal(t, 1, d.Len())
	})

	t.Run("DefaultTTLOutlastsDefaultRetrySchedule", func(t *testing.T) {
		t.Parallel()
		d, clk := setupDeduper(0, 0)
		require.NoError(t, d.MarkSeen(t.Context(), "a"))
		clk.Advance(36 * time.Hour)
		seen, _ := d.Seen(t.Context(), "a")
		require.True(t, seen)
		clk.Advance(DefaultDedupeTTL - 36*time.Hour)
		seen, _ = d.Seen(t.Context(), "a")
		require.False(t, seen)
	})

	t.Run("EvictsOldestBeyondMaxEntries", func(t *testing.T) {
		t.Parallel()
		d, clk := setupDeduper(3, 0)
		for i := range 5 {
			require.NoError(t, d.MarkSeen(t.Context(), fmt.Sprint("id", i)))
			clk.Advance(time.Second)
		}
		require.Equal(t, 3, d.Len())
		for i, want := range []bool{false, false, true, true, true} {
			seen, err := d.Seen(t.Context(), fmt.Sprint("id", i))
			require.NoError(t, err)
			require.Equal(t, want, seen, "id%d", i)
		}
	})

	t.Run("MarkingAgainRefreshes", func(t *testing.T) {
		t.Parallel()
		d, clk := setupDeduper(2, time.Hour)
		require.NoError(t, d.MarkSeen(t.Context(), "a"))
		require.NoError(t, d.MarkSeen(t.Context(), "b"))
		clk.Advance(50 * time.Minute)
		require.NoError(t, d.MarkSeen(t.Context(), "a"))
		// "b" is now the oldest, so a third id evicts it, not "a".
		require.NoError(t, d.MarkSeen(t.Context(), "c"))
		seen, _ := d.Seen(t.Context(), "b")
		require.False(t, seen)
		clk.Advance(30 * time.Minute)
		seen, _ = d.Seen(t.Context(), "a")
		require.True(t, seen, "its TTL restarted when marked again")
		require.Equal(t, 2, d.Len())
	})

	t.Run("ConcurrentUse", func(t *testing.T) {
		t.Parallel()
		d, _ := setupDeduper(50, 0)
		var wg sync.WaitGroup
		for g := range 8 {
			wg.Go(func() {
				for i := range 100 {
					id := fmt.Sprint(g, "-", i)
					_ = d.MarkSeen(t.Context(), id)
					_, _ = d.Seen(t.Context(), id)
				}
			})
		}
		wg.Wait()
		require.Equal(t, 50, d.Len())
	})
}
