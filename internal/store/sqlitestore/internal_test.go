package sqlitestore

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhooks/herald"
	"github.com/heraldhooks/herald/internal/store"
	"github.com/heraldhooks/herald/internal/testdb"
)

// migrated is an empty database with every migration applied, built once
// per test process and copied for each test that starts from it
// (testdb.SQLiteTemplate), as sqlitetest does for other packages' tests,
// which this package's own cannot import. Tests of migrations start from
// an empty file (testdb.SQLitePath) instead.
var migrated = testdb.NewSQLiteTemplate(testdb.Migrated(func(ctx context.Context, path string) (testdb.Migrator, error) {
	return Open(ctx, path, slog.New(slog.DiscardHandler))
}))

// openInternal opens a store on a copy of migrated, closed when t ends,
// applies before to it, and migrates it again, which finds nothing left
// to apply.
func openInternal(t *testing.T, before ...func(*Store)) *Store {
	t.Helper()
	s, err := Open(t.Context(), migrated.Path(t), slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	for _, f := range before {
		f(s) // before Migrate starts the lister
	}
	require.NoError(t, s.Migrate(t.Context()))
	return s
}

// pragma reads one pragma on one connection of db.
func pragma(t *testing.T, conn *sql.Conn, name string) string {
	t.Helper()
	var v string
	require.NoError(t, conn.QueryRowContext(t.Context(), "PRAGMA "+name).Scan(&v))
	return v
}

func TestEveryConnectionHasThePragmas(t *testing.T) {
	t.Parallel()
	s := openInternal(t)

	check := func(db *sql.DB, readOnly bool) {
		// Hold several connections at once so that more than one is opened.
		var conns []*sql.Conn
		n := 1
		if readOnly {
			n = 3
		}
		for range n {
			c, err := db.Conn(t.Context())
			require.NoError(t, err)
			conns = append(conns, c)
		}
		for _, c := range conns {
			require.Equal(t, "wal", pragma(t, c, "journal_mode"))
			require.Equal(t, "1", pragma(t, c, "foreign_keys"))
			require.Equal(t, "2", pragma(t, c, "synchronous"), "FULL")
			require.Equal(t, "10000", pragma(t, c, "busy_timeout"))
			if readOnly {
				require.Equal(t, "1", pragma(t, c, "query_only"))
			} else {
				require.Equal(t, "0", pragma(t, c, "query_only"))
				// The group commit's savepoints journal in memory.
				require.Equal(t, "2", pragma(t, c, "temp_store"), "MEMORY")
			}
			require.NoError(t, c.Close())
		}
	}
	check(s.writer, false)
	check(s.reader, true)
}

func TestReaderCannotWrite(t *testing.T) {
	t.Parallel()
	s := openInternal(t)
	_, err := s.reader.ExecContext(t.Context(), `INSERT INTO settings (key, value) VALUES ('k', 'v')`)
	require.Error(t, err)
}

func TestMigrationsAreRecorded(t *testing.T) {
	t.Parallel()
	s := openInternal(t)
	ms, err := migrations()
	require.NoError(t, err)
	require.NotEmpty(t, ms)
	require.Equal(t, 1, ms[0].Version)

	require.NoError(t, s.Migrate(t.Context()))
	rows, err := s.reader.QueryContext(t.Context(), `SELECT version, name FROM schema_migrations ORDER BY version`)
	require.NoError(t, err)
	defer rows.Close()
	var got []string
	for rows.Next() {
		var (
			v    int
			name string
		)
		require.NoError(t, rows.Scan(&v, &name))
		got = append(got, name)
	}
	require.NoError(t, rows.Err())
	var want []string
	for _, m := range ms {
		want = append(want, m.Name)
	}
	require.Equal(t, want, got, "each migration recorded once")
}

func TestConcurrentMigrateAppliesOnce(t *testing.T) {
	t.Parallel()
	path := testdb.SQLitePath(t)
	var stores []*Store
	for range 3 {
		s, err := Open(t.Context(), path, nil)
		require.NoError(t, err)
		t.Cleanup(func() { require.NoError(t, s.Close()) })
		stores = append(stores, s)
	}
	var wg sync.WaitGroup
	errs := make([]error, len(stores))
	for i, s := range stores {
		wg.Go(func() { errs[i] = s.Migrate(t.Context()) })
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
	var n int
	require.NoError(t, stores[0].reader.QueryRowContext(t.Context(), `SELECT count(*) FROM schema_migrations`).Scan(&n))
	ms, err := migrations()
	require.NoError(t, err)
	require.Equal(t, len(ms), n)
}

// queryPlan explains query, one line per step.
func queryPlan(t *testing.T, s *Store, query string, args ...any) string {
	t.Helper()
	rows, err := s.reader.QueryContext(t.Context(), "EXPLAIN QUERY PLAN "+query, args...)
	require.NoError(t, err)
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var (
			id, parent, unused int
			detail             string
		)
		require.NoError(t, rows.Scan(&id, &parent, &unused, &detail))
		plan = append(plan, detail)
	}
	require.NoError(t, rows.Err())
	return strings.Join(plan, "\n")
}

// requireNewestFirst checks the plan of a listing's read
// (listing.newestFirst): the owner's range of its listing (listed, "l
// USING PRIMARY KEY (owner=?"), walked in order, and the queue of
// unlisted rows, each row looked up by its id; never a walk of the rows
// or of another index of theirs (a status's, in id order, meets every
// row of the status). The listed part sorts only what it returns (at
// most its limit), never the rows its walk met; the queued part sorts
// its rows (a second's worth).
func requireNewestFirst(t *testing.T, plan, listed string) {
	t.Helper()
	require.Contains(t, plan, "SEARCH l USING PRIMARY KEY ("+listed, plan)
	require.Contains(t, plan, "SCAN q", plan)
	require.NotRegexp(t, `SCAN (events|deliveries)\b`, plan)
	require.NotRegexp(t, `INDEX \w+ \((\w+=\? AND )*\w+[<>]`, plan, "a range of another index")
	lines := strings.Split(plan, "\n")
	right := slices.Index(lines, "RIGHT")
	require.Positive(t, right, plan)
	for i, l := range lines[:right] {
		if strings.Contains(l, "TEMP B-TREE") {
			require.True(t, i > 0 && strings.HasPrefix(lines[i-1], "SCAN (subquery-"), "a sort of a listing's walk:\n%s", plan)
		}
	}
}

// ownerRange is the range of a listing a read walks: from the cursor, if
// there is one.
func ownerRange(cursor string) string {
	if cursor != "" {
		return "owner=? AND item<?)"
	}
	return "owner=?)"
}

func TestHotQueriesUseTheirIndexes(t *testing.T) {
	t.Parallel()
	s := openInternal(t)
	t.Run("Candidates", func(t *testing.T) {
		t.Parallel()
		plan := queryPlan(t, s, candidatesQuery, int64(0), 10)
		// Each due check is a range of the queue index, not a walk of the
		// endpoint's backlog.
		require.Contains(t, plan, "deliveries_endpoint_queue (endpoint_id=? AND <expr>=? AND due_at<?)")
		require.Contains(t, plan, "deliveries_endpoint_seq (endpoint_id=?)")
		require.Contains(t, plan, "deliveries_in_flight (endpoint_id=? AND due_at>?)")
	})
	t.Run("Take", func(t *testing.T) {
		t.Parallel()
		plan := queryPlan(t, s, takeQuery, "ep_x", 0, int64(0), 10)
		require.Contains(t, plan, "deliveries_endpoint_queue (endpoint_id=? AND <expr>=? AND due_at<?)")
		require.NotContains(t, plan, "TEMP B-TREE", "no sort: the index gives the order")
	})
	t.Run("Head", func(t *testing.T) {
		t.Parallel()
		plan := queryPlan(t, s, headQuery, "ep_x")
		require.Contains(t, plan, "deliveries_endpoint_seq (endpoint_id=?)")
		require.NotContains(t, plan, "TEMP B-TREE", "no sort: the index gives the order")
	})
	t.Run("NextDue", func(t *testing.T) {
		t.Parallel()
		// Both probes are ranges of the live rows' due index: finished
		// history is not in it.
		plan := queryPlan(t, s, nextDueQuery, int64(0))
		require.Contains(t, plan, "deliveries_due (due_at>?)")
		require.Contains(t, plan, "deliveries_due (due_at<?)")
	})
	t.Run("BreakerWindow", func(t *testing.T) {
		t.Parallel()
		plan := queryPlan(t, s, windowQuery, "ep_x", int64(0), int64(1))
		require.Contains(t, plan, "COVERING INDEX attempts_endpoint_status (endpoint_id=? AND attempted_at>? AND attempted_at<?)")
	})
	t.Run("DeliveryListOfAnEndpoint", func(t *testing.T) {
		t.Parallel()
		// An endpoint's deliveries are read from its own index, its dead
		// ones from the index of dead rows, never by a walk of every
		// delivery of a status (the consumer's portal asks both).
		for _, p := range []*store.DeliveryListParams{
			{EndpointID: "ep_x", ConsumerID: "c1", Status: herald.StatusDead},
			{EndpointID: "ep_x", Status: herald.StatusDead, Cursor: "dlv_x"},
		} {
			query, args := deliveryListQuery(p, 50)
			require.Contains(t, queryPlan(t, s, query, args...), "deliveries_dead (endpoint_id=?)")
		}
		for _, p := range []*store.DeliveryListParams{
			{EndpointID: "ep_x", ConsumerID: "c1", Status: herald.StatusDelivered},
			{EndpointID: "ep_x", Status: herald.StatusPending, Cursor: "dlv_x"},
			{EndpointID: "ep_x", ConsumerID: "c1", EventType: "order.created", Cursor: "dlv_x"},
		} {
			query, args := deliveryListQuery(p, 50)
			requireNewestFirst(t, queryPlan(t, s, query, args...), ownerRange(p.Cursor))
		}
	})
	t.Run("DeliveryListOfAConsumer", func(t *testing.T) {
		t.Parallel()
		for _, p := range []*store.DeliveryListParams{
			{ConsumerID: "c1"},
			{ConsumerID: "c1", Status: herald.StatusDelivered},
			{ConsumerID: "c1", Status: herald.StatusDead, Cursor: "dlv_x"},
		} {
			query, args := deliveryListQuery(p, 50)
			requireNewestFirst(t, queryPlan(t, s, query, args...), ownerRange(p.Cursor))
		}
	})
	t.Run("EventListOfAConsumer", func(t *testing.T) {
		t.Parallel()
		w := &where{}
		w.add("consumer_id = ?", "c1")
		w.add("event_type = ?", "order.created")
		query, args := eventsOfConsumer.newestFirst(eventColumns, "c1", w, "evt_x", 51)
		requireNewestFirst(t, queryPlan(t, s, query, args...), ownerRange("evt_x"))
	})
	t.Run("AllOfAConsumerOrEndpoint", func(t *testing.T) {
		t.Parallel()
		// Counts by status and replays read every row of their owner, and
		// only those: by rowid, from its listing and the queue of unlisted
		// rows, never a walk of the status index.
		plan := queryPlan(t, s, consumerCountsQuery, "c1", "c1")
		require.Contains(t, plan, "SEARCH l USING PRIMARY KEY (owner=?)")
		require.Contains(t, plan, "SCAN q")
		require.Contains(t, plan, "SEARCH deliveries USING INTEGER PRIMARY KEY (rowid=?)")
		require.NotContains(t, plan, "deliveries_status")
	})
	t.Run("EndpointFigures", func(t *testing.T) {
		t.Parallel()
		plan := queryPlan(t, s, figuresQuery, `["ep_x"]`, int64(0), store.FigureLimit)
		// Every figure is a range of an index, none a walk of the
		// endpoint's deliveries or of the attempts' rows.
		for _, want := range []string{
			"COVERING INDEX attempts_endpoint_status (endpoint_id=? AND attempted_at>? AND attempted_at<?)",
			"deliveries_in_flight (endpoint_id=? AND due_at>?)",
			"deliveries_endpoint_queue (endpoint_id=? AND <expr>=? AND due_at<?)",
			"deliveries_dead (endpoint_id=?)",
		} {
			require.Contains(t, plan, want)
		}
		require.NotContains(t, plan, "SCAN d")
		require.NotContains(t, plan, "SCAN a")
		require.NotContains(t, plan, "SCAN e")
	})
	t.Run("EndpointSorts", func(t *testing.T) {
		t.Parallel()
		for _, sort := range store.EndpointSorts() {
			if sort.Ranked() {
				continue // EndpointRankedSorts* look at theirs
			}
			for _, consumer := range []string{"", "c1"} {
				for _, cursor := range []string{"", store.EndpointCursor(sort, &herald.Endpoint{ID: "ep_x", ConsumerID: "c", URL: "u"})} {
					query, args, err := endpointListQuery(&store.EndpointListParams{ConsumerID: consumer, Sort: sort, Cursor: cursor}, 50)
					require.NoError(t, err)
					plan := queryPlan(t, s, query, args...)
					require.NotContains(t, plan, "TEMP B-TREE", "%s: the index gives the order", query)
					if key, _ := sort.Key(); key == "url" {
						require.Contains(t, plan, "endpoints_", query)
					}
				}
			}
		}
	})
}

func TestRankedSortsUseTheirIndexes(t *testing.T) {
	t.Parallel()
	s := openInternal(t)
	after := &store.Rank{ID: "ep_x", Value: 3}
	t0 := time.Unix(1_800_000_000, 0)
	for _, consumer := range []string{"", "c1"} {
		// index names the index a walk follows (with the consumer filter,
		// within the consumer's).
		index := func(all, within string) string {
			if consumer != "" {
				return within
			}
			return all
		}
		for _, cursor := range []bool{false, true} {
			for _, tc := range []struct {
				name, index string
				q           *query
			}{
				{"DeadHead", index("endpoint_dead_rank", "endpoint_dead_consumer"),
					deadHeadQuery(consumer, map[bool]*store.Rank{true: after}[cursor], 50)},
				{"DeadRest", index("sqlite_autoindex_endpoints_1", "endpoints_consumer"),
					deadRestQuery(consumer, map[bool]string{true: "ep_x"}[cursor], 50)},
				{"DueHead", "endpoint_queue_rank",
					dueHeadQuery(consumer, t0, map[bool]*store.Rank{true: after}[cursor], 50)},
				{"DueRest", index("sqlite_autoindex_endpoints_1", "endpoints_consumer"),
					dueRestQuery(consumer, t0, map[bool]string{true: "ep_x"}[cursor], 50)},
				{"HealthZero", index("endpoints_unwell", "endpoints_consumer_unwell"),
					healthZeroQuery(consumer, map[bool]string{true: "ep_x"}[cursor], cursor, 50)},
				{"HealthRest", index("sqlite_autoindex_endpoints_1", "endpoints_consumer"),
					healthRestQuery(consumer, t0, map[bool]string{true: "ep_x"}[cursor], cursor, 50)},
			} {
				plan := queryPlan(t, s, tc.q.sql.String(), tc.q.args...)
				require.Contains(t, plan, tc.index, "%s (consumer %q, cursor %t):\n%s", tc.name, consumer, cursor, plan)
				require.NotContains(t, plan, "TEMP B-TREE", "%s: the index gives the order:\n%s", tc.name, plan)
				require.NotRegexp(t, `(?m)SCAN (e|d|q)$`, plan, "%s: a walk of a whole table:\n%s", tc.name, plan)
			}
		}
		q := healthFailingQuery(consumer, t0)
		plan := queryPlan(t, s, q.sql.String(), q.args...)
		require.Contains(t, plan, "endpoints_failed", "the endpoints failed lately:\n%s", plan)
		require.Regexp(t, `endpoints_(consumer_)?unwell`, plan, "the half-open endpoints")
		require.Contains(t, plan, "attempts_endpoint_status", plan)
		require.NotRegexp(t, `(?m)SCAN (e|endpoints)( USING INDEX sqlite_autoindex_endpoints_1)?$`, plan, "a walk of every endpoint:\n%s", plan)
	}
}

func TestProtectionMigrationKeepsExistingRows(t *testing.T) {
	t.Parallel()
	s, err := Open(t.Context(), testdb.SQLitePath(t), nil)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })

	// A database at version 1, with an endpoint and three deliveries: two
	// made together, one earlier.
	ms, err := migrations()
	require.NoError(t, err)
	require.Equal(t, 1, ms[0].Version)
	ctx := t.Context()
	_, err = s.writer.ExecContext(ctx, `CREATE TABLE schema_migrations (
		version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL) STRICT`)
	require.NoError(t, err)
	_, err = s.writer.ExecContext(ctx, ms[0].SQL)
	require.NoError(t, err)
	_, err = s.writer.ExecContext(ctx, `INSERT INTO schema_migrations VALUES (1, ?, 0)`, ms[0].Name)
	require.NoError(t, err)
	_, err = s.writer.ExecContext(ctx, `INSERT INTO endpoints VALUES ('ep_1', 'c', 'https://x.example/', '', '["*"]',
		'whsec_x', '', NULL, 1, '', 0, 'null', 'null', 0, 'null', 0, 'standard', 'null', 0, 0, NULL)`)
	require.NoError(t, err)
	_, err = s.writer.ExecContext(ctx, `INSERT INTO events VALUES ('evt_1', 'c', 'order.created', x'7b7d', NULL, 0)`)
	require.NoError(t, err)
	for _, d := range []struct {
		id      string
		created int64
	}{{"dlv_b", 5}, {"dlv_c", 5}, {"dlv_a", 9}} {
		_, err = s.writer.ExecContext(ctx, `INSERT INTO deliveries VALUES (?, 'evt_1', 'ep_1', 'c', 'order.created',
			'pending', 0, 0, 0, 0, '', '', ?, ?, NULL)`, d.id, d.created, d.created)
		require.NoError(t, err)
	}

	require.NoError(t, s.Migrate(ctx))
	ep, err := s.EndpointGet(ctx, "ep_1")
	require.NoError(t, err)
	require.Equal(t, herald.NewEndpointHealth(), ep.Health)
	require.Equal(t, herald.OrderingNone, ep.Ordering)

	// Ingest order is creation order, then insertion order; new
	// deliveries follow.
	res, err := s.EventIngest(ctx, &store.EventIngestParams{Events: []store.EventIngestItem{{ConsumerID: "c", EventType: "order.created"}}})
	require.NoError(t, err)
	rows, err := s.reader.QueryContext(ctx, `SELECT id FROM deliveries ORDER BY seq`)
	require.NoError(t, err)
	defer rows.Close()
	var order []string
	for rows.Next() {
		var id string
		require.NoError(t, rows.Scan(&id))
		order = append(order, id)
	}
	require.NoError(t, rows.Err())
	require.Equal(t, []string{"dlv_b", "dlv_c", "dlv_a", res[0].Deliveries[0].ID}, order)

	// The rows kept are listed (migration 0020): the listings hold them,
	// and the lists find them beside the new, unlisted one.
	require.Equal(t, 3, count(t, s, `SELECT count(*) FROM endpoint_deliveries WHERE owner = 'ep_1'`))
	require.Equal(t, 1, count(t, s, `SELECT count(*) FROM consumer_events WHERE owner = 'c'`))
	for _, p := range []*store.DeliveryListParams{{EndpointID: "ep_1"}, {ConsumerID: "c"}} {
		page, err := s.DeliveryList(ctx, p)
		require.NoError(t, err)
		require.Len(t, page.Items, 4)
	}
	events, err := s.EventList(ctx, &store.EventListParams{ConsumerID: "c"})
	require.NoError(t, err)
	require.Len(t, events.Items, 2)
}

