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
		require.Regexp(t, `(Index|Index Only|Bitmap Index) Scan (using|on) endpoint_queue_due_idx`, plan,
			"endpoints are found by their due marks, not by walking every endpoint")
		require.Regexp(t, `(Index Scan using|Bitmap Index Scan on) endpoints_pkey[^\n]*\n\s+Index Cond: \(id = ANY \(\$0\)\)`, plan,
			"the endpoints are fetched by the ids of the due marks")
		require.Contains(t, plan, "Index Scan using deliveries_claim_idx")
		require.Contains(t, plan, "(LEAST(attempt_count, 1) = ")
		require.Contains(t, plan, "Index Scan using deliveries_fifo_idx")
		require.Contains(t, plan, "using deliveries_leased_idx")
	})

	t.Run("TakeWalksTheClaimIndexPerKind", func(t *testing.T) {
		t.Parallel()
		plan := explain(t, s, takeSQL, t0, []string{a.ID}, []int32{2}, []int64{1}, []string{a.ID}, []int64{1})
		require.Regexp(t, `Index Scan using deliveries_claim_idx on deliveries d .*\n\s+`+
			`Index Cond: \(\(endpoint_id = c\.endpoint_id\) AND \(LEAST\(attempt_count, 1\) = "\*VALUES\*"\.column1\) `+
			`AND \(due_at <= `, plan, "one range of the index per endpoint and kind")
		require.Contains(t, plan, "Index Scan using deliveries_fifo_idx")
		require.Contains(t, plan, "Index Scan using deliveries_pkey", "leased by id, not by a join over every delivery")
	})

	t.Run("InFlightCountsUseTheLeasedIndex", func(t *testing.T) {
		t.Parallel()
		plan := explain(t, s, inFlightSQL, []string{a.ID}, t0, []int32{10})
		require.Contains(t, plan, "Index Only Scan using deliveries_leased_idx")
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
		require.Contains(t, plan, "using deliveries_leased_idx")
		require.Regexp(t, `Index (Only )?Scan using deliveries_claim_idx`, plan)
		require.Regexp(t, `Index (Only )?Scan using deliveries_dead_idx`, plan)
		require.NotContains(t, plan, "Seq Scan")
	})

	t.Run("EndpointSortsWalkTheirIndexes", func(t *testing.T) {
		t.Parallel()
		for _, sort := range store.EndpointSorts() {
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
}
