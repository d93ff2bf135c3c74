package sqlitestore

import (
	"context"
	"fmt"
	"time"

	"github.com/heraldhooks/herald"
	"github.com/heraldhooks/herald/internal/store"
)

// AttemptList lists a delivery's attempts, oldest first.
func (s *Store) AttemptList(ctx context.Context, p *store.AttemptListParams) (*store.Page[*herald.Attempt], error) {
	limit := store.ClampLimit(p.Limit)
	w := &where{}
	w.add("delivery_id = ?", p.DeliveryID)
	if p.Cursor != "" {
		w.add("id > ?", p.Cursor)
	}
	rows, err := s.reader.QueryContext(ctx, `SELECT id, delivery_id, endpoint_id, number, attempted_at,
			duration_ns, status_code, response, error
		FROM attempts`+w.String()+` ORDER BY id LIMIT ?`, append(w.args, limit+1)...)
	if err != nil {
		return nil, fmt.Errorf("list attempts of %s: %w", p.DeliveryID, err)
	}
	defer rows.Close()
	var items []*herald.Attempt
	for rows.Next() {
		a := &herald.Attempt{}
		var attemptedAt, durationNS int64
		if err := rows.Scan(&a.ID, &a.DeliveryID, &a.EndpointID, &a.Number, &attemptedAt,
			&durationNS, &a.StatusCode, &a.Response, &a.Error); err != nil {
			return nil, fmt.Errorf("list attempts of %s: %w", p.DeliveryID, err)
		}
		a.AttemptedAt = fromMicros(attemptedAt)
		a.Duration = time.Duration(durationNS)
		items = append(items, a)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list attempts of %s: %w", p.DeliveryID, err)
	}
	return store.NewPage(items, limit, func(a *herald.Attempt) string { return a.ID }), nil
}
