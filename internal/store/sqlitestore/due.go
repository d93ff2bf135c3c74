package sqlitestore

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/heraldhooks/herald/internal/store"
)

// nextDueQuery reads the due index from now: the first live row due after
// it, one probe however many rows are due already or finished.
const nextDueQuery = `SELECT min(due_at) FROM deliveries INDEXED BY deliveries_due
	WHERE status IN ` + liveStatuses + ` AND due_at > ?`

// DeliveryNextDue implements store.Store.
func (s *Store) DeliveryNextDue(ctx context.Context, p *store.DeliveryNextDueParams) (time.Duration, bool, error) {
	t := now(p.Now)
	var due sql.NullInt64
	if err := s.reader.QueryRowContext(ctx, nextDueQuery, micros(t)).Scan(&due); err != nil {
		return 0, false, fmt.Errorf("next due delivery: %w", err)
	}
	if !due.Valid {
		return 0, false, nil
	}
	return time.Duration(due.Int64-micros(t)) * time.Microsecond, true, nil
}
