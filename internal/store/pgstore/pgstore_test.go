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
	storetest.Run(t, func(t *testing.T) store.Store { return openFresh(t) })
}

// BenchmarkStore measures the PostgreSQL backend's hot paths (see
// storetest.Bench), each benchmark in a fresh schema.
func BenchmarkStore(b *testing.B) {
	storetest.Bench(b, func(b *testing.B) store.Store { return openFresh(b) })
}

// openFresh returns a migrated store in a fresh schema, closed when tb
// ends: a copy of one migrated once for the package (migrated), migrated
// again, which finds nothing left to apply, as on a restart. It seals
// endpoint secrets, as Herald does.
func openFresh(tb testing.TB) *Store {
	s, err := Open(tb.Context(), migrated.URL(tb), slog.New(slog.DiscardHandler),
		store.WithSecrets(storetest.Ring(tb)))
	require.NoError(tb, err)
	tb.Cleanup(func() { require.NoError(tb, s.Close()) })
	require.NoError(tb, s.Migrate(tb.Context()))
	return s
}

// TestPlansAreMadeForTheTablesAsTheyAre: every connection plans each
// statement afresh (plan_cache_mode), but for the hot transactions of
// inGenericTx (claim, outcome write, ingest), whose every statement finds
// its rows by key, unless the URL chooses otherwise.
// A generic plan fixed while the queue was small kept sequential scans of
// deliveries, and claims took tens of milliseconds once it was large.
func TestPlansAreMadeForTheTablesAsTheyAre(t *testing.T) {
	t.Parallel()
	url := testdb.PostgresURL(t)
	for _, tc := range []struct{ url, want string }{
		{url, "force_custom_plan"},
		{url + "&plan_cache_mode=auto", "auto"},
	} {
		s, err := Open(t.Context(), tc.url, nil)
		require.NoError(t, err)
		var mode string
		require.NoError(t, s.pool.QueryRow(t.Context(), "SHOW plan_cache_mode").Scan(&mode))
		generic := s.generic.BeginQuery != ""
		require.NoError(t, s.Close())
		require.Equal(t, tc.want, mode, tc.url)
		require.Equal(t, tc.want == "force_custom_plan", generic, "%s: lookups on generic plans (inGenericTx)", tc.url)
	}
}
