package pgstore

import (
	"context"
	"log/slog"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/heraldhooks/herald"
	"github.com/heraldhooks/herald/internal/store"
)

// explain returns the plan PostgreSQL makes for q with args, with
// sequential scans priced out so that a tiny test table does not hide
// whether an index fits the query.
func explain(t *testing.T, s *Store, q string, args ...any) string {
	t.Helper()
	return explainWith(t, s, "SET LOCAL enable_seqscan = off", q, args...)
}

// explainOrdered is explain with sorts and bitmap scans priced out too: on
// a tiny table the planner would rather sort a handful of rows than walk
// an index in order, which is no sign of what it does with many.
func explainOrdered(t *testing.T, s *Store, q string, args ...any) string {
	t.Helper()
	return explainWith(t, s, "SET LOCAL enable_seqscan = off; SET LOCAL enable_sort = off; SET LOCAL enable_bitmapscan = off", q, args...)
}

func explainWith(t *testing.T, s *Store, set, q string, args ...any) string {
	t.Helper()
	var plan []string
	err := pgx.BeginFunc(t.Context(), s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(t.Context(), set); err != nil {
			return err
		}
		rows, err := tx.Query(t.Context(), "EXPLAIN "+q, args...)
		if err != nil {
			return err
		}
		plan, err = pgx.CollectRows(rows, pgx.RowTo[string])
		return err // EXPLAIN without ANALYZE runs nothing: committing is harmless
	})
	require.NoError(t, err)
	return strings.Join(plan, "\n")
}