// TestConfirmationMigrationKeepsAddressesConfirmed: an address set before
// migration 0016 stays confirmed (at the time it was set), so an upgrade
// does not stop its mail; a cleared one confirms nothing.
func TestConfirmationMigrationKeepsAddressesConfirmed(t *testing.T) {
	t.Parallel()
	s, err := Open(t.Context(), testdb.SQLitePath(t), nil)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	ctx := t.Context()
	migrateBelow(t, s, 16)
	set := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	_, err = s.writer.ExecContext(ctx, `INSERT INTO consumer_notifications VALUES ('c', 'ops@example.com', ?), ('d', '', ?)`,
		set.UnixMicro(), set.UnixMicro())
	require.NoError(t, err)

	require.NoError(t, s.Migrate(ctx))
	c, err := s.NoticeAddressGet(ctx, "c")
	require.NoError(t, err)
	require.True(t, c.Confirmed())
	require.Equal(t, set, c.ConfirmedAt)
	require.True(t, c.ConfirmationSentAt.IsZero())
	d, err := s.NoticeAddressGet(ctx, "d")
	require.NoError(t, err)
	require.False(t, d.Confirmed())
	require.True(t, d.ConfirmedAt.IsZero())
}

// TestEndpointSortsMigrationCountsExistingRows checks what migration 0015
// makes of rows written before it: the dead deliveries are counted per
// endpoint, and a breaker opened before it ranks its endpoint first by
// health.
func TestEndpointSortsMigrationCountsExistingRows(t *testing.T) {
	t.Parallel()
	s, err := Open(t.Context(), testdb.SQLitePath(t), nil)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	ctx := t.Context()
	migrateBelow(t, s, 15)
	addLaterEndpointColumns(t, s)

	// a: three dead of c1's; b: one dead of c2's; c: c1's too, with a
	// pending delivery and its breaker open.
	var eps []*herald.Endpoint
	for i, consumer := range []string{"c1", "c2", "c1"} {
		ep, err := s.EndpointCreate(ctx, &store.EndpointCreateParams{Endpoint: &herald.Endpoint{
			ConsumerID: consumer, URL: "https://x.example/", EventTypes: []string{"*"}, Secret: "whsec_x",
			Enabled: true, SignatureScheme: herald.SchemeStandard,
		}, Now: time.Unix(int64(1_800_000_000+i), 0)})
		require.NoError(t, err)
		eps = append(eps, ep)
	}
	a, b, c := eps[0], eps[1], eps[2]
	_, err = s.writer.ExecContext(ctx, `INSERT INTO events (id, consumer_id, event_type, payload, created_at)
		VALUES ('evt_1', 'c1', 'order.created', x'7b7d', 0)`)
	require.NoError(t, err)
	for i, d := range []struct {
		ep     *herald.Endpoint
		status string
	}{
		{a, "dead"}, {a, "dead"}, {a, "dead"}, {b, "dead"}, {c, "pending"},
	} {
		_, err = s.writer.ExecContext(ctx, `INSERT INTO deliveries (id, event_id, endpoint_id, consumer_id, event_type,
				status, attempt_count, due_at, lease_token, last_status_code, last_error, dead_reason, created_at, updated_at)
			VALUES (?, 'evt_1', ?, ?, 'order.created', ?, 0, CASE WHEN ? = 'pending' THEN 0 END, 0, 0, '', '', 0, 0)`,
			fmt.Sprintf("dlv_%d", i), d.ep.ID, d.ep.ConsumerID, d.status, d.status)
		require.NoError(t, err)
	}
	_, err = s.writer.ExecContext(ctx, `UPDATE endpoints SET health = json_set(health, '$.breaker_state', 'open') WHERE id = ?`, c.ID)
	require.NoError(t, err)

	migrateRest(t, s)
	list := func(sort store.EndpointSort, consumer string) []string {
		t.Helper()
		page, err := s.EndpointList(ctx, &store.EndpointListParams{Sort: sort, ConsumerID: consumer})
		require.NoError(t, err)
		var ids []string
		for _, ep := range page.Items {
			ids = append(ids, ep.ID)
		}
		return ids
	}
	require.Equal(t, []string{a.ID, b.ID, c.ID}, list(store.EndpointSortDead, ""))
	require.Equal(t, []string{a.ID, c.ID}, list(store.EndpointSortDead, "c1"))
	require.Equal(t, []string{c.ID, a.ID, b.ID}, list(store.EndpointSortHealth, ""))

	// The counts go on from there: a replay takes one of a's.
	_, err = s.DeliveryReplay(ctx, &store.DeliveryReplayParams{ID: "dlv_0"})
	require.NoError(t, err)
	var dead int64
	require.NoError(t, s.reader.QueryRowContext(ctx, `SELECT dead FROM endpoint_dead WHERE endpoint_id = ?`, a.ID).Scan(&dead))
	require.EqualValues(t, 2, dead)
}

