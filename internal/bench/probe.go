package bench

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	_ "modernc.org/sqlite" // the SQLite file of a soak is read through database/sql
)

// hotTables are the tables a soak watches, those that exist: every
// ingest, claim and outcome writes them; and on SQLite the queues of rows
// not yet listed, which a lister that keeps up holds at a second's worth.
var hotTables = []string{"deliveries", "delivery_queue", "events", "attempts", "endpoints", "endpoint_queue", "unlisted_events", "unlisted_deliveries"}

// probeTimeout bounds one reading of the database.
const probeTimeout = 30 * time.Second

// probe reads the measured Herald's database directly, beside Herald: the
// rows of the hot tables for a soak, and on PostgreSQL the CPU time of
// the database's backends for --idle. It is opened only for those, and
// only when the bench knows the database (a spawned Herald's).
type probe struct {
	pg *pgx.Conn
	// forceFlush says PostgreSQL has pg_stat_force_next_flush() (15 on).
	forceFlush bool
	lite       *sql.DB
}

// TableRows is one hot table's size at the end of a soak row.
type TableRows struct {
	Name string `json:"name"`
	// Rows is n_live_tup on PostgreSQL, count(*) on SQLite.
	Rows int64 `json:"rows"`
	// Dead is n_dead_tup on PostgreSQL; SQLite has no per-table count
	// (see SoakRow.FreelistPages).
	Dead *int64 `json:"dead,omitempty"`
}

// tableStats is one reading of the hot tables.
type tableStats struct {
	tables []TableRows
	// freelist and pages are SQLite's PRAGMA freelist_count and
	// page_count.
	freelist, pages *int64
}

// openProbe connects to db (postgres://... or a SQLite path, with or
// without sqlite://), the SQLite file read-only.
// errNoPostgres: the run's database is not PostgreSQL, so there are no
// backends to read.
var errNoPostgres = errors.New("not on PostgreSQL")

// isPostgres reports whether db names a PostgreSQL database.
func isPostgres(db string) bool {
	return strings.HasPrefix(db, "postgres://") || strings.HasPrefix(db, "postgresql://")
}

func openProbe(ctx context.Context, db string) (*probe, error) {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	if isPostgres(db) {
		cfg, err := pgx.ParseConfig(db)
		if err != nil {
			return nil, fmt.Errorf("read the database: %w", err)
		}
		cfg.RuntimeParams["application_name"] = "herald-bench"
		conn, err := pgx.ConnectConfig(ctx, cfg)
		if err != nil {
			return nil, fmt.Errorf("read the database: connect: %w", err)
		}
		p := &probe{pg: conn}
		if err := conn.QueryRow(ctx, `SELECT to_regprocedure('pg_stat_force_next_flush()') IS NOT NULL`).Scan(&p.forceFlush); err != nil {
			conn.Close(ctx)
			return nil, fmt.Errorf("read the database: %w", err)
		}
		return p, nil
	}
	path := strings.TrimPrefix(db, "sqlite://")
	dsn := "file:" + (&url.URL{Path: path}).EscapedPath() + "?mode=ro&_pragma=busy_timeout(5000)"
	lite, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("read the database %s: %w", path, err)
	}
	lite.SetMaxOpenConns(1)
	if err := lite.PingContext(ctx); err != nil {
		lite.Close()
		return nil, fmt.Errorf("read the database %s: %w", path, err)
	}
	return &probe{lite: lite}, nil
}

func (p *probe) close() error {
	if p.pg != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return p.pg.Close(ctx)
	}
	return p.lite.Close()
}

// tables reads the hot tables. On PostgreSQL the counts are the
// statistics collector's, which every backend sends at most once a second
// and an idle one up to 10 s late; pg_stat_force_next_flush() (where there
// is one) sends this connection's own, and each query reads a fresh
// snapshot, being its own transaction.
func (p *probe) tables(ctx context.Context) (tableStats, error) {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	if p.pg != nil {
		return p.pgTables(ctx)
	}
	return p.liteTables(ctx)
}

func (p *probe) pgTables(ctx context.Context) (tableStats, error) {
	var st tableStats
	if p.forceFlush {
		if _, err := p.pg.Exec(ctx, `SELECT pg_stat_force_next_flush()`); err != nil {
			return st, fmt.Errorf("read table statistics: %w", err)
		}
	}
	rows, err := p.pg.Query(ctx, `
SELECT relname, n_live_tup, n_dead_tup FROM pg_stat_user_tables
WHERE schemaname = current_schema() AND relname = ANY($1)`, hotTables)
	if err != nil {
		return st, fmt.Errorf("read table statistics: %w", err)
	}
	byName := map[string]TableRows{}
	for rows.Next() {
		var t TableRows
		var dead int64
		if err := rows.Scan(&t.Name, &t.Rows, &dead); err != nil {
			rows.Close()
			return st, fmt.Errorf("read table statistics: %w", err)
		}
		t.Dead = ptr(dead)
		byName[t.Name] = t
	}
	if err := rows.Err(); err != nil {
		return st, fmt.Errorf("read table statistics: %w", err)
	}
	for _, name := range hotTables {
		if t, ok := byName[name]; ok {
			st.tables = append(st.tables, t)
		}
	}
	return st, nil
}

