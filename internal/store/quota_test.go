package store_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhooks/herald/internal/store"
)

func TestQuotaSpend(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 3, 4, 5, 0, 0, 0, time.UTC)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	tests := []struct {
		name     string
		spent    []time.Time
		limit    int
		now      time.Time
		wantOK   bool
		wantKept []time.Time
		wantWait time.Time
	}{
		{"FirstIsGranted", nil, 3, at(0), true, []time.Time{at(0)}, time.Time{}},
		{"UnderTheLimit", []time.Time{at(0), at(time.Minute)}, 3, at(2 * time.Minute), true,
			[]time.Time{at(0), at(time.Minute), at(2 * time.Minute)}, time.Time{}},
		{"AtTheLimitWaitsForTheOldest", []time.Time{at(0), at(time.Minute), at(2 * time.Minute)}, 3, at(3 * time.Minute), false,
			[]time.Time{at(0), at(time.Minute), at(2 * time.Minute)}, at(time.Hour)},
		{"OldOnesLeaveTheWindow", []time.Time{at(0), at(time.Minute), at(2 * time.Minute)}, 3, at(time.Hour), true,
			[]time.Time{at(time.Minute), at(2 * time.Minute), at(time.Hour)}, time.Time{}},
		{"NoBurstAcrossABoundary", []time.Time{at(59 * time.Minute), at(59 * time.Minute), at(59 * time.Minute)}, 3, at(61 * time.Minute), false,
			[]time.Time{at(59 * time.Minute), at(59 * time.Minute), at(59 * time.Minute)}, at(119 * time.Minute)},
		{"UnorderedAndAheadCount", []time.Time{at(2 * time.Minute), at(-30 * time.Minute)}, 2, at(time.Minute), false,
			[]time.Time{at(-30 * time.Minute), at(2 * time.Minute)}, at(30 * time.Minute)},
		{"LimitZeroRefuses", nil, 0, at(0), false, []time.Time{}, at(time.Hour)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			kept, retryAt, ok := store.QuotaSpend(tt.spent, tt.limit, time.Hour, tt.now)
			require.Equal(t, tt.wantOK, ok)
			require.Equal(t, tt.wantKept, kept)
			require.Equal(t, tt.wantWait, retryAt)
		})
	}
}
