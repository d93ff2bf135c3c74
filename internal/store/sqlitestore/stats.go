package sqlitestore

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/heraldhooks/herald"
	"github.com/heraldhooks/herald/internal/store"
)

// Stats counts deliveries by status and measures the pending deliveries
// that are due at p.Now, of every consumer or of p.ConsumerID alone.
func (s *Store) Stats(ctx context.Context, p *store.StatsParams) (*store.Stats, error) {
	t := now(p.Now)
	st := &store.Stats{ByStatus: map[herald.Status]int64{
		herald.StatusPending:    0,
		herald.StatusDelivering: 0,
		herald.StatusDelivered:  0,
		herald.StatusDead:       0,
		herald.StatusCancelled:  0,
	}}
	// One read transaction, so the counts and the due queue agree.
	tx, err := s.reader.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, fmt.Errorf("stats: %w", err)
	}
	defer tx.Rollback()

	// One consumer's counts read its rows through deliveries_consumer.
	byStatus := `SELECT status, count(*) FROM deliveries GROUP BY status`
	var args []any
	consumer := ""
	if p.ConsumerID != "" {
		byStatus = `SELECT status, count(*) FROM deliveries WHERE consumer_id = ? GROUP BY status`
		args = append(args, p.ConsumerID)
		consumer = ` AND consumer_id = ?`
	}
	if p.QueueOnly {
		st.ByStatus = nil
	} else if err := countByStatus(ctx, tx, byStatus, args, st.ByStatus); err != nil {
		return nil, fmt.Errorf("stats: %w", err)
	}
	// The dead ones are a range of deliveries_status: no other status is
	// read.
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM deliveries INDEXED BY deliveries_status
		WHERE status = 'dead'`+consumer, args...).Scan(&st.DeadLetters); err != nil {
		return nil, fmt.Errorf("stats: %w", err)
	}

	// The due index holds only live rows, the due ones first: this reads
	// the due queue, not every pending retry (one consumer's figures are
	// those of its rows in the due queue).
	var oldest sql.NullInt64
	if err := tx.QueryRowContext(ctx, `SELECT count(*), min(due_at) FROM deliveries INDEXED BY deliveries_due
		WHERE status IN `+liveStatuses+` AND due_at <= ? AND status = 'pending'`+consumer,
		append([]any{micros(t)}, args...)...).Scan(&st.DueNow, &oldest); err != nil {
		return nil, fmt.Errorf("stats: %w", err)
	}
	if oldest.Valid {
		st.OldestDueAge = max(0, t.Sub(fromMicros(oldest.Int64)))
	}
	return st, nil
}

// countByStatus runs query (status, count) into byStatus.
func countByStatus(ctx context.Context, tx *sql.Tx, query string, args []any, byStatus map[herald.Status]int64) error {
	rows, err := tx.QueryContext(ctx, query, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var (
			status string
			n      int64
		)
		if err := rows.Scan(&status, &n); err != nil {
			return err
		}
		byStatus[herald.Status(status)] = n
	}
	return rows.Err()
}
