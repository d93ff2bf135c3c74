// Package sqlitetest gives tests a migrated SQLite database of their own
// without applying the migrations for each: they are applied once per test
// process, and each test gets a copy of the file. It is imported only by
// tests.
package sqlitetest

import (
	"context"
	"log/slog"
	"testing"

	"github.com/heraldhooks/herald/internal/store/sqlitestore"
	"github.com/heraldhooks/herald/internal/testdb"
)

// migrated is an empty database with every migration applied.
var migrated = testdb.NewSQLiteTemplate(testdb.Migrated(func(ctx context.Context, path string) (testdb.Migrator, error) {
	return sqlitestore.Open(ctx, path, slog.New(slog.DiscardHandler))
}))

// Path returns the path of a new file in the test's temp dir holding an
// empty database with every migration applied. Opening it and migrating
// again finds nothing left to apply, as on a restart.
func Path(t testing.TB) string {
	t.Helper()
	return migrated.Path(t)
}
