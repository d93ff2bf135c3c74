package store_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/heraldhooks/herald/internal/store"
)

// TestContractionMarker: a migration declares itself a contraction with
// a line of its own; nothing else does.
func TestContractionMarker(t *testing.T) {
	t.Parallel()
	require.True(t, store.IsContraction("-- herald: contract\nALTER TABLE x DROP COLUMN y;\n"))
	require.False(t, store.IsContraction("ALTER TABLE x ADD COLUMN y text; -- herald: contract later\n"))
}

// TestCheckSchema: unknown expand-only migrations pass; an unknown
// contraction refuses, naming the release that applied it.
func TestCheckSchema(t *testing.T) {
	t.Parallel()
	applied := []store.AppliedMigration{
		{Version: 30, Name: "0030_x.sql", Release: "0.1.0", Contract: true}, // known: fine
		{Version: 31, Name: "0031_y.sql", Release: "0.2.0"},
	}
	require.NoError(t, store.CheckSchema(30, applied, "0.1.0"))
	applied = append(applied, store.AppliedMigration{Version: 32, Name: "0032_z.sql", Release: "0.3.0", Contract: true})
	require.EqualError(t, store.CheckSchema(30, applied, "0.1.0"),
		"database schema needs herald at least 0.3.0 (migration 32); this is 0.1.0 (migrations up to 30; 0032_z.sql contracted the schema)")
	require.NoError(t, store.CheckSchema(32, applied, "0.3.0"))
}