// migrateBelow applies the migrations before version to s, recording
// them as Migrate does, to set up a database as an older Herald left it.
func migrateBelow(t *testing.T, s *Store, version int) {
	t.Helper()
	ctx := t.Context()
	ms, err := migrations()
	require.NoError(t, err)
	_, err = s.writer.ExecContext(ctx, `CREATE TABLE schema_migrations (
		version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL) STRICT`)
	require.NoError(t, err)
	for _, m := range ms {
		if m.Version >= version {
			break
		}
		_, err = s.writer.ExecContext(ctx, m.SQL)
		require.NoError(t, err, m.Name)
		_, err = s.writer.ExecContext(ctx, `INSERT INTO schema_migrations VALUES (?, ?, 0)`, m.Version, m.Name)
		require.NoError(t, err)
	}
}

// addLaterEndpointColumns gives an old schema (migrateBelow) the columns
// of endpoints that later migrations add, which today's store writes and
// reads: a test that writes through the store on it calls this first, and
// migrateRest drops them before migrating.
func addLaterEndpointColumns(t *testing.T, s *Store) {
	t.Helper()
	for _, col := range laterEndpointColumns {
		_, err := s.writer.ExecContext(t.Context(), `ALTER TABLE endpoints ADD COLUMN `+col)
		require.NoError(t, err)
	}
	for _, col := range laterEventColumns {
		_, err := s.writer.ExecContext(t.Context(), `ALTER TABLE events ADD COLUMN `+col)
		require.NoError(t, err)
	}
	for _, col := range laterDeliveryColumns {
		_, err := s.writer.ExecContext(t.Context(), `ALTER TABLE deliveries ADD COLUMN `+col)
		require.NoError(t, err)
	}
}

