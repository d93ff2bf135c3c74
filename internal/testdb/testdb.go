// Package testdb gives tests their own database: a fresh PostgreSQL schema
// on the server named by HERALD_TEST_DATABASE_URL (or the local default), or a
// fresh SQLite file. Each test gets its own, so every package and every test
// can run in parallel. It is imported only by tests.
//
// A test that starts from a migrated database gets a copy of a template
// built once per test process (PostgresTemplate, SQLiteTemplate), not one
// migrated from zero: applying every migration cost most of a store test's
// time. Tests of the migrations themselves start empty (PostgresURL,
// SQLitePath).
package testdb

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Migrator is a store as a template's build function sees it.
type Migrator interface {
	Migrate(ctx context.Context) error
	Close() error
}

// Migrated is the build function of a template of a migrated database:
// it opens the database at dsn (a file's path, or a schema's URL) with
// open, applies every migration and closes it.
func Migrated(open func(ctx context.Context, dsn string) (Migrator, error)) func(context.Context, string) error {
	return func(ctx context.Context, dsn string) error {
		s, err := open(ctx, dsn)
		if err != nil {
			return err
		}
		if err := s.Migrate(ctx); err != nil {
			s.Close()
			return err
		}
		return s.Close()
	}
}

// DefaultPostgresURL is the database used when HERALD_TEST_DATABASE_URL is unset.
const DefaultPostgresURL = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"

// PostgresBaseURL returns the server the tests use.
func PostgresBaseURL() string {
	if u := os.Getenv("HERALD_TEST_DATABASE_URL"); u != "" {
		return u
	}
	return DefaultPostgresURL
}

// PostgresURL creates an empty schema for this test, drops it when the test
// ends, and returns a connection URL whose search_path is that schema. A
// test that starts from a migrated schema asks a PostgresTemplate instead;
// this is for those that migrate from zero, or from an older migration.
func PostgresURL(t testing.TB) string {
	t.Helper()
	schema := newSchemaName(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn := connect(ctx, t)
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		t.Fatalf("create schema: %v", err)
	}
	dropAtCleanup(t, schema)
	return schemaURL(t, schema)
}

// randomSchemaName returns a new name for a test's schema.
func randomSchemaName() (string, error) {
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return "herald_test_" + hex.EncodeToString(b[:]), nil
}

// newSchemaName returns a new name for a test's schema.
func newSchemaName(t testing.TB) string {
	t.Helper()
	name, err := randomSchemaName()
	if err != nil {
		t.Fatal(err)
	}
	return name
}

// connect connects to the test server.
func connect(ctx context.Context, t testing.TB) *pgx.Conn {
	t.Helper()
	base := PostgresBaseURL()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatalf("connect to test PostgreSQL %s (set HERALD_TEST_DATABASE_URL): %v", base, err)
	}
	return conn
}

// dropAtCleanup drops schema, and all it holds, when t ends.
func dropAtCleanup(t testing.TB, schema string) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, PostgresBaseURL())
		if err != nil {
			t.Errorf("connect to drop schema %s: %v", schema, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP SCHEMA "+schema+" CASCADE"); err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
		}
	})
}

// schemaURL is the test server's URL with search_path set to schema.
func schemaURL(t testing.TB, schema string) string {
	t.Helper()
	u, err := withSearchPath(PostgresBaseURL(), schema)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// withSearchPath is base with search_path set to schema, and
// application_name too, so that the connections to a schema can be told.
func withSearchPath(base, schema string) (string, error) {
	u, err := url.Parse(base)
	if err != nil {
		return "", fmt.Errorf("parse %s: %w", base, err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	q.Set("application_name", schema)
	u.RawQuery = q.Encode()
	return u.String(), nil
}

// SQLitePath returns a path for a new SQLite file in the test's temp dir.
func SQLitePath(t testing.TB) string {
	t.Helper()
	return filepath.Join(t.TempDir(), "herald.db")
}

// SQLiteTemplate is a SQLite database built once per test process (its
// migrations applied, say) and copied into each test that asks for one: a
// copy costs a file write, where applying every migration again costs a
// transaction and an fsync each, a third of a second a test under -race.
type SQLiteTemplate struct {
	build func(ctx context.Context, path string) error
	once  sync.Once
	files map[string][]byte // file suffix ("", "-wal") to its bytes
	err   error
}

// NewSQLiteTemplate returns a template that build makes, on first use, at
// the path it is given; build must close the database before it returns.
func NewSQLiteTemplate(build func(ctx context.Context, path string) error) *SQLiteTemplate {
	return &SQLiteTemplate{build: build}
}

// Path writes a copy of the template to a new file in the test's temp dir
// and returns its path.
func (tp *SQLiteTemplate) Path(t testing.TB) string {
	t.Helper()
	tp.once.Do(func() { tp.files, tp.err = tp.make() })
	if tp.err != nil {
		t.Fatalf("build the SQLite template: %v", tp.err)
	}
	path := SQLitePath(t)
	for suffix, b := range tp.files {
		if err := os.WriteFile(path+suffix, b, 0o644); err != nil {
			t.Fatalf("copy the SQLite template: %v", err)
		}
	}
	return path
}

// make builds the template in a directory of its own and keeps its files'
// bytes, so nothing is left on disk when the tests end.
func (tp *SQLiteTemplate) make() (map[string][]byte, error) {
	dir, err := os.MkdirTemp("", "herald-template-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "herald.db")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := tp.build(ctx, path); err != nil {
		return nil, err
	}
	files := map[string][]byte{}
	for _, suffix := range []string{"", "-wal"} {
		b, err := os.ReadFile(path + suffix)
		if os.IsNotExist(err) && suffix != "" {
			continue
		}
		if err != nil {
			return nil, err
		}
		files[suffix] = b
	}
	return files, nil
}