// TestPlans checks that the hot statements walk the indexes made for them:
// a rewrite of a condition that no longer matches an index expression
// would turn a probe per endpoint into a scan of every delivery.
func TestPlans(t *testing.T) {
	t.Parallel()
	s := openPlanned(t)
	a := createEndpoint(t, s, "c1")
	ingest(t, s, "c1", 3)

	t.Run("CandidatesProbeTheClaimIndex", func(t *testing.T) {
		t.Parallel()
		plan := explain(t, s, candidatesSQL, t0, 10, 10, []string{})
		require.Regexp(t, `(Index|Index Only|Bitmap Index) Scan (using|on) endpoint_queue_rank_idx`, plan,
			"endpoints are found by their due marks, not by walking every endpoint")
		require.Regexp(t, `(Index Scan using|Bitmap Index Scan on) endpoints_pkey[^\n]*\n\s+Index Cond: \(id = ANY \(\$\d+\)\)`, plan,
			"the endpoints are fetched by the ids of the due marks")
		require.Regexp(t, `Index (Only )?Scan using delivery_queue_claim_idx on delivery_queue d\s.*\n\s+`+
			`Index Cond: \(\(endpoint_id = e\.id\) AND \(kind = "\*VALUES\*"\.column1\) AND \(due_at <= `, plan)
		require.Contains(t, plan, "Index Scan using delivery_queue_fifo_idx")
		require.Contains(t, plan, "using delivery_queue_leased_idx")
		require.NotContains(t, plan, "on deliveries", "the claim path reads live deliveries only")
	})

	t.Run("TakeWalksTheClaimIndexPerKind", func(t *testing.T) {
		t.Parallel()
		plan := explain(t, s, takeSQL, t0, []string{a.ID}, []int32{2}, []int64{1}, []string{a.ID}, []int64{1}, []int32{10})
		require.Regexp(t, `Index (Only )?Scan using delivery_queue_claim_idx on delivery_queue q\s.*\n\s+`+
			`Index Cond: \(\(endpoint_id = (c\.endpoint_id|\$\d+)\) AND \(kind = "\*VALUES\*"\.column1\) `+
			`AND \(due_at <= `, plan, "one range of the queue's index per endpoint and kind")
		require.Contains(t, plan, "Index Scan using delivery_queue_fifo_idx")
		require.Regexp(t, `(Index Scan using|Bitmap Index Scan on) deliveries_pkey[^\n]*\n\s+Index Cond: \(id = ANY \(`, plan,
			"deliveries are locked by the ids the queue gave")
		require.NotRegexp(t, `Seq Scan on deliveries|deliveries_(endpoint|status|consumer|event)_idx`, plan,
			"never a walk of an endpoint's history, nor of every live delivery")
	})

	t.Run("InFlightCountsUseTheLeasedIndex", func(t *testing.T) {
		t.Parallel()
		plan := explain(t, s, shardRoomBody(t, s), a.ID, 10, 1, t0)
		require.Regexp(t, `Index Only Scan using delivery_queue_leased_idx on delivery_queue l\s.*\n\s+`+
			`Index Cond: \(\(endpoint_id = '[^']+'::text\) AND \(shard = .*\) AND \(due_at > '[^']+'::timestamp with time zone\)\)`, plan,
			"a shard's leased deliveries, one range of the index")
		require.NotContains(t, plan, "Bitmap Index Scan on delivery_queue_leased_idx", "a bitmap scan visits every dead entry on the heap")
	})

	t.Run("WindowCountsUseTheAttemptIndexes", func(t *testing.T) {
		t.Parallel()
		plan := explain(t, s, windowSQL, []string{"dlv_x"}, t0, int64(600e6), 0.5, int64(20))
		require.Contains(t, plan, "attempts_failed_idx")
		require.Contains(t, plan, "attempts_endpoint_idx")
	})

	t.Run("EndpointFiguresWalkTheirIndexes", func(t *testing.T) {
		t.Parallel()
		plan := explain(t, s, figuresSQL, []string{a.ID}, t0, 10000)
		require.Regexp(t, `Index (Only )?Scan (Backward )?using attempts_endpoint_idx`, plan)
		require.Contains(t, plan, "using delivery_queue_leased_idx")
		require.Regexp(t, `Index (Only )?Scan using delivery_queue_claim_idx`, plan)
		require.Regexp(t, `(Index (Only )?Scan using|Bitmap Index Scan on) dead_deliveries_endpoint_idx`, plan)
		require.NotContains(t, plan, "Seq Scan")
	})

	t.Run("DeadAndLiveListsWalkTheirTables", func(t *testing.T) {
		t.Parallel()
		for _, st := range []herald.Status{herald.StatusDead, herald.StatusPending, herald.StatusDelivering} {
			for _, p := range []store.DeliveryListParams{
				{Status: st},
				{Status: st, EndpointID: a.ID},
				{Status: st, ConsumerID: "c1", Cursor: "dlv_x"},
			} {
				q, args := deliveryListQuery(&p, 50)
				plan := explainOrdered(t, s, q, args...)
				table := map[herald.Status]string{herald.StatusDead: "dead_deliveries"}[st]
				if table == "" {
					table = "delivery_queue"
				}
				require.Regexp(t, `Index (Only )?Scan (Backward )?using `+table+`_`, plan, "%+v: the page is a walk of %s", p, table)
				require.Regexp(t, `Index Scan using deliveries_pkey on deliveries [^\n]*\n\s+Index Cond: \(id = x.delivery_id\)`, plan,
					"%+v: deliveries read by id", p)
				require.NotContains(t, plan, "Seq Scan", "%+v", p)
			}
		}
	})

	t.Run("EndpointSortsWalkTheirIndexes", func(t *testing.T) {
		t.Parallel()
		for _, sort := range store.EndpointSorts() {
			if sort.Ranked() {
				continue // EndpointRankedSorts* look at theirs
			}
			for _, consumer := range []string{"", "c1"} {
				for _, cursor := range []string{"", store.EndpointCursor(sort, &herald.Endpoint{ID: "ep_x", ConsumerID: "c", URL: "u"})} {
					q, args, err := endpointListQuery(&store.EndpointListParams{ConsumerID: consumer, Sort: sort, Cursor: cursor}, 50)
					require.NoError(t, err)
					plan := explainOrdered(t, s, q, args...)
					require.NotContains(t, plan, "Sort", "%s: the index gives the order:\n%s", q, plan)
					require.NotContains(t, plan, "Seq Scan", q)
				}
			}
		}
	})

	t.Run("EndpointRankedSortsWalkTheirIndexes", func(t *testing.T) {
		t.Parallel()
		after := &store.Rank{ID: "ep_x", Value: 3}
		for _, consumer := range []string{"", "c1"} {
			// index names the index each walk follows (with the consumer
			// filter, within the consumer's).
			index := func(all, within string) string {
				if consumer != "" {
					return within
				}
				return all
			}
			for _, tc := range []struct {
				name, index string
				q           string
				args        args
			}{
				{"DeadHead", index("endpoint_dead_rank_idx", "endpoint_dead_consumer_idx"), "", nil},
				{"DeadRest", index("endpoints_pkey", "endpoints_consumer_idx"), "", nil},
				{"DueHead", "endpoint_queue_rank_idx", "", nil},
				{"DueRest", index("endpoints_pkey", "endpoints_consumer_idx"), "", nil},
				{"HealthZero", index("endpoints_unwell_idx", "endpoints_consumer_unwell_idx"), "", nil},
				{"HealthRest", index("endpoints_pkey", "endpoints_consumer_idx"), "", nil},
			} {
				for _, cursor := range []bool{false, true} {
					switch tc.name {
					case "DeadHead":
						tc.q, tc.args = deadHeadSQL(consumer, map[bool]*store.Rank{true: after}[cursor], 50)
					case "DeadRest":
						tc.q, tc.args = deadRestSQL(consumer, map[bool]string{true: "ep_x"}[cursor], 50)
					case "DueHead":
						tc.q, tc.args = dueHeadSQL(consumer, t0, map[bool]*store.Rank{true: after}[cursor], 50)
					case "DueRest":
						tc.q, tc.args = dueRestSQL(consumer, t0, map[bool]string{true: "ep_x"}[cursor], 50)
					case "HealthZero":
						tc.q, tc.args = healthZeroSQL(consumer, map[bool]string{true: "ep_x"}[cursor], cursor, 50)
					case "HealthRest":
						tc.q, tc.args = healthRestSQL(consumer, t0, map[bool]string{true: "ep_x"}[cursor], cursor, 50)
					}
					plan := explainOrdered(t, s, tc.q, tc.args...)
					require.Contains(t, plan, tc.index, "%s (consumer %q, cursor %t):\n%s", tc.name, consumer, cursor, plan)
					require.NotContains(t, plan, "Sort", "%s: the index gives the order:\n%s", tc.name, plan)
					require.NotContains(t, plan, "Seq Scan", "%s:\n%s", tc.name, plan)
					if strings.HasPrefix(tc.name, "Due") {
						require.Contains(t, plan, "delivery_queue_claim_idx", "%s: a probe of the endpoint's due deliveries", tc.name)
					}
				}
			}
			// The failing endpoints: the half-open ones and those failed
			// lately, each an index of its own (within a consumer of a
			// handful of endpoints, the planner may as well walk those).
			q, a := healthFailingSQL(consumer, t0)
			plan := explain(t, s, q, a...)
			if consumer == "" {
				require.Regexp(t, `endpoints_(consumer_)?unwell_idx`, plan, "the half-open endpoints")
				require.Contains(t, plan, "endpoints_failed_idx", "the endpoints failed lately:\n%s", plan)
			}
			require.Contains(t, plan, "attempts_endpoint_idx", "their last hour's attempts:\n%s", plan)
			require.NotContains(t, plan, "Seq Scan", plan)
		}
	})
}

