package pgstore

import (
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/heraldhooks/herald"
	"github.com/heraldhooks/herald/internal/store"
)

// TestDeliveryUpdatesAreHeapOnly: the claim and the outcome write update a
// delivery's row without a new entry in any index of deliveries (HOT), so
// neither leaves dead index entries for vacuum to find however much
// history the table holds (migration 0018). Both run here, with the
// store's own statements, in one transaction whose table statistics
// (pg_stat_xact_user_tables) count the updates and the heap-only ones.
// Each outcome kind is covered: delivered, a retry, dead.
func TestDeliveryUpdatesAreHeapOnly(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := openNodes(t, 1)[0]
	createEndpoint(t, s, "c1")
	ingest(t, s, "c1", 3)
	now := t0

	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		later := &pgx.Batch{}
		claimed, err := s.claim(ctx, tx, later, &store.DeliveryClaimParams{Limit: 10, LeaseMargin: time.Second, Now: now}, new([]herald.Notification))
		require.NoError(t, err)
		require.NoError(t, tx.SendBatch(ctx, later).Close())
		require.Len(t, claimed, 3)
		p := &store.DeliveryCompleteManyParams{Now: now}
		for i, c := range claimed {
			o := outcomeAt(c, []herald.Status{herald.StatusDelivered, herald.StatusPending, herald.StatusDead}[i], now)
			if o.Status == herald.StatusPending {
				o.RetryIn = time.Minute
			}
			p.Outcomes = append(p.Outcomes, o)
		}
		for _, w := range outcomeWaves(p.Outcomes) {
			if _, err := tx.Exec(ctx, completeSQL, outcomeArgs(p, w)...); err != nil {
				return err
			}
		}
		var statuses []string
		rows, err := tx.Query(ctx, "SELECT status FROM deliveries ORDER BY id")
		require.NoError(t, err)
		statuses, err = pgx.CollectRows(rows, pgx.RowTo[string])
		require.NoError(t, err)
		require.ElementsMatch(t, []string{"delivered", "pending", "dead"}, statuses, "the outcomes were applied")

		var updated, hot int64
		require.NoError(t, tx.QueryRow(ctx, `SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_xact_user_tables
			WHERE relid = 'deliveries'::regclass`).Scan(&updated, &hot))
		require.EqualValues(t, 6, updated, "three claims and three outcomes")
		require.Equal(t, updated, hot, "every update of deliveries is heap-only")
		return nil
	})
	require.NoError(t, err)
}

// TestDeliveriesIndexNothingUpdatesChange: no index of deliveries names a
// column that a claim, an outcome, a replay or a cancel changes, in its
// keys, its expressions or its predicate; an index that did would make
// every update of that column write all of them.
func TestDeliveriesIndexNothingUpdatesChange(t *testing.T) {
	t.Parallel()
	s := openNodes(t, 1)[0]
	rows, err := s.pool.Query(t.Context(), `
		SELECT i.indexrelid::regclass::text, a.attname
		FROM pg_index i
		JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum > 0 AND NOT a.attisdropped
		WHERE i.indrelid = 'deliveries'::regclass
			AND (a.attnum = ANY(i.indkey)
				OR pg_get_expr(i.indpred, i.indrelid) ~ ('\m' || a.attname || '\M')
				OR pg_get_expr(i.indexprs, i.indrelid) ~ ('\m' || a.attname || '\M'))`)
	require.NoError(t, err)
	type named struct{ Index, Column string }
	cols, err := pgx.CollectRows(rows, pgx.RowToStructByPos[named])
	require.NoError(t, err)
	require.NotEmpty(t, cols)
	fixed := map[string]bool{"id": true, "event_id": true, "endpoint_id": true, "consumer_id": true,
		"event_type": true, "created_at": true, "seq": true}
	for _, c := range cols {
		require.True(t, fixed[c.Column], "index %s names %s, which updates change", c.Index, c.Column)
	}
}