// laterDeliveryColumns are the columns of deliveries added after the
// versions migrateBelow stops at, which today's store reads.
var laterDeliveryColumns = []string{
	"lease_losses INTEGER NOT NULL DEFAULT 0", // 0026
}

// laterEventColumns are the columns of events added after the versions
// migrateBelow stops at, which today's store reads.
var laterEventColumns = []string{
	"trace_context BLOB", // 0025
}

// laterEndpointColumns are the columns of endpoints added after the
// versions migrateBelow stops at, with their types and defaults.
var laterEndpointColumns = []string{
	"client_certificate TEXT NOT NULL DEFAULT ''",     // 0024
	"client_key TEXT NOT NULL DEFAULT ''",             // 0024
	"filter TEXT NOT NULL DEFAULT ''",                 // 0023
	"no_trace_propagation INTEGER NOT NULL DEFAULT 0", // 0025
}

// migrateRest drops the columns addLaterEndpointColumns added and applies the
// remaining migrations.
func migrateRest(t *testing.T, s *Store) {
	t.Helper()
	for _, col := range laterEndpointColumns {
		name, _, _ := strings.Cut(col, " ")
		_, err := s.writer.ExecContext(t.Context(), `ALTER TABLE endpoints DROP COLUMN `+name)
		require.NoError(t, err)
	}
	for _, col := range laterEventColumns {
		name, _, _ := strings.Cut(col, " ")
		_, err := s.writer.ExecContext(t.Context(), `ALTER TABLE events DROP COLUMN `+name)
		require.NoError(t, err)
	}
	for _, col := range laterDeliveryColumns {
		name, _, _ := strings.Cut(col, " ")
		_, err := s.writer.ExecContext(t.Context(), `ALTER TABLE deliveries DROP COLUMN `+name)
		require.NoError(t, err)
	}
	require.NoError(t, s.Migrate(t.Context()))
}
