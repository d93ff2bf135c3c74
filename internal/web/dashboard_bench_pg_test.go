package web_test

import (
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/heraldhooks/herald/internal/store/pgstore"
	"github.com/heraldhooks/herald/internal/store/pgstore/pgtest"
)

// BenchmarkDashboardPagesPostgres is BenchmarkDashboardPages on PostgreSQL: the same
// rows, filled the same way (pgFill), then vacuumed and analyzed as
// autovacuum would have done.
func BenchmarkDashboardPagesPostgres(b *testing.B) {
	ctx := b.Context()
	deliveries := benchSize(b)
	url := pgtest.URL(b)
	st, err := pgstore.Open(ctx, url, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	if err := st.Migrate(ctx); err != nil {
		b.Fatal(err)
	}
	ep, ev, dlv := seedTemplates(b, st)
	seeded := time.Now()
	events := deliveries / (benchEndpoints / benchConsumers)
	pgFill(b, url, events)
	b.Logf("seeded %d endpoints, %d events, %d deliveries and a day of activity in %s", benchEndpoints, events,
		events*benchEndpoints/benchConsumers, time.Since(seeded).Round(time.Second))
	benchPages(b, st, ep, ev, dlv)
}

// pgFill is bulkFill for PostgreSQL.
func pgFill(b *testing.B, url string, events int) {
	b.Helper()
	ctx := b.Context()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close(ctx)
	exec := func(q string, args ...any) {
		b.Helper()
		if _, err := conn.Exec(ctx, q, args...); err != nil {
			b.Fatalf("%v\n%s", err, q)
		}
	}
	copyOf := func(table string, set map[string]string) (cols, values string) {
		b.Helper()
		rows, err := conn.Query(ctx, `SELECT column_name FROM information_schema.columns
			WHERE table_schema = current_schema() AND table_name = $1 AND is_generated = 'NEVER' ORDER BY ordinal_position`, table)
		if err != nil {
			b.Fatal(err)
		}
		names, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			b.Fatal(err)
		}
		var vs []string
		for _, c := range names {
			if v, ok := set[c]; ok {
				vs = append(vs, v)
			} else {
				vs = append(vs, "t."+c)
			}
		}
		return strings.Join(names, ", "), strings.Join(vs, ", ")
	}
	rows, err := conn.Query(ctx, `SELECT i.indexname, i.indexdef FROM pg_indexes i
		WHERE i.schemaname = current_schema() AND i.tablename IN ('deliveries', 'events')
			AND NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conname = i.indexname)`)
	if err != nil {
		b.Fatal(err)
	}
	type index struct{ name, def string }
	indexes, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (index, error) {
		var i index
		return i, r.Scan(&i.name, &i.def)
	})
	if err != nil {
		b.Fatal(err)
	}

	cols, vals := copyOf("endpoints", map[string]string{
		"id": "format('ep_bench%s', lpad(n::text, 7, '0'))", "consumer_id": "'c' || (n % 1000)",
		"url": "'http://127.0.0.1:9/hook/' || n",
	})
	exec(`INSERT INTO endpoints (` + cols + `) SELECT ` + vals + ` FROM generate_series(1, 99999) AS n, (SELECT * FROM endpoints LIMIT 1) AS t`)
	// benchUnwell, as on SQLite.
	exec(`UPDATE endpoints SET health = health || jsonb_build_object(
			'last_failure_at', now() - (substr(id, 9)::int % 3600) * interval '1 second', 'consecutive_failures', 1)
		WHERE id LIKE 'ep_bench%' AND (substr(id, 9)::int % 100 = 0 OR substr(id, 9)::int >= 99950)`)
	exec(`UPDATE endpoints SET health = health || jsonb_build_object('breaker_state', 'open',
			'probe_at', now() + interval '5 minutes', 'last_failure_at', now() - interval '1 minute', 'consecutive_failures', 5),
			blocked_until = now() + interval '5 minutes'
		WHERE id LIKE 'ep_bench%' AND substr(id, 9)::int % 1000 = 1`)
	exec(`UPDATE endpoints SET enabled = false, disabled_reason = 'gone' WHERE id LIKE 'ep_bench%' AND substr(id, 9)::int % 1000 = 2`)
	for _, i := range indexes {
		exec(`DROP INDEX ` + i.name)
	}
	cols, vals = copyOf("events", map[string]string{
		"id": "format('evt_bench%s', lpad(n::text, 9, '0'))", "consumer_id": "'c' || (n % 1000)",
		"created_at": "now() - ($1::bigint - n) * interval '25 days' / $1::bigint", "idempotency_key": "NULL",
	})
	exec(`INSERT INTO events (`+cols+`) SELECT `+vals+` FROM generate_series(1, $1::bigint - 1) AS n, (SELECT * FROM events LIMIT 1) AS t`, events)
	// The same hash of event and endpoint as on SQLite picks the status.
	r := "((substr(e.id, 10)::bigint * 7919 + substr(p.id, 9)::bigint * 104729) % 1000)"
	cols, vals = copyOf("deliveries", map[string]string{
		"id":          "format('dlv_bench%s%s', substr(e.id, 10), substr(p.id, 9))",
		"event_id":    "e.id",
		"endpoint_id": "p.id",
		"consumer_id": "e.consumer_id",
		"status": "CASE WHEN " + r + " < 970 THEN 'delivered' WHEN " + r + " < 985 THEN 'dead' WHEN " + r + " < 990 THEN 'cancelled' " +
			"ELSE 'pending' END",
		"attempt_count":    "CASE WHEN " + r + " < 990 THEN 1 ELSE 0 END",
		"due_at":           "CASE WHEN " + r + " < 990 THEN NULL WHEN " + r + " < 995 THEN e.created_at ELSE now() + interval '1 hour' END",
		"last_status_code": "CASE WHEN " + r + " < 970 THEN 200 WHEN " + r + " < 990 THEN 500 ELSE 0 END",
		"dead_reason":      "CASE WHEN " + r + " >= 970 AND " + r + " < 985 THEN 'exhausted' ELSE '' END",
		"created_at":       "e.created_at",
		"updated_at":       "e.created_at",
		"delivered_at":     "CASE WHEN " + r + " < 970 THEN e.created_at END",
		"seq":              "nextval(pg_get_serial_sequence('deliveries', 'seq'))",
	})
	exec(`INSERT INTO deliveries (` + cols + `) SELECT ` + vals + `
		FROM events e JOIN endpoints p ON p.consumer_id = e.consumer_id AND p.id LIKE 'ep_bench%',
			(SELECT * FROM deliveries LIMIT 1) AS t
		WHERE e.id LIKE 'evt_bench%'`)
	for _, i := range indexes {
		exec(i.def)
	}
	exec(`INSERT INTO activity_minutes (minute, node, attempts, succeeded, failed, retries, exhausted, lat04, lat06, lat08, lat12)
		SELECT date_trunc('minute', now()) - n * interval '1 minute', 'bench', 500 + n % 37, 480 + n % 37, 20, 15, 5, 100, 300 + n % 37, 90, 10
		FROM generate_series(1, 1500) AS n`)
	exec(`INSERT INTO depth_minutes (minute, due_now, oldest_due_ms, dead)
		SELECT date_trunc('minute', now()) - n * interval '1 minute', 2500 + n % 97, 1000 * (n % 61), 7500 + n
		FROM generate_series(1, 1500) AS n`)
	exec(`VACUUM ANALYZE deliveries, events, endpoints, endpoint_queue, endpoint_dead, activity_minutes, depth_minutes`)
}