// explainGeneric returns the generic plan PostgreSQL makes for q: the one
// a statement run in inGenericTx (or with genericPlansSQL) is made once
// and then kept, whatever its parameters.
// shardRoomBody is the query herald_shard_room runs, as the database
// holds it, its parameters by number.
func shardRoomBody(t *testing.T, s *Store) string {
	t.Helper()
	var body string
	require.NoError(t, s.pool.QueryRow(t.Context(),
		"SELECT prosrc FROM pg_proc WHERE proname = 'herald_shard_room' AND pronamespace = current_schema()::regnamespace").Scan(&body))
	return body
}

func explainGeneric(t *testing.T, s *Store, q string) string {
	t.Helper()
	conn, err := s.pool.Acquire(t.Context())
	require.NoError(t, err)
	defer conn.Release()
	_, err = conn.Exec(t.Context(), "PREPARE generic_probe AS "+q)
	require.NoError(t, err)
	defer func() {
		_, err := conn.Exec(context.WithoutCancel(t.Context()), "DEALLOCATE generic_probe")
		require.NoError(t, err)
	}()
	var params int
	require.NoError(t, conn.QueryRow(t.Context(),
		"SELECT cardinality(parameter_types) FROM pg_prepared_statements WHERE name = 'generic_probe'").Scan(&params))
	nulls := strings.TrimSuffix(strings.Repeat("NULL, ", params), ", ")
	var plan []string
	err = pgx.BeginFunc(t.Context(), conn, func(tx pgx.Tx) error {
		if _, err := tx.Exec(t.Context(), genericSettingsSQL); err != nil {
			return err
		}
		rows, err := tx.Query(t.Context(), "EXPLAIN EXECUTE generic_probe("+nulls+")")
		if err != nil {
			return err
		}
		plan, err = pgx.CollectRows(rows, pgx.RowTo[string])
		return err
	})
	require.NoError(t, err)
	return strings.Join(plan, "\n")
}

