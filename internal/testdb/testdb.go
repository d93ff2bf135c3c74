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
