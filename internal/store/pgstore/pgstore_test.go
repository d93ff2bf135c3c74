package pgstore

import (
	"log/slog"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/heraldhooks/herald/internal/store"
	"github.com/heraldhooks/herald/internal/store/storetest"
	"github.com/heraldhooks/herald/internal/testdb"
)

// TestStore holds the PostgreSQL backend to the conformance suite, each
// case in a fresh schema of its own.
func TestStore(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T) store.Store {
		s, err := Open(t.Context(), testdb.PostgresURL(t), slog.New(slog.DiscardHandler))
		require.NoError(t, err)
		t.Cleanup(func() { require.NoError(t, s.Close()) })
		require.NoError(t, s.Migrate(t.Context()))
		return s
	})
}
