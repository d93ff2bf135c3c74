package testdb

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// PostgresTemplate is a PostgreSQL schema built once per test process (its
// migrations applied, say) and handed to each test that asks for one as a
// schema of its own holding a copy of it.
//
// A copy is the built schema's pg_dump replayed in one statement, and when
// its test ends it goes back to a pool: emptied with a DELETE from each table
// and the template's rows put back, it serves the next test. Making a copy
// and dropping it cost the server about a tenth of a second of CPU (the
// catalog's rows of some twenty tables, thirty indexes, functions and
// triggers, written and deleted again, and left dead in the catalog on a
// server without autovacuum, where every later catalog scan reads them);
// emptying one costs under a tenth of that. A copy is dropped, not pooled,
// when its test changed it: a table, column, function, trigger or
// constraint added, dropped or redefined, or planner statistics gathered
// (ANALYZE: a plan test's choices must not leak into the next); when a
// connection to it would not end; and after maxUses tests, so dead rows do
// not pile up in a long run with autovacuum off.
//
// The built schema is dropped once dumped, Close drops the pool, and a
// migration edited in place is never served stale: each process builds its
// own, which costs one migration from zero per test process. Pooled schemas
// are named after their machine and process, and a process that did not
// Close leaves them to the next template build on that machine, which
// drops those of processes that have ended.
type PostgresTemplate struct {
	build func(ctx context.Context, url string) error
	once  sync.Once
	dump  string // the built schema's dump, its name replaced by schemaMark
	reset string // empties a copy and puts the template's rows back
	print string // a fresh copy's catalog fingerprint
	// The names of the template's relations and functions.
	relations, functions []string
	err                  error

	mu     sync.Mutex
	admin  *pgxpool.Pool // creates, empties and drops copies
	free   []string      // emptied copies, ready for a test
	uses   map[string]int
	closed bool
}

// schemaMark stands for the new schema's name in a template's dump.
const schemaMark = "\x00schema\x00"

// maxUses is how many tests one pooled copy serves before it is dropped.
const maxUses = 30

// poolPrefix starts the name of every pooled copy; the process's id follows.
const poolPrefix = "herald_pool_"

// NewPostgresTemplate returns a template that build makes, on first use,
// in an empty schema that url's search_path selects; build must close its
// connections before it returns.
func NewPostgresTemplate(build func(ctx context.Context, url string) error) *PostgresTemplate {
	return &PostgresTemplate{build: build, uses: map[string]int{}}
}

// URL gives this test a schema holding a copy of the template, takes it
// back when the test ends, and returns a connection URL whose search_path
// is that schema (and whose application_name is its name, so that the
// template can find the connections to it that are left). The copy
// may have served other tests before: its rows are the template's, but its
// tables may hold dead rows, and the planner's view of them is not a new
// table's.
func (tp *PostgresTemplate) URL(t testing.TB) string {
	t.Helper()
	return tp.url(t, true)
}

// FreshURL is URL with a copy that no test has used before, dropped when
// this test ends: for a test of the planner's choices, which depend on
// what a table has held.
func (tp *PostgresTemplate) FreshURL(t testing.TB) string {
	t.Helper()
	return tp.url(t, false)
}

