package sqlitestore

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/heraldhooks/herald/internal/store"
)

// nextDueQuery reads the due index at now: the first live row due after
// it, one probe however many rows are due already or finished, and whether
// a live row is due at it (a leased row is due at its lease expiry), a
// probe of the index's start.
const nextDueQuery = `SELECT
	(SELECT min(due_at) FROM deliveries INDEXED BY deliveries_due
		WHERE status IN ` + liveStatuses + ` AND due_at > ?1),
	EXISTS (SELECT 1 FROM deliveries INDEXED BY deliveries_due
		WHERE status IN ` + liveStatuses + ` AND due_at <= ?1)`

// DeliveryNextDue implements store.Store.
func (s *Store) DeliveryNextDue(ctx context.Context, p *store.DeliveryNextDueParams) (store.NextDue, error) {
	t := now(p.Now)
	var (
		due sql.NullInt64
		out store.NextDue
	)
	if err := s.reader.QueryRowContext(ctx, nextDueQuery, micros(t)).Scan(&due, &out.DueNow); err != nil {
		return store.NextDue{}, fmt.Errorf("next due delivery: %w", err)
	}
	if due.Valid {
		out.Wait, out.Found = time.Duration(due.Int64-micros(t))*time.Microsecond, true
	}
	return out, nil
}
