package pgstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/heraldhooks/herald/internal/store"
)

// nextDueSQL reads the live deliveries' due index (delivery_queue_due_idx)
// from now: the first due after it, one probe however many are due
// already. The wait is computed in the database, on its clock.
const nextDueSQL = `
	SELECT (extract(epoch FROM d.due_at - n.t) * 1000000)::bigint
	FROM (SELECT coalesce($1::timestamptz, now()) AS t) n
	CROSS JOIN LATERAL (
		SELECT due_at FROM delivery_queue
		WHERE due_at > n.t
		ORDER BY due_at LIMIT 1
	) d`

// DeliveryNextDue implements store.Store. Its one probe is the same plan
// whatever the table holds, so it runs on a generic plan, made once per
// connection (see inGenericTx): genericPlansSQL goes in the same batch,
// which is one round trip and one implicit transaction. (No rows is no
// error there: a batch that fails has its statements prepared again.)
func (s *Store) DeliveryNextDue(ctx context.Context, p *store.DeliveryNextDueParams) (time.Duration, bool, error) {
	var us int64
	if s.generic.BeginQuery == "" {
		err := s.pool.QueryRow(ctx, nextDueSQL, nowArg(p.Now)).Scan(&us)
		if errors.Is(err, pgx.ErrNoRows) {
			return 0, false, nil
		}
		if err != nil {
			return 0, false, fmt.Errorf("next due delivery: %w", err)
		}
		return time.Duration(us) * time.Microsecond, true, nil
	}
	found := false
	batch := &pgx.Batch{}
	batch.Queue(genericPlansSQL)
	batch.Queue(nextDueSQL, nowArg(p.Now)).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			found = true
			if err := rows.Scan(&us); err != nil {
				return err
			}
		}
		return rows.Err()
	})
	if err := s.pool.SendBatch(ctx, batch).Close(); err != nil {
		return 0, false, fmt.Errorf("next due delivery: %w", err)
	}
	return time.Duration(us) * time.Microsecond, found, nil
}