func (tp *PostgresTemplate) url(t testing.TB, pooled bool) string {
	t.Helper()
	tp.once.Do(func() { tp.err = tp.make() })
	if tp.err != nil {
		t.Fatalf("build the PostgreSQL template: %v", tp.err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	schema, err := tp.take(ctx, pooled)
	if err != nil {
		t.Fatalf("copy the PostgreSQL template: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := tp.giveBack(ctx, schema, pooled); err != nil {
			t.Errorf("take back schema %s: %v", schema, err)
		}
	})
	u, err := withSearchPath(PostgresBaseURL(), schema)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// take returns an emptied copy from the pool if pooled, or a new one.
func (tp *PostgresTemplate) take(ctx context.Context, pooled bool) (string, error) {
	tp.mu.Lock()
	if n := len(tp.free); n > 0 && pooled {
		schema := tp.free[n-1]
		tp.free = tp.free[:n-1]
		tp.mu.Unlock()
		return schema, nil
	}
	tp.mu.Unlock()
	name, err := randomSchemaName()
	if err != nil {
		return "", err
	}
	schema := fmt.Sprintf("%s%s_%d_%s", poolPrefix, hostTag(), os.Getpid(), strings.TrimPrefix(name, "herald_test_"))
	// One simple query: its statements run in one implicit transaction.
	if _, err := tp.admin.Exec(ctx, strings.ReplaceAll(tp.dump, schemaMark, schema)); err != nil {
		return "", fmt.Errorf("into %s: %w", schema, err)
	}
	return schema, nil
}

// giveBack empties schema and returns it to the pool, or drops it when it
// is not to be pooled, when its test changed more than its rows, when it
// has served maxUses tests, when a connection to it would not end, or when
// the pool is closed.
func (tp *PostgresTemplate) giveBack(ctx context.Context, schema string, pooled bool) error {
	tp.mu.Lock()
	tp.uses[schema]++
	worn := !pooled || tp.reset == "" || tp.uses[schema] >= maxUses || tp.closed
	tp.mu.Unlock()
	if !worn {
		worn = !tp.pristine(ctx, schema)
	}
	if !worn {
		if _, err := tp.admin.Exec(ctx, strings.ReplaceAll(tp.reset, schemaMark, schema)); err == nil {
			tp.mu.Lock()
			pooled := !tp.closed
			if pooled {
				tp.free = append(tp.free, schema)
			}
			tp.mu.Unlock()
			if pooled {
				return nil
			}
		}
	}
	tp.mu.Lock()
	delete(tp.uses, schema)
	tp.mu.Unlock()
	_, err := tp.admin.Exec(ctx, "DROP SCHEMA "+schema+" CASCADE")
	return err
}

// pristine reports whether schema is as its test found it but for its
// rows: no connection to it left, and its catalog's fingerprint the
// template's.
func (tp *PostgresTemplate) pristine(ctx context.Context, schema string) bool {
	// A store's connections leave the server a moment after it has closed
	// them: end any left and wait for them to go (a second at most), so
	// that emptying the copy waits on none of their locks. Tests close
	// what they open; one that did not would find its connections ended.
	var left int
	if err := tp.admin.QueryRow(ctx, `SELECT count(*) FILTER (WHERE NOT pg_terminate_backend(pid, 1000))
		FROM pg_stat_activity WHERE application_name = $1`, schema).Scan(&left); err != nil || left > 0 {
		return false
	}
	var print string
	if err := tp.admin.QueryRow(ctx, fingerprint, schema, tp.relations, tp.functions).Scan(&print); err != nil {
		return false
	}
	return print == tp.print
}

// fingerprint sums up what a schema's catalog holds beside its rows: how
// many objects it holds (tables, sequences, functions, types), the
// template's relations ($2) with their columns, triggers (but a foreign
// key's own, named after their oids), constraints, any statistics
// gathered, the objects that depend on them (indexes, defaults,
// constraints, triggers) and the definitions of their indexes,
// constraints and defaults, and the template's functions ($3) with their
// bodies. Each is read through a catalog index: a server without
// autovacuum keeps every dead row of the catalogs that tests' schemas
// churn, and a scan of pg_attribute there reads hundreds of megabytes.
const fingerprint = `WITH rel AS (
	SELECT c.oid, c.relname, c.relkind, c.relnatts FROM pg_class c
	 WHERE c.relname = ANY($2::text[]) AND c.relnamespace = $1::regnamespace
)
SELECT concat_ws('|',
	(SELECT count(*) FROM pg_depend d
	  WHERE d.refclassid = 'pg_namespace'::regclass AND d.refobjid = $1::regnamespace AND d.refobjsubid = 0)::text,
	(SELECT string_agg(r.relname || ':' || r.relkind::text || ':' || r.relnatts, ',' ORDER BY r.relname) FROM rel r),
	(SELECT string_agg(r.relname || '.' || a.attname || ':' || a.atttypid || ':' || a.attnotnull, ',' ORDER BY r.relname, a.attnum)
	   FROM rel r JOIN pg_attribute a ON a.attrelid = r.oid WHERE a.attnum > 0 AND NOT a.attisdropped),
	(SELECT string_agg(r.relname || '.' || g.tgname || ':' || g.tgenabled::text || ':' || p.proname || ':' || md5(p.prosrc), ','
	                   ORDER BY r.relname, g.tgname)
	   FROM rel r JOIN pg_trigger g ON g.tgrelid = r.oid JOIN pg_proc p ON p.oid = g.tgfoid
	  WHERE NOT g.tgisinternal),
	(SELECT string_agg(r.relname || '.' || k.conname, ',' ORDER BY r.relname, k.conname)
	   FROM rel r JOIN pg_constraint k ON k.conrelid = r.oid),
	(SELECT count(*) FROM rel r JOIN pg_statistic s ON s.starelid = r.oid)::text,
	(SELECT count(*) FROM rel r JOIN pg_depend d ON d.refclassid = 'pg_class'::regclass AND d.refobjid = r.oid)::text,
	(SELECT string_agg(replace(pg_get_indexdef(i.indexrelid), $1 || '.', ''), ',' ORDER BY 1)
	   FROM rel r JOIN pg_index i ON i.indrelid = r.oid),
	(SELECT string_agg(r.relname || '.' || k.conname || ':' || replace(pg_get_constraintdef(k.oid), $1 || '.', ''), ',' ORDER BY 1)
	   FROM rel r JOIN pg_constraint k ON k.conrelid = r.oid),
	(SELECT string_agg(r.relname || '.' || a.adnum || ':' || replace(pg_get_expr(a.adbin, a.adrelid), $1 || '.', ''), ',' ORDER BY 1)
	   FROM rel r JOIN pg_attrdef a ON a.adrelid = r.oid),
	(SELECT string_agg(p.proname || ':' || md5(p.prosrc), ',' ORDER BY p.proname)
	   FROM pg_proc p WHERE p.proname = ANY($3::text[]) AND p.pronamespace = $1::regnamespace))`

// Close drops the pool's copies. Tests that ask for a copy after it get
// one still, dropped when they end.
func (tp *PostgresTemplate) Close() {
	tp.mu.Lock()
	tp.closed = true
	free := tp.free
	tp.free = nil
	admin := tp.admin
	tp.mu.Unlock()
	if admin == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, schema := range free {
		_, _ = admin.Exec(ctx, "DROP SCHEMA "+schema+" CASCADE")
	}
}

// make builds the template in a schema of its own, dumps it, learns how to
// empty a copy of it, drops it, and makes the pool's first copy.
func (tp *PostgresTemplate) make() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	base := PostgresBaseURL()
	admin, err := pgxpool.New(ctx, base)
	if err != nil {
		return fmt.Errorf("connect to test PostgreSQL %s (set HERALD_TEST_DATABASE_URL): %w", base, err)
	}
	tp.admin = admin
	sweep(ctx, admin)
	name, err := randomSchemaName()
	if err != nil {
		return err
	}
	name = "herald_template_" + strings.TrimPrefix(name, "herald_test_")
	if _, err := admin.Exec(ctx, "CREATE SCHEMA "+name); err != nil {
		return fmt.Errorf("create schema: %w", err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		_, _ = admin.Exec(ctx, "DROP SCHEMA "+name+" CASCADE")
	}()
	url, err := withSearchPath(base, name)
	if err != nil {
		return err
	}
	if err := tp.build(ctx, url); err != nil {
		return err
	}
	dump, err := dumpSchema(ctx, base, name)
	if err != nil {
		return err
	}
	tp.dump = strings.ReplaceAll(dump, name, schemaMark)
	// The copy is emptied as a replica is: no trigger fires and no foreign
	// key is checked, so the tables are emptied in any order and a trigger
	// that counts a table's rows into another leaves nothing behind.
	// Setting it takes a superuser (or a grant of the setting); a server
	// that refuses gets no pool, a copy for each test.
	if _, err := admin.Exec(ctx, "BEGIN; SET LOCAL session_replication_role = replica; COMMIT"); err != nil {
		tp.reset = ""
	} else {
		var tables []string
		if err := admin.QueryRow(ctx, `SELECT array(SELECT relname::text FROM pg_class
			WHERE relnamespace = $1::regnamespace AND relkind IN ('r', 'p') ORDER BY relname)`, name).Scan(&tables); err != nil {
			return err
		}
		var reset strings.Builder
		reset.WriteString("BEGIN;\nSET LOCAL session_replication_role = replica;\n")
		for _, table := range tables {
			fmt.Fprintf(&reset, "DELETE FROM %s.%s;\n", schemaMark, table)
		}
		// The template's rows and its sequences' places, as the dump
		// writes them: one line each.
		for line := range strings.Lines(tp.dump) {
			if strings.HasPrefix(line, "INSERT INTO ") || strings.HasPrefix(line, "SELECT pg_catalog.setval(") {
				if !strings.HasSuffix(line, ");\n") {
					return fmt.Errorf("template dump: a statement over more than one line: %.80s", line)
				}
				reset.WriteString(line)
			}
		}
		reset.WriteString("COMMIT;\n")
		tp.reset = reset.String()
	}

	first, err := tp.take(ctx, false)
	if err != nil {
		return fmt.Errorf("the first copy: %w", err)
	}
	if err := admin.QueryRow(ctx, `SELECT array(SELECT relname::text FROM pg_class WHERE relnamespace = $1::regnamespace),
		array(SELECT proname::text FROM pg_proc WHERE pronamespace = $1::regnamespace)`, first).Scan(&tp.relations, &tp.functions); err != nil {
		return fmt.Errorf("the first copy's relations and functions: %w", err)
	}
	if err := admin.QueryRow(ctx, fingerprint, first, tp.relations, tp.functions).Scan(&tp.print); err != nil {
		return fmt.Errorf("the first copy's fingerprint: %w", err)
	}
	tp.free = append(tp.free, first)
	return nil
}

// dumpSchema is pg_dump's SQL for schema name, its rows as INSERTs,
// without psql's own commands.
func dumpSchema(ctx context.Context, base, name string) (string, error) {
	dumper, err := PostgresDumpPath()
	if err != nil {
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
	return sql.String(), nil
}

// sweep drops the pooled copies of test processes that have ended without
// closing their pool (one killed, or a package without a TestMain that
// closes it).
func sweep(ctx context.Context, admin *pgxpool.Pool) {
	rows, err := admin.Query(ctx, `SELECT nspname FROM pg_namespace WHERE starts_with(nspname, $1)`, poolPrefix)
	if err != nil {
		return
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return
	}
	for _, name := range names {
		host, rest, _ := strings.Cut(strings.TrimPrefix(name, poolPrefix), "_")
		pid, _, _ := strings.Cut(rest, "_")
		n, err := strconv.Atoi(pid)
		if host != hostTag() || err != nil || processAlive(n) {
			continue
		}
		_, _ = admin.Exec(ctx, "DROP SCHEMA IF EXISTS "+name+" CASCADE")
	}
}

// hostTag names this machine (its host name, hashed short) in the names
// of the pooled copies, so that a sweep judges by process ids only the
// copies of processes that ran here: a server shared by several machines
// or containers holds others', whose ids mean nothing here.
func hostTag() string {
	name, _ := os.Hostname()
	sum := sha256.Sum256([]byte(name))
	return hex.EncodeToString(sum[:3])
}

// processAlive reports whether a process of this id runs on this machine.
func processAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
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
