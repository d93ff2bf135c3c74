// Package pgtest gives tests a migrated PostgreSQL schema of their own
// without applying the migrations for each: they are applied once per test
// process, and each test gets a copy of the schema, emptied and reused
// when the test ends. It is imported only by tests.
package pgtest

import (
	"context"
	"log/slog"
	"os"
	"testing"

	"github.com/heraldhooks/herald/internal/store/pgstore"
	"github.com/heraldhooks/herald/internal/testdb"
)

// migrated is an empty schema with every migration applied.
var migrated = testdb.NewPostgresTemplate(testdb.Migrated(func(ctx context.Context, url string) (testdb.Migrator, error) {
	return pgstore.Open(ctx, url, slog.New(slog.DiscardHandler))
}))

// Main runs a package's tests and drops the pooled copies they leave
// behind; a package's TestMain is func TestMain(m *testing.M) {
// pgtest.Main(m) }. A process that does not drop them leaves them to the
// next test process's template build, which drops them once this process
// has ended.
func Main(m *testing.M) {
	code := m.Run()
	migrated.Close()
	os.Exit(code)
}

// Close drops the pooled copies, for a TestMain that does more than Main.
func Close() { migrated.Close() }

// URL gives this test a schema of its own holding an empty database with
// every migration applied, takes it back when the test ends, and returns a connection
// URL whose search_path is that schema. Opening it and migrating again
// finds nothing left to apply, as on a restart.
func URL(t testing.TB) string {
	t.Helper()
	return migrated.URL(t)
}