func (p *probe) liteTables(ctx context.Context) (tableStats, error) {
	var st tableStats
	have := map[string]bool{}
	rows, err := p.lite.QueryContext(ctx, `SELECT name FROM sqlite_master WHERE type = 'table'`)
	if err != nil {
		return st, fmt.Errorf("read the tables: %w", err)
	}
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			rows.Close()
			return st, fmt.Errorf("read the tables: %w", err)
		}
		have[name] = true
	}
	if err := rows.Err(); err != nil {
		return st, fmt.Errorf("read the tables: %w", err)
	}
	for _, name := range hotTables {
		if !have[name] {
			continue
		}
		t := TableRows{Name: name}
		// The names are the bench's own, from hotTables.
		if err := p.lite.QueryRowContext(ctx, `SELECT count(*) FROM "`+name+`"`).Scan(&t.Rows); err != nil {
			return st, fmt.Errorf("count %s: %w", name, err)
		}
		st.tables = append(st.tables, t)
	}
	var free, pages int64
	if err := p.lite.QueryRowContext(ctx, `PRAGMA freelist_count`).Scan(&free); err != nil {
		return st, fmt.Errorf("read the freelist: %w", err)
	}
	if err := p.lite.QueryRowContext(ctx, `PRAGMA page_count`).Scan(&pages); err != nil {
		return st, fmt.Errorf("read the page count: %w", err)
	}
	st.freelist, st.pages = ptr(free), ptr(pages)
	return st, nil
}

// pgUsage is what PostgreSQL's backends of the bench's database had used
// at one moment.
type pgUsage struct {
	cpu   map[int]time.Duration // by backend pid
	xacts int64                 // xact_commit + xact_rollback
	wal   uint64                // the server's WAL insert position, in bytes
}

// pgUsage reads the CPU time of every backend of this database but the
// probe's own (from /proc, so PostgreSQL must run on this machine, as
// the bench's loopback rule has it) and the transactions it has counted.
func (p *probe) pgUsage(ctx context.Context) (pgUsage, error) {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	u := pgUsage{cpu: map[int]time.Duration{}}
	var pids []int32
	err := p.pg.QueryRow(ctx, `
SELECT coalesce(array_agg(pid), '{}') FROM pg_stat_activity
WHERE datname = current_database() AND pid <> pg_backend_pid()`).Scan(&pids)
	if err != nil {
		return u, fmt.Errorf("list the database's backends: %w", err)
	}
	var lsn string
	if err := p.pg.QueryRow(ctx, `
SELECT xact_commit + xact_rollback, pg_current_wal_lsn()::text FROM pg_stat_database WHERE datname = current_database()`).Scan(&u.xacts, &lsn); err != nil {
		return u, fmt.Errorf("read the database's transactions and the WAL position: %w", err)
	}
	if u.wal, err = parseLSN(lsn); err != nil {
		return u, err
	}
	var readErr error
	for _, pid := range pids {
		d, err := procCPU(strconv.Itoa(int(pid)))
		if err != nil {
			readErr = err // gone since, or not on this machine
			continue
		}
		u.cpu[int(pid)] = d
	}
	if len(u.cpu) == 0 && readErr != nil {
		return u, fmt.Errorf("PostgreSQL's backends: %w", readErr)
	}
	return u, nil
}

// parseLSN reads a WAL position as PostgreSQL writes it (two hex halves,
// "16/B374D848") as a byte offset.
func parseLSN(lsn string) (uint64, error) {
	hi, lo, ok := strings.Cut(lsn, "/")
	h, err1 := strconv.ParseUint(hi, 16, 32)
	l, err2 := strconv.ParseUint(lo, 16, 32)
	if !ok || err1 != nil || err2 != nil {
		return 0, fmt.Errorf("read the WAL position %q: not an LSN", lsn)
	}
	return h<<32 | l, nil
}

// walSince is the WAL the server wrote between u0 and u, in bytes: every
// database's, so the bench's share only when nothing else writes.
func (u pgUsage) walSince(u0 pgUsage) int64 {
	return int64(u.wal - u0.wal)
}

// cpuSince is the CPU time the backends used between u0 and u: a backend
// in both counts its difference, one new since u0 all of its time. One
// that ended in between is not counted.
func (u pgUsage) cpuSince(u0 pgUsage) time.Duration {
	var d time.Duration
	for pid, c := range u.cpu {
		d += c - u0.cpu[pid]
	}
	return d
}
