package metrics

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/heraldhooks/herald/internal/store"
)

// TestPurgedCountsRowsByTable: every table label is there from the start,
// at zero, and each purge batch adds what it deleted.
func TestPurgedCountsRowsByTable(t *testing.T) {
	t.Parallel()
	m, _, _, _ := setup(t, Options{})
	r := m.Registry()
	for _, table := range []string{TableEvents, TableDeliveries, TableAttempts} {
		require.Zero(t, must(t, r, NamePurgedRows, "table", table), table)
	}
	m.Purged(store.PurgeResult{Events: 2, Deliveries: 3, Attempts: 7})
	m.Purged(store.PurgeResult{Events: 1, Deliveries: 1})
	m.Purged(store.PurgeResult{Busy: true})
	require.Equal(t, 3.0, must(t, r, NamePurgedRows, "table", TableEvents))
	require.Equal(t, 4.0, must(t, r, NamePurgedRows, "table", TableDeliveries))
	require.Equal(t, 7.0, must(t, r, NamePurgedRows, "table", TableAttempts))
}
