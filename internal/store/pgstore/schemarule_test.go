package pgstore

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/heraldhooks/herald/internal/store"
	"github.com/heraldhooks/herald/internal/testdb"
)

// TestSchemaRuleOnPostgres: a node starts on a database where a newer
// release only expanded the schema (a migration it does not know), and
// refuses, naming the release it needs, once a newer one contracted it.
func TestSchemaRuleOnPostgres(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	url := testdb.PostgresURL(t)
	s, err := Open(ctx, url, nil)
	require.NoError(t, err)
	defer s.Close()
	require.NoError(t, s.Migrate(ctx))
	known := MaxMigration()
	var release string
	require.NoError(t, s.pool.QueryRow(ctx, `SELECT release FROM schema_migrations WHERE version = $1`, known).Scan(&release))
	require.Equal(t, store.DefaultRelease, release, "the applying release is recorded")

	_, err = s.pool.Exec(ctx, `INSERT INTO schema_migrations (version, name, release, contract) VALUES ($1, '9998_more.sql', '9.9.0', false)`, known+1)
	require.NoError(t, err)
	other, err := Open(ctx, url, nil)
	require.NoError(t, err)
	defer other.Close()
	require.NoError(t, other.Migrate(ctx), "an expand-only migration it does not know")

	_, err = s.pool.Exec(ctx, `INSERT INTO schema_migrations (version, name, release, contract) VALUES ($1, '9999_drop.sql', '9.9.1', true)`, known+2)
	require.NoError(t, err)
	err = other.Migrate(ctx)
	require.ErrorContains(t, err, "database schema needs herald at least 9.9.1 (migration ")
	require.ErrorContains(t, err, "this is "+store.DefaultRelease)
}