// fillLarge gives s's schema the tables of a busy installation: 10,000
// endpoints of 2,000 consumers, 100,000 events with a delivery and an
// attempt each (5% of the deliveries pending, 1% delivering, all of them
// in delivery_queue and every endpoint with a due mark), analyzed but for
// the queues, which autovacuum analyzes when it comes to them.
func fillLarge(t *testing.T, s *Store) {
	t.Helper()
	_, err := s.pool.Exec(t.Context(), `
INSERT INTO endpoints (id, consumer_id, url, description, secret, enabled, timeout_ns,
	retry_client_errors, max_in_flight, signature_scheme, created_at, updated_at)
SELECT 'ep_' || lpad(i::text, 8, '0'), 'c' || (i % 2000), 'https://example.com/' || i, '', 's', true, 1,
	false, 0, 'standard', now(), now()
FROM generate_series(1, 10000) i;
INSERT INTO events (id, consumer_id, event_type, payload, idempotency_key, created_at)
SELECT 'evt_' || lpad(i::text, 10, '0'), 'c' || (i % 2000), 'order.created', '\x'::bytea, 'k' || i, now()
FROM generate_series(1, 100000) i;
INSERT INTO deliveries (id, event_id, endpoint_id, consumer_id, event_type, status, due_at,
	lease_token, created_at, updated_at)
SELECT 'dlv_' || lpad(i::text, 10, '0'), 'evt_' || lpad(i::text, 10, '0'),
	'ep_' || lpad((i % 10000 + 1)::text, 8, '0'), 'c' || (i % 2000), 'order.created',
	CASE WHEN i % 100 = 0 THEN 'delivering' WHEN i % 20 = 0 THEN 'pending' ELSE 'delivered' END,
	CASE WHEN i % 20 = 0 THEN now() + i * interval '1 ms' END, 1, now(), now()
FROM generate_series(1, 100000) i;
INSERT INTO attempts (id, delivery_id, endpoint_id, number, attempted_at, duration_ns, status_code, error)
SELECT 'att_' || lpad(i::text, 10, '0'), 'dlv_' || lpad(i::text, 10, '0'),
	'ep_' || lpad((i % 10000 + 1)::text, 8, '0'), 1, now() - i * interval '1 s', 1,
	CASE WHEN i % 10 = 0 THEN 503 ELSE 200 END, ''
FROM generate_series(1, 100000) i;
ANALYZE endpoints, events, deliveries, attempts`)
	require.NoError(t, err)
}

