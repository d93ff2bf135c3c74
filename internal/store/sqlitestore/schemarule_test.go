package sqlitestore_test

import (
	"database/sql"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/heraldhooks/herald/internal/store"
	"github.com/heraldhooks/herald/internal/store/sqlitestore"
	"github.com/heraldhooks/herald/internal/store/sqlitestore/sqlitetest"
)

// TestSchemaRuleOnSQLite: a node starts on a database where a newer
// release only expanded the schema (a migration it does not know), and
// refuses, naming the release it needs, once a newer one contracted it.
func TestSchemaRuleOnSQLite(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	path := sqlitetest.Path(t)
	s, err := sqlitestore.Open(ctx, path, nil)
	require.NoError(t, err)
	require.NoError(t, s.Migrate(ctx))
	require.NoError(t, s.Close())
	known := sqlitestore.MaxMigration()

	db, err := sql.Open("sqlite", path)
	require.NoError(t, err)
	defer db.Close()
	var release string
	require.NoError(t, db.QueryRowContext(ctx, `SELECT release FROM schema_migrations WHERE version = ?`, known).Scan(&release))
	require.Equal(t, store.DefaultRelease, release, "the applying release is recorded")

	_, err = db.ExecContext(ctx, `INSERT INTO schema_migrations (version, name, applied_at, release, contract) VALUES (?, '9998_more.sql', 0, '9.9.0', 0)`, known+1)
	require.NoError(t, err)
	s, err = sqlitestore.Open(ctx, path, nil)
	require.NoError(t, err)
	require.NoError(t, s.Migrate(ctx), "an expand-only migration it does not know")
	require.NoError(t, s.Close())

	_, err = db.ExecContext(ctx, `INSERT INTO schema_migrations (version, name, applied_at, release, contract) VALUES (?, '9999_drop.sql', 0, '9.9.1', 1)`, known+2)
	require.NoError(t, err)
	s, err = sqlitestore.Open(ctx, path, nil)
	require.NoError(t, err)
	defer s.Close()
	err = s.Migrate(ctx)
	require.ErrorContains(t, err, "database schema needs herald at least 9.9.1 (migration ")
	require.ErrorContains(t, err, "this is "+store.DefaultRelease)
}
