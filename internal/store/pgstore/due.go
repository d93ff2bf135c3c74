package pgstore

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/heraldhooks/herald/internal/store"
)

// nextDueSQL reads the live deliveries' due index (delivery_queue_due_idx)
// at now: the first row due after it, one probe however many are due
// already, and whether one is due at it (a leased row is due at its lease
// expiry, so only unleased or lost ones are), a probe of the index's start.
// The wait is computed in the database, on its clock; it is NULL when
// nothing is still to come.
const nextDueSQL = `
	SELECT (extract(epoch FROM d.due_at - n.t) * 1000000)::bigint,
		EXISTS (SELECT 1 FROM delivery_queue WHERE due_at <= n.t)
	FROM (SELECT coalesce($1::timestamptz, now()) AS t) n
	LEFT JOIN LATERAL (
		SELECT due_at FROM delivery_queue
		WHERE due_at > n.t
		ORDER BY due_at LIMIT 1
	) d ON true`

// DeliveryNextDue implements store.Store. Its probes are the same plan
// whatever the table holds, so it runs on a generic plan, made once per
// connection (see inGenericTx): genericPlansSQL goes in the same batch,
// which is one round trip and one implicit transaction.
func (s *Store) DeliveryNextDue(ctx context.Context, p *store.DeliveryNextDueParams) (store.NextDue, error) {
	var (
		us  *int64
		out store.NextDue
	)
	if s.generic.BeginQuery == "" {
		if err := s.pool.QueryRow(ctx, nextDueSQL, nowArg(p.Now)).Scan(&us, &out.DueNow); err != nil {
			return store.NextDue{}, fmt.Errorf("next due delivery: %w", err)
		}
	} else {
		batch := &pgx.Batch{}
		batch.Queue(genericPlansSQL)
		batch.Queue(nextDueSQL, nowArg(p.Now)).QueryRow(func(row pgx.Row) error {
			return row.Scan(&us, &out.DueNow)
		})
		if err := s.pool.SendBatch(ctx, batch).Close(); err != nil {
			return store.NextDue{}, fmt.Errorf("next due delivery: %w", err)
		}
	}
	if us != nil {
		out.Wait, out.Found = time.Duration(*us)*time.Microsecond, true
	}
	return out, nil
}
