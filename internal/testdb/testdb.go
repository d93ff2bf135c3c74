// Package testdb gives tests their own database: a fresh PostgreSQL schema
// on the server named by HERALD_TEST_DATABASE_URL (or the local default), or a
// fresh SQLite file. Each test gets its own, so every package and every test
// can run in parallel. It is imported only by tests.
package testdb

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

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
// ends, and returns a connection URL whose search_path is that schema.
func PostgresURL(t testing.TB) string {
	t.Helper()
	base := PostgresBaseURL()
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	schema := "herald_test_" + hex.EncodeToString(b[:])

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatalf("connect to test PostgreSQL %s (set HERALD_TEST_DATABASE_URL): %v", base, err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		t.Fatalf("create schema: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, base)
		if err != nil {
			t.Errorf("connect to drop schema %s: %v", schema, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP SCHEMA "+schema+" CASCADE"); err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
		}
	})

	u, err := url.Parse(base)
	if err != nil {
		t.Fatalf("parse %s: %v", base, err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
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
