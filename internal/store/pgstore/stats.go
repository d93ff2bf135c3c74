package pgstore

import (
	"context"
	"fmt"
	"time"

	"github.com/heraldhooks/herald"
	"github.com/heraldhooks/herald/internal/store"
)

// Stats counts deliveries by status and measures the due queue: the
// pending deliveries whose time has come, and how long the oldest of them
// has waited; of every consumer, or of p.ConsumerID alone.
func (s *Store) Stats(ctx context.Context, p *store.StatsParams) (*store.Stats, error) {
	st := store.NewStats()
	byStatus := "SELECT status, count(*) FROM deliveries GROUP BY status"
	dueArgs := []any{nowArg(p.Now)}
	var args []any
	consumer := ""
	if p.ConsumerID != "" {
		byStatus = "SELECT status, count(*) FROM deliveries WHERE consumer_id = $1 GROUP BY status"
		args = append(args, p.ConsumerID)
		dueArgs = append(dueArgs, p.ConsumerID)
		consumer = " AND d.consumer_id = $2"
	}
	if p.QueueOnly {
		st.ByStatus = nil
	} else if err := s.countByStatus(ctx, byStatus, args, st.ByStatus); err != nil {
		return nil, fmt.Errorf("stats: %w", err)
	}
	// The dead ones are the rows of dead_deliveries (migration 0018): no
	// other status is read.
	deadConsumer := ""
	if p.ConsumerID != "" {
		deadConsumer = " WHERE consumer_id = $1"
	}
	if err := s.pool.QueryRow(ctx, "SELECT count(*) FROM dead_deliveries"+deadConsumer, args...).
		Scan(&st.DeadLetters); err != nil {
		return nil, fmt.Errorf("stats: %w", err)
	}

	// The due ones are counted as the live deliveries due
	// (delivery_queue_due_idx) less the leases run out
	// (delivery_queue_leased_idx, as many entries as deliveries in
	// flight), so that the count reads those indexes alone; the oldest is
	// the first one not leased in due order. The live deliveries are the
	// rows of delivery_queue, the leased ones delivering.
	var now time.Time
	var oldest *time.Time
	err := s.pool.QueryRow(ctx, `
		SELECT n.t,
			(SELECT count(*) FROM delivery_queue d
				WHERE d.due_at <= n.t`+consumer+`)
			- (SELECT count(*) FROM delivery_queue d
				WHERE d.leased AND d.due_at <= n.t`+consumer+`),
			(SELECT min(d.due_at) FROM delivery_queue d
				WHERE NOT d.leased AND d.due_at <= n.t`+consumer+`),
			(SELECT count(*) FROM delivery_queue d WHERE NOT d.leased`+consumer+`),
			(SELECT count(*) FROM delivery_queue d WHERE d.leased`+consumer+`)
		FROM (SELECT coalesce($1::timestamptz, now()) AS t) AS n`, dueArgs...).
		Scan(&now, &st.DueNow, &oldest, &st.Pending, &st.Delivering)
	if err != nil {
		return nil, fmt.Errorf("stats: %w", err)
	}
	if oldest != nil && now.After(*oldest) {
		st.OldestDueAge = now.Sub(*oldest)
	}
	return st, nil
}

// countByStatus runs query (status, count) into byStatus.
func (s *Store) countByStatus(ctx context.Context, query string, args []any, byStatus map[herald.Status]int64) error {
	rows, err := s.pool.Query(ctx, query, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var status string
		var n int64
		if err := rows.Scan(&status, &n); err != nil {
			return err
		}
		byStatus[herald.Status(status)] = n
	}
	return rows.Err()
}
