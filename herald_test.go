package herald_test

import (
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhooks/herald"
)

func TestMatchEventType(t *testing.T) {
	t.Parallel()
	tests := []struct {
		pattern, typ string
		want         bool
	}{
		{"*", "order.created", true},
		{"*", "x", true},
		{"order.created", "order.created", true},
		{"order.created", "order.updated", false},
		{"order.*", "order.created", true},
		{"order.*", "order.line.added", true},
		{"order.*", "order", false},
		{"order.*", "orders.created", false},
		{"order.*", "invoice.created", false},
		{"herald.*", "herald.endpoint.disabled", true},
		{"*", "herald.endpoint.disabled", false}, // notifications are opt-in
		{"herald.delivery.dead", "herald.delivery.dead", true},
	}
	for _, tt := range tests {
		t.Run(tt.pattern+"~"+tt.typ, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tt.want, herald.MatchEventType(tt.pattern, tt.typ))
		})
	}
	require.True(t, herald.MatchAny([]string{"a.b", "order.*"}, "order.x"))
	require.False(t, herald.MatchAny([]string{"a.b"}, "order.x"))
	require.False(t, herald.MatchAny(nil, "order.x"))
}

func TestValidateEventType(t *testing.T) {
	t.Parallel()
	for _, ok := range []string{"a", "order.created", "A_b-c.9", strings.Repeat("x", 128)} {
		require.NoError(t, herald.ValidateEventType(ok), ok)
	}
	for _, bad := range []string{"", "order created", "ordér", "a/b", "a*", strings.Repeat("x", 129)} {
		err := herald.ValidateEventType(bad)
		require.Error(t, err, bad)
		require.Contains(t, err.Error(), "[a-zA-Z0-9_.-]{1,128}")
	}
}

func TestValidateEventTypePattern(t *testing.T) {
	t.Parallel()
	for _, ok := range []string{"*", "order.*", "order.created", "a.b.*"} {
		require.NoError(t, herald.ValidateEventTypePattern(ok), ok)
	}
	for _, bad := range []string{"", "order*", ".*", "*.created", "or der.*", "**"} {
		require.Error(t, herald.ValidateEventTypePattern(bad), bad)
	}
}

func TestNewID(t *testing.T) {
	t.Parallel()
	t.Run("ShapeAndUniqueness", func(t *testing.T) {
		t.Parallel()
		seen := map[string]bool{}
		now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
		for range 10000 {
			id := herald.NewID(herald.PrefixDelivery, now)
			require.True(t, strings.HasPrefix(id, "dlv_"))
			require.Len(t, id, len("dlv_")+26)
			require.False(t, seen[id], "duplicate id %s", id)
			seen[id] = true
		}
	})
	t.Run("SortsByTime", func(t *testing.T) {
		t.Parallel()
		base := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
		var ids []string
		for i := range 100 {
			ids = append(ids, herald.NewID(herald.PrefixEvent, base.Add(time.Duration(i)*time.Millisecond)))
		}
		require.True(t, sort.StringsAreSorted(ids))
	})
	t.Run("FirstIDBoundsItsMillisecond", func(t *testing.T) {
		t.Parallel()
		at := time.Date(2026, 1, 2, 3, 4, 5, 500_000, time.UTC) // half a millisecond in
		first := herald.FirstID(herald.PrefixEvent, at)
		require.Len(t, first, len("evt_")+26)
		for range 1000 {
			require.Less(t, herald.NewID(herald.PrefixEvent, at.Add(-time.Millisecond)), first)
			require.GreaterOrEqual(t, herald.NewID(herald.PrefixEvent, at.Truncate(time.Millisecond)), first)
			require.GreaterOrEqual(t, herald.NewID(herald.PrefixEvent, at), first)
		}
	})
}

func TestStatus(t *testing.T) {
	t.Parallel()
	require.True(t, herald.StatusDead.Terminal())
	require.True(t, herald.StatusDelivered.Terminal())
	require.True(t, herald.StatusCancelled.Terminal())
	require.False(t, herald.StatusPending.Terminal())
	require.False(t, herald.StatusDelivering.Terminal())
	require.True(t, herald.StatusPending.Valid())
	require.False(t, herald.Status("lost").Valid())
}

func TestFormatDuration(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		d    time.Duration
		want string
	}{
		{0, "0s"},
		{1500 * time.Millisecond, "1.5s"},
		{30 * time.Second, "30s"},
		{5 * time.Minute, "5m"},
		{90 * time.Minute, "1h30m"},
		{2 * time.Hour, "2h"},
		{time.Hour + time.Second, "1h0m1s"},
		{24 * time.Hour, "24h"},
	} {
		got := herald.FormatDuration(tc.d)
		require.Equal(t, tc.want, got)
		back, err := time.ParseDuration(got)
		require.NoError(t, err)
		require.Equal(t, tc.d, back)
	}
}

func TestHealthScore(t *testing.T) {
	t.Parallel()
	rate := func(r float64) *float64 { return &r }
	for _, tc := range []struct {
		name    string
		enabled bool
		h       herald.EndpointHealth
		score   int
		ok      bool
	}{
		{"EveryAttemptSucceeded", true, herald.EndpointHealth{BreakerState: herald.BreakerClosed, Attempts1h: 40, SuccessRate1h: rate(1)}, 100, true},
		{"ShareOfAttemptsRounded", true, herald.EndpointHealth{BreakerState: herald.BreakerClosed, Attempts1h: 3, SuccessRate1h: rate(2.0 / 3)}, 67, true},
		{"EveryAttemptFailed", true, herald.EndpointHealth{BreakerState: herald.BreakerClosed, Attempts1h: 5, SuccessRate1h: rate(0)}, 0, true},
		{"NoRecentAttemptNoScore", true, herald.EndpointHealth{BreakerState: herald.BreakerClosed}, 0, false},
		{"DisabledIsZero", false, herald.EndpointHealth{BreakerState: herald.BreakerClosed, Attempts1h: 10, SuccessRate1h: rate(1)}, 0, true},
		{"DisabledWithoutAttemptsIsZero", false, herald.EndpointHealth{BreakerState: herald.BreakerClosed}, 0, true},
		{"OpenBreakerIsZero", true, herald.EndpointHealth{BreakerState: herald.BreakerOpen, Attempts1h: 10, SuccessRate1h: rate(0.5)}, 0, true},
		{"OpenBreakerWithoutAttemptsIsZero", true, herald.EndpointHealth{BreakerState: herald.BreakerOpen}, 0, true},
		{"HalfOpenAtMostFifty", true, herald.EndpointHealth{BreakerState: herald.BreakerHalfOpen, Attempts1h: 10, SuccessRate1h: rate(0.9)}, 50, true},
		{"HalfOpenBelowFiftyStays", true, herald.EndpointHealth{BreakerState: herald.BreakerHalfOpen, Attempts1h: 10, SuccessRate1h: rate(0.2)}, 20, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			score, ok := herald.HealthScore(tc.enabled, tc.h)
			if score != tc.score || ok != tc.ok {
				t.Fatalf("HealthScore = %d, %v; want %d, %v", score, ok, tc.score, tc.ok)
			}
		})
	}
}
