package sqlitestore

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/heraldhooks/herald/internal/store"
)

// tidyMoveQuery moves the marks of up to ?2 endpoints marked due at ?1, drawn
// at random, to their earliest live due time (two probes of
// deliveries_endpoint_queue, new deliveries and retries), or deletes them
// when nothing is live (the next statement). The write transaction holds
// SQLite's one writer, so no delivery becomes pending meanwhile.
const tidyMoveQuery = `
UPDATE endpoint_queue SET due_at = n.due_at
FROM (
	SELECT q.endpoint_id AS id, min(
		coalesce((SELECT d.due_at FROM deliveries d INDEXED BY deliveries_endpoint_queue
			WHERE d.endpoint_id = q.endpoint_id AND d.status IN ` + liveStatuses + `
				AND (d.attempt_count > 0) = 0
			ORDER BY d.due_at LIMIT 1), 9223372036854775807),
		coalesce((SELECT d.due_at FROM deliveries d INDEXED BY deliveries_endpoint_queue
			WHERE d.endpoint_id = q.endpoint_id AND d.status IN ` + liveStatuses + `
				AND (d.attempt_count > 0) = 1
			ORDER BY d.due_at LIMIT 1), 9223372036854775807)) AS due_at
	FROM (SELECT endpoint_id FROM endpoint_queue INDEXED BY endpoint_queue_rank
		WHERE due_at <= ?1 ORDER BY random() LIMIT CAST(?2 AS INTEGER)) AS q
) AS n
WHERE endpoint_queue.endpoint_id = n.id AND n.due_at > endpoint_queue.due_at`

// tidyDropQuery deletes the marks the move left at "never": endpoints with
// nothing live.
const tidyDropQuery = `DELETE FROM endpoint_queue WHERE due_at = 9223372036854775807`

// EndpointQueueTidy implements store.Store.
func (s *Store) EndpointQueueTidy(ctx context.Context, p *store.EndpointQueueTidyParams) (int, error) {
	if p.Limit <= 0 {
		return 0, nil
	}
	var n int64
	err := s.write(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, tidyMoveQuery, micros(now(p.Now)), p.Limit)
		if err != nil {
			return err
		}
		if n, err = res.RowsAffected(); err != nil || n == 0 {
			return err
		}
		_, err = tx.ExecContext(ctx, tidyDropQuery)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("tidy endpoint queue: %w", err)
	}
	return int(n), nil
}
