package sqlitestore

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/heraldhooks/herald"
	"github.com/heraldhooks/herald/internal/store"
)

// Stats counts deliveries by status and measures the pending deliveries
// that are due at p.Now.
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

	rows, err := tx.QueryContext(ctx, `SELECT status, count(*) FROM deliveries GROUP BY status`)
	if err != nil {
		return nil, fmt.Errorf("stats: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			status string
			n      int64
		)
		if err := rows.Scan(&status, &n); err != nil {
			return nil, fmt.Errorf("stats: %w", err)
		}
		st.ByStatus[herald.Status(status)] = n
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("stats: %w", err)
	}

	// The due index holds only live rows, the due ones first: this reads
	// the due queue, not every pending retry.
	var oldest sql.NullInt64
	if err := tx.QueryRowContext(ctx, `SELECT count(*), min(due_at) FROM deliveries INDEXED BY deliveries_due
		WHERE status IN `+liveStatuses+` AND due_at <= ? AND status = 'pending'`, micros(t)).Scan(&st.DueNow, &oldest); err != nil {
		return nil, fmt.Errorf("stats: %w", err)
	}
	if oldest.Valid {
		st.OldestDueAge = max(0, t.Sub(fromMicros(oldest.Int64)))
	}
	return st, nil
}
