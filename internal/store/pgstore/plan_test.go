package pgstore

import (
	"strings"
	"testing"

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
	s := openNodes(t, 1)[0]
	a := createEndpoint(t, s, "c1")
	ingest(t, s, "c1", 3)

	t.Run("CandidatesProbeTheClaimIndex", func(t *testing.T) {
		t.Parallel()
		plan := explain(t, s, candidatesSQL, t0, 10, 10, []string{})
		require.Regexp(t, `(Index|Index Only|Bitmap Index) Scan (using|on) endpoint_queue_rank_idx`, plan,
			"endpoints are found by their due marks, not by walking every endpoint")
		require.Regexp(t, `(Index Scan using|Bitmap Index Scan on) endpoints_pkey[^\n]*\n\s+Index Cond: \(id = ANY \(\$0\)\)`, plan,
			"the endpoints are fetched by the ids of the due marks")
		require.Regexp(t, `Index (Only )?Scan using delivery_queue_claim_idx on delivery_queue d\s.*\n\s+`+
			`Index Cond: \(\(endpoint_id = e\.id\) AND \(kind = "\*VALUES\*"\.column1\) AND \(due_at <= `, plan)
		require.Contains(t, plan, "Index Scan using delivery_queue_fifo_idx")
		require.Contains(t, plan, "using delivery_queue_leased_idx")
		require.NotContains(t, plan, "on deliveries", "the claim path reads live deliveries only")
	})

	t.Run("TakeWalksTheClaimIndexPerKind", func(t *testing.T) {
		t.Parallel()
		plan := explain(t, s, takeSQL, t0, []string{a.ID}, []int32{2}, []int64{1}, []string{a.ID}, []int64{1})
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
		plan := explain(t, s, inFlightSQL, []string{a.ID}, t0, []int32{10})
		require.Contains(t, plan, "Index Only Scan using delivery_queue_leased_idx")
		require.NotContains(t, plan, "Bitmap", "a bitmap scan visits every dead entry on the heap")
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
		require.Regexp(t, `Index (Only )?Scan using deliveries_dead_idx`, plan)
		require.NotContains(t, plan, "Seq Scan")
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