// TestGenericPlans checks that every statement run on a generic plan
// (inGenericTx, DeliveryNextDue) finds its rows through an index, by key,
// both when the plan is made on a fresh schema, empty and never analyzed,
// and when the tables are large, before and after the queues are
// analyzed: a generic plan is made without the parameters' values and
// kept, so it must depend neither on them nor on how large the tables were
// when it was made. A statement that would read a whole table, or walk a
// whole index, fails here.
func TestGenericPlans(t *testing.T) {
	t.Parallel()
	s := openPlanned(t)
	// scan is how a statement reaches rows of table through index: an
	// index scan, or a bitmap scan of the index.
	scan := func(index, table string) string {
		return `(Index (Only )?Scan using ` + index + ` on ` + table + `|Bitmap Index Scan on ` + index + `)\s.*\n\s+Index Cond: `
	}
	cases := []struct {
		name  string
		q     string
		want  []string
		never []string
	}{
		// The claim's steps (claim.go).
		{"Candidates", candidatesSQL, []string{
			// The due marks, from now back.
			scan("endpoint_queue_rank_idx", "endpoint_queue q") + `\(due_at <= `,
			// Their endpoints, by id.
			scan("endpoints_pkey", "endpoints e") + `\(id = ANY \(`,
			// Per endpoint: a due delivery of each kind, the FIFO head,
			// the leased deliveries up to the cap.
			scan("delivery_queue_claim_idx", "delivery_queue d") + `\(\(endpoint_id = e\.id\) AND \(kind = "\*VALUES\*"\.column1\) AND \(due_at <= `,
			scan("delivery_queue_fifo_idx", "delivery_queue h") + `\(endpoint_id = e\.id\)`,
			scan("delivery_queue_leased_idx", "delivery_queue l") + `\(\(endpoint_id = e\.id\) AND \(due_at > `,
		}, []string{`on deliveries`, `on events`}},
		{"Take", takeSQL, []string{
			// Each endpoint's due deliveries of each kind, and its FIFO
			// head, from the queue.
			scan("delivery_queue_claim_idx", "delivery_queue q") + `\(\(endpoint_id = (c\.endpoint_id|\$\d+)\) AND \(kind = "\*VALUES\*"\.column1\) AND \(due_at <= `,
			scan("delivery_queue_fifo_idx", "delivery_queue q_1") + `\(endpoint_id = (c_1\.endpoint_id|\$\d+)\)`,
			// The deliveries locked and leased by the ids it gave.
			scan("deliveries_pkey", "deliveries d") + `\(id = ANY \(`,
			scan("deliveries_pkey", "deliveries d_1") + `\(id = `,
			scan("deliveries_pkey", "deliveries d_2") + `\(id = ANY \(`,
			// Their events, by id.
			scan("events_pkey", "events") + `\(id = l\.event_id\)`,
			// The room, counted by herald_take_shards (ShardRoom).
			`Function Scan on herald_take_shards`,
		}, []string{`deliveries_(endpoint|status|consumer|event|dead)_idx`}},
		// A shard's room (herald_shard_room, migration 0024): its leased
		// deliveries, up to its part of the cap.
		{"ShardRoom", shardRoomBody(t, s), []string{
			`Index Only Scan using delivery_queue_leased_idx on delivery_queue l\s.*\n\s+Index Cond: \(\(endpoint_id = \$1\) AND \(shard = .*\) AND \(due_at > \$4\)\)`,
		}, nil},
		{"WriteBack", writeBackSQL, []string{scan("endpoints_pkey", "endpoints e") + `\(id = u\.id\)`}, nil},
		// The outcome write, ingest and the next due time.
		{"LockOutcomeEndpoints", lockOutcomeEndpointsSQL, []string{
			scan("deliveries_pkey", "deliveries") + `\(id = ANY \(\$1\)\)`,
			scan("endpoints_pkey", "endpoints") + `\(id = deliveries\.endpoint_id\)`,
		}, nil},
		{"PlainSuccess", plainSuccessSQL, []string{
			scan("deliveries_pkey", "deliveries d") + `\(id = o\.id\)`,
			scan("endpoints_pkey", "endpoints e") + `\(id = `,
		}, nil},
		{"Complete", completeSQL, []string{
			// cur: each outcome's delivery by its id.
			scan("deliveries_pkey", "deliveries d") + `\(id = o_2\.id\)`,
			// upd: each outcome's delivery by its id, or (a plan made
			// on an empty table) among the delivering ones, as many as
			// are in flight whatever the table holds.
			`Index Scan using deliveries_(pkey|status_idx) on deliveries d_1\s.*\n\s+Index Cond: \((.*id = o_3\.id|status = 'delivering'::text)\)`,
		}, nil},
		{"Window", windowSQL, []string{
			scan("deliveries_pkey", "deliveries") + `\(id = ANY \(\$1\)\)`,
			`Index Only Scan using attempts_failed_idx on attempts x\s.*\n\s+Index Cond: \(\(endpoint_id = deliveries\.endpoint_id\)`,
			`Index Only Scan using attempts_endpoint_idx on attempts x_1\s.*\n\s+Index Cond: \(\(endpoint_id = deliveries\.endpoint_id\)`,
		}, nil},
		{"WriteHealth", writeHealthSQL, []string{scan("endpoints_pkey", "endpoints e") + `\(id = u\.id\)`}, nil},
		{"AddActivity", addActivitySQL, []string{`Conflict Arbiter Indexes: activity_minutes_pkey`}, nil},
		{"EnabledEndpoints", enabledEndpointsSQL, []string{
			scan(`endpoints_consumer\w*_idx`, "endpoints") + `\(consumer_id = ANY \(\$1\)\)`,
		}, nil},
		{"InsertEvents", insertEventsSQL, []string{`Conflict Arbiter Indexes: events_idempotency_idx`}, nil},
		{"InsertUnkeyedEvents", insertUnkeyedEventsSQL, []string{`Insert on events`}, []string{`Conflict`}},
		{"InsertDeliveries", insertDeliveriesSQL, []string{`Insert on deliveries`}, nil},
		{"DuplicateEvents", duplicateEventsSQL, []string{
			scan("events_idempotency_idx", "events x") + `\(\(consumer_id = k\.consumer_id\) AND \(idempotency_key = k\.key\)\)`,
		}, nil},
		{"DuplicateDeliveries", duplicateDeliveriesSQL, []string{
			scan("deliveries_event_idx", "deliveries") + `\(event_id = ANY \(\$1\)\)`,
		}, nil},
		{"NextDue", nextDueSQL, []string{
			`Limit\s.*\n\s+->  Index Only Scan using delivery_queue_due_idx on delivery_queue\s.*\n\s+Index Cond: \(due_at > `,
			`Index Only Scan using delivery_queue_due_idx on delivery_queue delivery_queue_1\s.*\n\s+Index Cond: \(due_at <= `,
		}, nil},
	}
	// An index scan without an Index Cond walks the whole index: a
	// sequential scan under another name.
	scanNode := regexp.MustCompile(`^\s*(->\s+)?(Index Scan|Index Only Scan|Bitmap Index Scan|Index Scan Backward|Index Only Scan Backward) `)
	check := func(t *testing.T) {
		for _, tc := range cases {
			plan := explainGeneric(t, s, tc.q)
			require.NotContains(t, plan, "Seq Scan", "%s:\n%s", tc.name, plan)
			for _, want := range tc.want {
				require.Regexp(t, want, plan, "%s:\n%s", tc.name, plan)
			}
			for _, never := range tc.never {
				require.NotRegexp(t, never, plan, "%s:\n%s", tc.name, plan)
			}
			lines := strings.Split(plan, "\n")
			for i, line := range lines {
				if scanNode.MatchString(line) {
					require.True(t, i+1 < len(lines) && strings.Contains(lines[i+1], "Index Cond: "),
						"%s: an index walked whole: %s\n%s", tc.name, line, plan)
				}
			}
		}
	}
	t.Run("Empty", check)
	fillLarge(t, s)
	t.Run("Large", check)
	_, err := s.pool.Exec(t.Context(), "ANALYZE delivery_queue, endpoint_queue")
	require.NoError(t, err)
	t.Run("LargeAnalyzed", check)
}

