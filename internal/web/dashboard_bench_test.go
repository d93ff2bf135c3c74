package web_test

import (
	"crypto/sha256"
	"database/sql"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/heraldhooks/herald/internal/api"
	"github.com/heraldhooks/herald/internal/auth"
	"github.com/heraldhooks/herald/internal/store"
	"github.com/heraldhooks/herald/internal/store/sqlitestore"
	"github.com/heraldhooks/herald/internal/testdb"
	"github.com/heraldhooks/herald/internal/web"
	"github.com/heraldhooks/herald/internal/wire"
)

// Sizes of the dashboard benchmark's data: benchEndpoints endpoints over
// benchConsumers consumers (so every event fans out to
// benchEndpoints/benchConsumers endpoints), and by default
// benchDeliveries deliveries; HERALD_BENCH_DELIVERIES sets another
// number (HERALD_BENCH_DELIVERIES=10000000 for the 10 million of
// BENCHMARKS.md).
const (
	benchEndpoints  = 100_000
	benchConsumers  = 1_000
	benchDeliveries = 500_000
	// benchAttempts is how many attempts in the last hour each endpoint of
	// the endpoints table's first page has: more than store.FigureLimit.
	benchAttempts = 1_200
)

// BenchmarkDashboardPages renders each dashboard page, server side, as a signed-in
// operator, and each page of the consumer portal as consumer c0 (whose 100
// endpoints' deliveries are as many as any other's), on SQLite with 100,000 endpoints and benchDeliveries
// deliveries (or HERALD_BENCH_DELIVERIES), and a day of activity and of
// depth samples. Each page
// must answer in under 100 ms; the benchmark fails when one does not.
//
// The rows are written straight into the database (bulkFill), copied from
// an endpoint and an event made through the API, so that millions of them
// take minutes, not hours: of the deliveries, 97 % delivered, 1.5 % dead,
// 0.5 % cancelled, 0.5 % pending and due, and 0.5 % pending for later;
// and the endpoints table's first page has benchAttempts attempts an
// endpoint in the last hour. Of the endpoints, 1 % (and the first page's)
// failed an attempt in the last hour, 0.1 % have an open breaker and
// 0.1 % are disabled (benchUnwell): what the order by health ranks.
func BenchmarkDashboardPages(b *testing.B) {
	ctx := b.Context()
	deliveries := benchSize(b)
	path := testdb.SQLitePath(b)
	st, err := sqlitestore.Open(ctx, path, nil)
	if err != nil {
		b.Fatal(err)
	}
	if err := st.Migrate(ctx); err != nil {
		b.Fatal(err)
	}
	ep, ev, dlv := seedTemplates(b, st)
	if err := st.Close(); err != nil {
		b.Fatal(err)
	}
	seeded := time.Now()
	events := deliveries / (benchEndpoints / benchConsumers)
	bulkFill(b, path, events)
	b.Logf("seeded %d endpoints, %d events, %d deliveries and a day of activity in %s", benchEndpoints, events,
		events*benchEndpoints/benchConsumers, time.Since(seeded).Round(time.Second))

	st, err = sqlitestore.Open(ctx, path, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	benchPages(b, st, ep, ev, dlv)
}

// benchSize is how many deliveries the benchmark makes: benchDeliveries,
// or HERALD_BENCH_DELIVERIES.
func benchSize(b *testing.B) int {
	b.Helper()
	v := os.Getenv("HERALD_BENCH_DELIVERIES")
	if v == "" {
		return benchDeliveries
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < benchEndpoints/benchConsumers {
		b.Fatalf("HERALD_BENCH_DELIVERIES=%q: want a number of deliveries, at least %d", v, benchEndpoints/benchConsumers)
	}
	return n
}

// seedTemplates makes, through the API, the endpoint and the event (with
// its delivery) that the bulk fill copies, and returns their ids.
func seedTemplates(b *testing.B, st store.Store) (endpoint, event, delivery string) {
	b.Helper()
	ctx := b.Context()
	srv := api.New(api.Config{Store: st, APIKeyHash: sha256.Sum256([]byte(operatorKey)), AllowPrivateNetworks: true})
	op := auth.Operator("")
	var ep wire.Endpoint
	if err := srv.Call(ctx, op, http.MethodPost, "/v1/endpoints", map[string]any{"consumer_id": "c0", "url": "http://127.0.0.1:9/hook/0"}, &ep); err != nil {
		b.Fatal(err)
	}
	var res wire.IngestResult
	if err := srv.Call(ctx, op, http.MethodPost, "/v1/events", map[string]any{"consumer_id": "c0", "event_type": "order.created",
		"payload": map[string]any{"n": 0, "note": strings.Repeat("x", 200)}}, &res); err != nil {
		b.Fatal(err)
	}
	return ep.ID, res.ID, res.Deliveries[0].ID
}

// benchPages signs in and renders each page of the dashboard over st.
func benchPages(b *testing.B, st store.Store, someEndpoint, someEvent, someDelivery string) {
	b.Helper()
	srv := api.New(api.Config{Store: st, APIKeyHash: sha256.Sum256([]byte(operatorKey)), AllowPrivateNetworks: true})
	ui := web.NewDashboard(web.DashboardConfig{API: srv, Sessions: st})
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodPost, "/ui/sign-in", strings.NewReader(url.Values{"api_key": {operatorKey}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	ui.ServeHTTP(rec, req)
	cookies := rec.Result().Cookies()
	if rec.Code != http.StatusSeeOther || len(cookies) == 0 {
		b.Fatalf("sign-in answered %d", rec.Code)
	}

	portal, portalCookie := benchPortal(b, srv, st)
	pages := []struct {
		name, path string
		handler    http.Handler
		cookie     *http.Cookie
	}{
		{"Overview", "/ui/", nil, nil},
		{"Endpoints", "/ui/endpoints", nil, nil},
		{"EndpointsOfAConsumer", "/ui/endpoints?consumer_id=c7", nil, nil},
		{"EndpointsByURL", "/ui/endpoints?sort=url", nil, nil},
		{"EndpointsByConsumerDescending", "/ui/endpoints?sort=-consumer", nil, nil},
		{"EndpointsOfAConsumerByURL", "/ui/endpoints?consumer_id=c7&sort=-url", nil, nil},
		{"EndpointsByHealth", "/ui/endpoints?sort=health", nil, nil},
		{"EndpointsByHealthBestFirst", "/ui/endpoints?sort=-health", nil, nil},
		{"EndpointsByDue", "/ui/endpoints?sort=due", nil, nil},
		{"EndpointsByDead", "/ui/endpoints?sort=-dead", nil, nil},
		{"EndpointsOfAConsumerByHealth", "/ui/endpoints?consumer_id=c7&sort=health", nil, nil},
		{"EndpointsOfAConsumerByDue", "/ui/endpoints?consumer_id=c7&sort=due", nil, nil},
		{"EndpointsOfAConsumerByDead", "/ui/endpoints?consumer_id=c7&sort=-dead", nil, nil},
		{"Endpoint", "/ui/endpoints/" + someEndpoint, nil, nil},
		{"Events", "/ui/events", nil, nil},
		{"EventsOfATypeAndConsumer", "/ui/events?event_type=order.created&consumer_id=c7", nil, nil},
		{"Event", "/ui/events/" + someEvent, nil, nil},
		{"DeadLetters", "/ui/dead", nil, nil},
		{"Delivery", "/ui/deliveries/" + someDelivery, nil, nil},
		{"PortalEndpoints", "/portal/", portal, portalCookie},
		{"PortalEndpoint", "/portal/endpoints/" + someEndpoint, portal, portalCookie},
		{"PortalLog", "/portal/deliveries", portal, portalCookie},
		{"PortalLogOfAnEndpoint", "/portal/deliveries?status=dead&endpoint_id=" + someEndpoint, portal, portalCookie},
		{"PortalDelivery", "/portal/deliveries/" + someDelivery, portal, portalCookie},
		{"PortalEvent", "/portal/events/" + someEvent, portal, portalCookie},
	}
	for _, page := range pages {
		h, cookie := http.Handler(ui), cookies[0]
		if page.handler != nil {
			h, cookie = page.handler, page.cookie
		}
		b.Run(page.name, func(b *testing.B) {
			var worst time.Duration
			for b.Loop() {
				req := httptest.NewRequest(http.MethodGet, page.path, nil)
				req.AddCookie(cookie)
				rec := httptest.NewRecorder()
				t0 := time.Now()
				h.ServeHTTP(rec, req)
				worst = max(worst, time.Since(t0))
				if rec.Code != http.StatusOK {
					b.Fatalf("%s answered %d: %s", page.path, rec.Code, rec.Body.String())
				}
			}
			b.ReportMetric(float64(worst.Microseconds())/1000, "worst-ms")
			if per := b.Elapsed() / time.Duration(b.N); per > 100*time.Millisecond {
				b.Errorf("%s takes %s a page; the dashboard's bound is 100 ms", page.path, per)
			}
		})
	}
}

// benchPortal is the consumer portal over srv and st, and the cookie of a
// portal session of consumer c0 (the consumer of the endpoint, event and
// delivery the pages show), opened through its one-time link.
func benchPortal(b *testing.B, srv *api.Server, st store.Store) (http.Handler, *http.Cookie) {
	b.Helper()
	portal := web.NewPortal(web.PortalConfig{Store: st, API: srv})
	var link struct {
		URL string `json:"url"`
	}
	if err := srv.Call(b.Context(), auth.Operator(""), http.MethodPost, "/v1/consumers/c0/portal-sessions", map[string]any{}, &link); err != nil {
		b.Fatal(err)
	}
	u, err := url.Parse(link.URL)
	if err != nil {
		b.Fatal(err)
	}
	rec := httptest.NewRecorder()
	portal.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, u.Path, nil))
	cookies := rec.Result().Cookies()
	if rec.Code != http.StatusSeeOther || len(cookies) == 0 {
		b.Fatalf("the portal link answered %d: %s", rec.Code, rec.Body.String())
	}
	return portal, cookies[0]
}

// bulkFill writes the benchmark's rows straight into the SQLite file at
// path (no store open on it): endpoints and events copied from the one of
// each made through the API (every column but the id, consumer and URL or
// creation time), one delivery per event and endpoint of its consumer,
// and a day and an hour of activity. The indexes of deliveries and events
// are dropped for the copy and made again after it, which sorts once
// instead of inserting ten million times into each.
func bulkFill(b *testing.B, path string, events int) {
	b.Helper()
	db, err := sql.Open("sqlite", path+"?_pragma=synchronous(OFF)&_pragma=cache_size(-1000000)&_pragma=temp_store(MEMORY)")
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	exec := func(q string, args ...any) {
		b.Helper()
		if _, err := db.Exec(q, args...); err != nil {
			b.Fatalf("%v\n%s", err, q)
		}
	}
	columns := func(table string) []string {
		rows, err := db.Query(`SELECT name FROM pragma_table_info(?)`, table)
		if err != nil {
			b.Fatal(err)
		}
		defer rows.Close()
		var out []string
		for rows.Next() {
			var c string
			if err := rows.Scan(&c); err != nil {
				b.Fatal(err)
			}
			out = append(out, c)
		}
		return out
	}
	// copyOf is a SELECT list that takes every column from the template
	// row t but those given.
	copyOf := func(table string, set map[string]string) (cols, values string) {
		var cs, vs []string
		for _, c := range columns(table) {
			cs = append(cs, c)
			if v, ok := set[c]; ok {
				vs = append(vs, v)
			} else {
				vs = append(vs, "t."+c)
			}
		}
		return strings.Join(cs, ", "), strings.Join(vs, ", ")
	}
	var indexes []string
	rows, err := db.Query(`SELECT sql FROM sqlite_master WHERE type = 'index' AND tbl_name IN ('deliveries', 'events') AND sql IS NOT NULL`)
	if err != nil {
		b.Fatal(err)
	}
	for rows.Next() {
		var q string
		if err := rows.Scan(&q); err != nil {
			b.Fatal(err)
		}
		indexes = append(indexes, q)
	}
	rows.Close()

	now := time.Now().UTC()
	nowUS := now.UnixMicro()
	const spanUS = int64(25 * 24 * time.Hour / time.Microsecond) // the events spread over 25 days
	exec(`BEGIN`)
	cols, vals := copyOf("endpoints", map[string]string{
		"id": "printf('ep_bench%07d', n.i)", "consumer_id": "printf('c%d', n.i % ?)", "url": "printf('http://127.0.0.1:9/hook/%d', n.i)",
	})
	exec(`WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?)
		INSERT INTO endpoints (`+cols+`) SELECT `+vals+` FROM n, (SELECT * FROM endpoints LIMIT 1) AS t`,
		benchEndpoints-1, benchConsumers)
	// benchUnwell: failed within the hour (1 %, and the first page), an
	// open breaker (0.1 %), disabled (0.1 %).
	exec(`UPDATE endpoints SET health = json_set(health, '$.last_failure_at', ? - (rowid % 3600) * 1000000,
			'$.consecutive_failures', 1)
		WHERE rowid % 100 = 0 OR id >= printf('ep_bench%07d', ? - 50)`, nowUS, benchEndpoints)
	exec(`UPDATE endpoints SET health = json_set(health, '$.breaker_state', 'open', '$.probe_at', ?,
			'$.last_failure_at', ?, '$.consecutive_failures', 5), blocked_until = ?
		WHERE rowid % 1000 = 1`, nowUS+300_000_000, nowUS-60_000_000, nowUS+300_000_000)
	exec(`UPDATE endpoints SET enabled = 0, disabled_reason = 'gone' WHERE rowid % 1000 = 2`)
	for _, q := range indexes {
		name := strings.Fields(q)[2]
		if strings.EqualFold(name, "INDEX") { // CREATE UNIQUE INDEX name
			name = strings.Fields(q)[3]
		}
		exec(`DROP INDEX ` + name)
	}
	cols, vals = copyOf("events", map[string]string{
		"id": "printf('evt_bench%09d', n.i)", "consumer_id": "printf('c%d', n.i % ?)",
		"created_at": "? - (? - n.i) * ? / ?", "idempotency_key": "NULL",
	})
	exec(`WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?)
		INSERT INTO events (`+cols+`) SELECT `+vals+` FROM n, (SELECT * FROM events LIMIT 1) AS t`,
		events-1, benchConsumers, nowUS, events, spanUS, events)
	// Each delivery takes its status from a hash of its event and
	// endpoint: r in [0, 1000).
	r := "((e.rowid * 7919 + p.rowid * 104729) % 1000)"
	cols, vals = copyOf("deliveries", map[string]string{
		"id":          "printf('dlv_bench%012d', e.rowid * 1000 + p.rowid / 1000)",
		"event_id":    "e.id",
		"endpoint_id": "p.id",
		"consumer_id": "e.consumer_id",
		"status": "CASE WHEN " + r + " < 970 THEN 'delivered' WHEN " + r + " < 985 THEN 'dead' WHEN " + r + " < 990 THEN 'cancelled' " +
			"ELSE 'pending' END",
		"attempt_count":    "CASE WHEN " + r + " < 990 THEN 1 ELSE 0 END",
		"due_at":           "CASE WHEN " + r + " < 990 THEN NULL WHEN " + r + " < 995 THEN e.created_at ELSE " + strconv.FormatInt(nowUS+int64(time.Hour/time.Microsecond), 10) + " END",
		"last_status_code": "CASE WHEN " + r + " < 970 THEN 200 WHEN " + r + " < 990 THEN 500 ELSE 0 END",
		"dead_reason":      "CASE WHEN " + r + " >= 970 AND " + r + " < 985 THEN 'exhausted' ELSE '' END",
		"created_at":       "e.created_at",
		"updated_at":       "e.created_at",
		"delivered_at":     "CASE WHEN " + r + " < 970 THEN e.created_at END",
		"seq":              "e.rowid * 1000 + p.rowid / 1000",
	})
	exec(`INSERT INTO deliveries (` + cols + `) SELECT ` + vals + `
		FROM (SELECT * FROM deliveries LIMIT 1) AS t
			CROSS JOIN events e
			CROSS JOIN endpoints p INDEXED BY endpoints_consumer
				ON p.consumer_id = e.consumer_id AND p.deleted_at IS NULL AND p.id LIKE 'ep_bench%'
		WHERE e.id LIKE 'evt_bench%'`)
	exec(`UPDATE sequences SET value = (SELECT max(seq) FROM deliveries) WHERE name = 'delivery_seq'`)
	// History, listed long ago: what the lister does, at once.
	exec(`INSERT INTO consumer_events (owner, item) SELECT owner, item FROM unlisted_events ORDER BY owner, item`)
	exec(`INSERT INTO endpoint_deliveries (owner, item) SELECT endpoint, item FROM unlisted_deliveries ORDER BY endpoint, item`)
	exec(`INSERT INTO consumer_deliveries (owner, item) SELECT consumer, item FROM unlisted_deliveries ORDER BY consumer, item`)
	exec(`DELETE FROM unlisted_events`)
	exec(`DELETE FROM unlisted_deliveries`)
	// The endpoints table's first page (the newest 50 endpoints) each with
	// benchAttempts attempts in the last hour, one in ten failed: past the
	// limit where its figures stop counting, the most a row can cost.
	exec(`WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < ? - 1)
		INSERT INTO attempts (id, delivery_id, endpoint_id, number, attempted_at, duration_ns, status_code, response, error)
		SELECT printf('att_bench%09d', n.i), 'dlv_bench', printf('ep_bench%07d', ? - 1 - n.i % 50), 1,
			? - (n.i * 3599000000 / ?), 50000000, CASE WHEN n.i % 10 = 0 THEN 500 ELSE 200 END, x'', '' FROM n`,
		50*benchAttempts, benchEndpoints, nowUS, 50*benchAttempts)
	for _, q := range indexes {
		exec(q)
	}
	// A day and an hour of activity, a row a minute, of a node sending
	// some 500 attempts a minute.
	exec(`WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 1500)
		INSERT INTO activity_minutes (minute, node, attempts, succeeded, failed, retries, exhausted, lat04, lat06, lat08, lat12)
		SELECT (? / 60 - n.i) * 60, '', 500 + n.i % 37, 480 + n.i % 37, 20, 15, 5, 100, 300 + n.i % 37, 90, 10 FROM n`, now.Unix())
	// And as long of the queue's depth, a sample a minute.
	exec(`WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 1500)
		INSERT INTO depth_minutes (minute, due_now, oldest_due_ms, dead)
		SELECT (? / 60 - n.i) * 60, 2500 + n.i % 97, 1000 * (n.i % 61), 7500 + n.i FROM n`, now.Unix())
	exec(`COMMIT`)
}
