package testdb

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// PostgresTemplate is a PostgreSQL schema built once per test process (its
// migrations applied, say) and copied into a new schema for each test that
// asks for one. The copy is the built schema's pg_dump, tables, indexes,
// functions, triggers and rows, replayed in one statement: a transaction
// and a commit, where applying every migration again costs a transaction
// and a commit each and the work of every migration since the first.
//
// The built schema is dropped once dumped, so nothing is left on the server
// between runs, and a migration edited in place is never served stale: each
// process builds its own, which costs one migration from zero per test
// process.
type PostgresTemplate struct {
	build func(ctx context.Context, url string) error
	once  sync.Once
	dump  string // the built schema's dump, its name replaced by schemaMark
	err   error
}

// schemaMark stands for the new schema's name in a template's dump.
const schemaMark = "\x00schema\x00"

// NewPostgresTemplate returns a template that build makes, on first use,
// in an empty schema that url's search_path selects; build must close its
// connections before it returns.
func NewPostgresTemplate(build func(ctx context.Context, url string) error) *PostgresTemplate {
	return &PostgresTemplate{build: build}
}

// URL creates a schema for this test holding a copy of the template, drops
// it when the test ends, and returns a connection URL whose search_path is
// that schema.
func (tp *PostgresTemplate) URL(t testing.TB) string {
	t.Helper()
	tp.once.Do(func() { tp.dump, tp.err = tp.make() })
	if tp.err != nil {
		t.Fatalf("build the PostgreSQL template: %v", tp.err)
	}
	schema := newSchemaName(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn := connect(ctx, t)
	defer conn.Close(ctx)
	// One simple query: its statements run in one implicit transaction.
	if _, err := conn.Exec(ctx, strings.ReplaceAll(tp.dump, schemaMark, schema)); err != nil {
		t.Fatalf("copy the PostgreSQL template into %s: %v", schema, err)
	}
	dropAtCleanup(t, schema)
	return schemaURL(t, schema)
}

// make builds the template in a schema of its own, dumps it and drops it.
func (tp *PostgresTemplate) make() (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dumper, err := PostgresDumpPath()
	if err != nil {
		return "", err
	}
	base := PostgresBaseURL()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		return "", fmt.Errorf("connect to test PostgreSQL %s (set HERALD_TEST_DATABASE_URL): %w", base, err)
	}
	defer conn.Close(ctx)
	name, err := randomSchemaName()
	if err != nil {
		return "", err
	}
	name = "herald_template_" + strings.TrimPrefix(name, "herald_test_")
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+name); err != nil {
		return "", fmt.Errorf("create schema: %w", err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		_, _ = conn.Exec(ctx, "DROP SCHEMA "+name+" CASCADE")
	}()
	url, err := withSearchPath(base, name)
	if err != nil {
		return "", err
	}
	if err := tp.build(ctx, url); err != nil {
		return "", err
	}

	cmd := exec.CommandContext(ctx, dumper, "--dbname", base, "--schema", name,
		"--no-owner", "--no-privileges", "--no-comments", "--inserts")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("%s: %w: %s", dumper, err, stderr.String())
	}
	var sql strings.Builder
	for line := range strings.Lines(string(out)) {
		// Lines of psql's own commands (\restrict, \unrestrict), which
		// the server does not take.
		if strings.HasPrefix(line, `\`) {
			continue
		}
		sql.WriteString(line)
	}
	if !strings.Contains(sql.String(), "CREATE SCHEMA "+name+";") {
		return "", fmt.Errorf("%s of schema %s: no CREATE SCHEMA in its output", dumper, name)
	}
	return strings.ReplaceAll(sql.String(), name, schemaMark), nil
}

// PostgresDumpPath finds pg_dump: HERALD_TEST_PG_DUMP, the PATH, or the
// newest of Debian's /usr/lib/postgresql/*/bin.
func PostgresDumpPath() (string, error) {
	if p := os.Getenv("HERALD_TEST_PG_DUMP"); p != "" {
		return p, nil
	}
	if p, err := exec.LookPath("pg_dump"); err == nil {
		return p, nil
	}
	found, _ := filepath.Glob("/usr/lib/postgresql/*/bin/pg_dump")
	if len(found) == 0 {
		return "", fmt.Errorf("pg_dump not found: install the PostgreSQL client, or set HERALD_TEST_PG_DUMP")
	}
	slices.Sort(found)
	return found[len(found)-1], nil
}