// TestGenericPlansStayInTheirStatements checks which plans the hot path's
// statements run on, on a store of one connection: ingest, the claim, the
// outcome write and the next due time on generic plans, made once and
// reused (the endpoint is rate-limited, so that every claim writes its
// token bucket back); and the connection's setting, custom plans, as it
// was after each. (PostgreSQL makes a generic plan once and counts each
// use of it.)
func TestGenericPlansStayInTheirStatements(t *testing.T) {
	t.Parallel()
	s, err := Open(t.Context(), migrated.FreshURL(t)+"&pool_max_conns=1", slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	require.NoError(t, s.Migrate(t.Context()))
	s.endpoints.ttl = time.Hour
	createEndpoint(t, s, "c1", func(e *herald.Endpoint) {
		e.RateLimit = &herald.RateLimit{PerSecond: 100, Burst: 100}
	})
	for range 3 {
		ingest(t, s, "c1", 2)
		claimed, err := s.DeliveryClaim(t.Context(), &store.DeliveryClaimParams{Limit: 10, Now: t0})
		require.NoError(t, err)
		require.Len(t, claimed, 2)
		outcomes := []store.DeliveryOutcome{delivered(claimed[0]), delivered(claimed[1])}
		_, err = s.DeliveryCompleteMany(t.Context(), &store.DeliveryCompleteManyParams{Outcomes: outcomes, Now: t0})
		require.NoError(t, err)
		_, err = s.DeliveryNextDue(t.Context(), &store.DeliveryNextDueParams{Now: t0})
		require.NoError(t, err)
	}
	var mode string
	require.NoError(t, s.pool.QueryRow(t.Context(), "SHOW plan_cache_mode").Scan(&mode))
	require.Equal(t, "force_custom_plan", mode)

	plans := func(q string) (generic, custom int64) {
		t.Helper()
		require.NoError(t, s.pool.QueryRow(t.Context(),
			"SELECT generic_plans, custom_plans FROM pg_prepared_statements WHERE statement = $1", q).Scan(&generic, &custom), q)
		return generic, custom
	}
	// The first ingest reads the endpoints, the others fan out from them
	// as remembered, and check them.
	for name, q := range map[string]string{
		"PlainSuccess": plainSuccessSQL, "CompletePlain": completePlainSQL,
		"InsertUnkeyedEvents": insertUnkeyedEventsSQL, "InsertDeliveries": insertDeliveriesSQL,
		"NextDue": nextDueSQL, "EnabledEndpointsWhole": enabledEndpointsWholeSQL,
		"IngestLock": ingestLockSQL, "IngestLockChecked": ingestLockCheckedSQL,
	} {
		want := int64(3)
		switch name {
		case "EnabledEndpointsWhole", "IngestLock":
			want = 1
		case "IngestLockChecked":
			want = 2
		}
		generic, custom := plans(q)
		require.Zero(t, custom, "%s: custom plans", name)
		require.Equal(t, want, generic, "%s: the generic plan, each time", name)
	}
	// Failures take the breaker's path, which locks the endpoints first.
	for range 3 {
		ingest(t, s, "c1", 1)
		claimed, err := s.DeliveryClaim(t.Context(), &store.DeliveryClaimParams{Limit: 10, Now: t0})
		require.NoError(t, err)
		require.Len(t, claimed, 1)
		failed := outcomeAt(claimed[0], herald.StatusPending, t0)
		failed.RetryIn = time.Hour
		_, err = s.DeliveryCompleteMany(t.Context(), &store.DeliveryCompleteManyParams{Outcomes: []store.DeliveryOutcome{failed}, Now: t0})
		require.NoError(t, err)
	}
	for name, q := range map[string]string{"LockOutcomeEndpoints": lockOutcomeEndpointsSQL, "Complete": completeSQL} {
		generic, custom := plans(q)
		require.Zero(t, custom, "%s: custom plans", name)
		require.Equal(t, int64(3), generic, "%s: the generic plan, each time", name)
	}
	// A claim may look for endpoints and take deliveries more than once.
	for name, q := range map[string]string{
		"Candidates": candidatesSQL, "Take": takeSQL, "WriteBack": writeBackSQL,
	} {
		generic, custom := plans(q)
		require.Zero(t, custom, "%s: custom plans", name)
		require.GreaterOrEqual(t, generic, int64(3), "%s: the generic plan, each time", name)
	}
}
