package pgstore

import (
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
)

// explain returns the plan PostgreSQL makes for q with args, with
// sequential scans priced out so that a tiny test table does not hide
// whether an index fits the query.
func explain(t *testing.T, s *Store, q string, args ...any) string {
	t.Helper()
	var plan []string
	err := pgx.BeginFunc(t.Context(), s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(t.Context(), "SET LOCAL enable_seqscan = off"); err != nil {
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
}
