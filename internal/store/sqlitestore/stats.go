package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/heraldhooks/herald"
	"github.com/heraldhooks/herald/internal/store"
)

// Stats counts deliveries by status and measures the pending deliveries
// that are due at p.Now, of every consumer or of p.ConsumerID alone.
func (s *Store) Stats(ctx context.Context, p *store.StatsParams) (*store.Stats, error) {
	t := now(p.Now)
	st := store.NewStats()
	// One read transaction, so the counts and the due queue agree.
	tx, err := s.reader.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, fmt.Errorf("stats: %w", err)
	}
	defer tx.Rollback()

	byStatus, byStatusArgs := `SELECT status, count(*) FROM deliveries GROUP BY status`, []any(nil)
	var args []any
	consumer := ""
	if p.ConsumerID != "" {
		byStatus, byStatusArgs = consumerCountsQuery, []any{p.ConsumerID, p.ConsumerID}
		args = append(args, p.ConsumerID)
		consumer = ` AND consumer_id = ?`
	}
	if p.QueueOnly {
		st.ByStatus = nil
	} else if err := countByStatus(ctx, tx, byStatus, byStatusArgs, st.ByStatus); err != nil {
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
	// those of its rows in the due queue). Whether a row is pending or
	// leased is not in that index, so the due ones are counted as the live
	// rows due (the index alone: no row is read) less the leases run out
	// (the in-flight index, as many entries as deliveries in flight), and
	// the oldest is the first pending row in due order.
	var live, expired int64
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM deliveries INDEXED BY deliveries_due
		WHERE status IN `+liveStatuses+` AND due_at <= ?`+consumer,
		append([]any{micros(t)}, args...)...).Scan(&live); err != nil {
		return nil, fmt.Errorf("stats: %w", err)
	}
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM deliveries INDEXED BY deliveries_in_flight
		WHERE status = 'delivering' AND due_at <= ?`+consumer,
		append([]any{micros(t)}, args...)...).Scan(&expired); err != nil {
		return nil, fmt.Errorf("stats: %w", err)
	}
	st.DueNow = live - expired
	// Live rows are pending or leased: the due index holds them all, the
	// in-flight index the leased ones.
	if err := tx.QueryRowContext(ctx, `SELECT
		(SELECT count(*) FROM deliveries INDEXED BY deliveries_due
			WHERE status IN `+liveStatuses+consumer+`),
		(SELECT count(*) FROM deliveries INDEXED BY deliveries_in_flight
			WHERE status = 'delivering'`+consumer+`)`,
		append(append([]any(nil), args...), args...)...).Scan(&live, &st.Delivering); err != nil {
		return nil, fmt.Errorf("stats: %w", err)
	}
	st.Pending = live - st.Delivering
	var oldest sql.NullInt64
	err = tx.QueryRowContext(ctx, `SELECT due_at FROM deliveries INDEXED BY deliveries_due
		WHERE status IN `+liveStatuses+` AND due_at <= ? AND status = 'pending'`+consumer+` ORDER BY due_at LIMIT 1`,
		append([]any{micros(t)}, args...)...).Scan(&oldest)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("stats: %w", err)
	}
	if oldest.Valid {
		st.OldestDueAge = max(0, t.Sub(fromMicros(oldest.Int64)))
	}
	return st, nil
}

// consumerCountsQuery counts one consumer's deliveries by status, its rows
// read through its listing and the unlisted ones (listing.ownedRows).
var consumerCountsQuery = `SELECT status, count(*) FROM deliveries NOT INDEXED
	WHERE ` + deliveriesOfConsumer.ownedRows() + ` GROUP BY status`

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
