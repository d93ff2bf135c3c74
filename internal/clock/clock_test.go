package clock_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhooks/herald/internal/clock"
)

func TestTestClock(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

	t.Run("FiresOnlyWhenAdvancedPastDeadline", func(t *testing.T) {
		t.Parallel()
		c := clock.NewTest(start)
		tm := c.NewTimer(30 * time.Second)
		require.Equal(t, 1, c.Waiters())
		c.Advance(29 * time.Second)
		select {
		case <-tm.C():
			t.Fatal("fired early")
		default:
		}
		c.Advance(time.Second)
		select {
		case got := <-tm.C():
			require.Equal(t, start.Add(30*time.Second), got)
		default:
			t.Fatal("did not fire")
		}
		require.Equal(t, 0, c.Waiters())
	})

	t.Run("StopPreventsFiring", func(t *testing.T) {
		t.Parallel()
		c := clock.NewTest(start)
		tm := c.NewTimer(time.Second)
		require.True(t, tm.Stop())
		require.False(t, tm.Stop())
		c.Advance(time.Hour)
		select {
		case <-tm.C():
			t.Fatal("stopped timer fired")
		default:
		}
	})

	t.Run("ZeroDurationFiresAtOnce", func(t *testing.T) {
		t.Parallel()
		c := clock.NewTest(start)
		select {
		case <-c.NewTimer(0).C():
		default:
			t.Fatal("zero timer did not fire")
		}
	})

	t.Run("StoreNowFollowsTestTime", func(t *testing.T) {
		t.Parallel()
		c := clock.NewTest(start)
		c.Set(start.Add(time.Hour))
		c.Set(start) // never backwards
		require.Equal(t, start.Add(time.Hour), c.StoreNow())
		require.True(t, clock.Real{}.StoreNow().IsZero(), "the real clock leaves time to the database")
	})
}
