package pgstore

import (
	"context"
	"flag"
	"log/slog"
	"os"
	"testing"

	"github.com/heraldhooks/herald/internal/testdb"
)

// parallel is how many of this package's tests run at once unless
// -parallel says otherwise. They wait on the PostgreSQL server, not on this
// process: each copies a migrated schema and drops it, and a test of nodes
// waits on their locks. go test's default, GOMAXPROCS, leaves a two-core
// machine idle for much of the run (66 s at 2, 35 s at 6 there, the
// server's connections peaking near 35, when each test migrated its
// schema from zero).
const parallel = "6"

func TestMain(m *testing.M) {
	flag.Parse()
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "test.parallel" })
	if !given {
		if err := flag.Set("test.parallel", parallel); err != nil {
			panic(err)
		}
	}
	code := m.Run()
	migrated.Close()
	os.Exit(code)
}

// migrated is an empty schema with every migration applied, built once
// per test process and copied into each test that starts from it, the
// copies pooled and emptied between tests (testdb.PostgresTemplate): a
// test that migrated its own schema from zero spent most of its time
// there. Tests of migrations start from an empty
// schema (testdb.PostgresURL) instead.
var migrated = testdb.NewPostgresTemplate(testdb.Migrated(func(ctx context.Context, url string) (testdb.Migrator, error) {
	return Open(ctx, url, slog.New(slog.DiscardHandler))
}))
