package bench

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/heraldhooks/herald/internal/testdb"
)

func TestProbe(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("SQLiteCountsRowsAndFreePages", func(t *testing.T) {
		t.Parallel()
		path := testdb.SQLitePath(t)
		db, err := sql.Open("sqlite", path+"?_pragma=journal_mode(WAL)")
		require.NoError(t, err)
		t.Cleanup(func() { db.Close() })
		for _, q := range []string{
			`CREATE TABLE events (id INTEGER PRIMARY KEY, body BLOB)`,
			`CREATE TABLE deliveries (id INTEGER PRIMARY KEY)`,
			`CREATE TABLE settings (k TEXT)`, // not a hot table
			`INSERT INTO deliveries (id) VALUES (1), (2), (3)`,
			`WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 200)
			 INSERT INTO events (id, body) SELECT i, zeroblob(4000) FROM n`,
		} {
			_, err := db.Exec(q)
			require.NoError(t, err, q)
		}

		p, err := openProbe(ctx, "sqlite://"+path)
		require.NoError(t, err)
		t.Cleanup(func() { p.close() })
		st, err := p.tables(ctx)
		require.NoError(t, err)
		require.Equal(t, []TableRows{{Name: "deliveries", Rows: 3}, {Name: "events", Rows: 200}}, st.tables, "hot tables in their order, those that exist")
		require.Equal(t, int64(0), *st.freelist)

		_, err = db.Exec(`DELETE FROM events WHERE id > 10`)
		require.NoError(t, err)
		st, err = p.tables(ctx)
		require.NoError(t, err)
		require.Equal(t, int64(10), st.tables[1].Rows)
		require.Greater(t, *st.freelist, int64(100), "the deleted rows' pages are free")
		require.Greater(t, *st.pages, *st.freelist)

		_, err = p.lite.Exec(`DELETE FROM deliveries`)
		require.Error(t, err, "the file is opened read-only")
	})

	t.Run("PostgreSQLReadsLiveAndDeadRows", func(t *testing.T) {
		t.Parallel()
		url := testdb.PostgresURL(t)
		conn, err := pgx.Connect(ctx, url)
		require.NoError(t, err)
		t.Cleanup(func() { conn.Close(context.Background()) })
		for _, q := range []string{
			`CREATE TABLE deliveries (id bigint PRIMARY KEY)`,
			`CREATE TABLE endpoints (id bigint PRIMARY KEY)`,
			`INSERT INTO deliveries SELECT generate_series(1, 100)`,
			`DELETE FROM deliveries WHERE id > 60`,
			`SELECT pg_stat_force_next_flush()`, // this session's counts go out as it goes idle
		} {
			_, err := conn.Exec(ctx, q)
			require.NoError(t, err, q)
		}

		p, err := openProbe(ctx, url)
		require.NoError(t, err)
		t.Cleanup(func() { p.close() })
		require.True(t, p.forceFlush, "PostgreSQL 15 has pg_stat_force_next_flush")
		var st tableStats
		require.Eventually(t, func() bool {
			st, err = p.tables(ctx)
			require.NoError(t, err)
			return len(st.tables) == 2 && st.tables[0].Rows == 60
		}, 15*time.Second, 50*time.Millisecond, "the statistics reach pg_stat_user_tables: %+v", st.tables)
		require.Equal(t, "deliveries", st.tables[0].Name)
		require.Equal(t, int64(40), *st.tables[0].Dead)
		require.Equal(t, TableRows{Name: "endpoints", Rows: 0, Dead: ptr(int64(0))}, st.tables[1], "only this schema's tables")
		require.Nil(t, st.freelist)
	})

	t.Run("PostgreSQLBackendsCPU", func(t *testing.T) {
		t.Parallel()
		url := testdb.PostgresURL(t)
		// The other backend on this database: the connection the test
		// schema was made from is gone, so open one.
		other, err := pgx.Connect(ctx, url)
		require.NoError(t, err)
		t.Cleanup(func() { other.Close(context.Background()) })
		p, err := openProbe(ctx, url)
		require.NoError(t, err)
		t.Cleanup(func() { p.close() })

		u0, err := p.pgUsage(ctx)
		if err != nil && strings.Contains(err.Error(), "read CPU time") {
			t.Skipf("PostgreSQL's processes are not visible here: %v", err)
		}
		require.NoError(t, err)
		require.NotEmpty(t, u0.cpu, "the other connection's backend")
		for range 200 {
			_, err := other.Exec(ctx, `SELECT count(*) FROM generate_series(1, 20000)`)
			require.NoError(t, err)
		}
		_, err = other.Exec(ctx, `CREATE TABLE filler AS SELECT repeat('x', 1000) AS v FROM generate_series(1, 100)`)
		require.NoError(t, err)
		u1, err := p.pgUsage(ctx)
		require.NoError(t, err)
		require.Positive(t, u1.cpuSince(u0), "the other backend worked")
		require.GreaterOrEqual(t, u1.xacts, u0.xacts)
		require.Greater(t, u1.walSince(u0), int64(100*1000), "100 rows of 1,000 bytes went through the WAL")
	})
}

func TestPgUsageCPUSince(t *testing.T) {
	t.Parallel()
	u0 := pgUsage{cpu: map[int]time.Duration{1: time.Second, 2: 2 * time.Second, 3: time.Second}}
	u1 := pgUsage{cpu: map[int]time.Duration{1: 3 * time.Second, 2: 2 * time.Second, 4: 500 * time.Millisecond}}
	// 1 used 2 s, 2 nothing, 4 is new (all of its 0.5 s), 3 ended (not counted).
	require.Equal(t, 2500*time.Millisecond, u1.cpuSince(u0), fmt.Sprint(u1))
}

func TestParseLSN(t *testing.T) {
	t.Parallel()
	for lsn, want := range map[string]uint64{"0/0": 0, "0/16B3748": 0x16B3748, "16/B374D848": 0x16<<32 | 0xB374D848, "FFFFFFFF/FFFFFFFF": 1<<64 - 1} {
		got, err := parseLSN(lsn)
		require.NoError(t, err, lsn)
		require.Equal(t, want, got, lsn)
	}
	for _, bad := range []string{"", "16", "16/", "/1", "G/1", "1/100000000"} {
		_, err := parseLSN(bad)
		require.Error(t, err, bad)
	}
	require.Equal(t, int64(4096), pgUsage{wal: 1<<32 + 4096}.walSince(pgUsage{wal: 1 << 32}))
}
