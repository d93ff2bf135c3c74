package pgstore

import (
	"context"
	"fmt"
	"strconv"

	"github.com/jackc/pgx/v5"

	"github.com/heraldhooks/herald"
	"github.com/heraldhooks/herald/internal/store"
)

// AttemptList lists a delivery's attempts, oldest first. A delivery with
// no attempts, or none at all, gives an empty page.
func (s *Store) AttemptList(ctx context.Context, p *store.AttemptListParams) (*store.Page[*herald.Attempt], error) {
	limit := store.ClampLimit(p.Limit)
	args := []any{p.DeliveryID}
	where := "delivery_id = $1"
	if p.Cursor != "" {
		args = append(args, p.Cursor)
		where += " AND id > $2"
	}
	args = append(args, limit+1)
	rows, err := s.pool.Query(ctx, "SELECT "+attemptCols+" FROM attempts WHERE "+where+
		" ORDER BY id LIMIT $"+strconv.Itoa(len(args)), args...)
	if err != nil {
		return nil, fmt.Errorf("list attempts of %s: %w", p.DeliveryID, err)
	}
	items, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (*herald.Attempt, error) {
		var r attemptRow
		if err := row.Scan(r.dest()...); err != nil {
			return nil, err
		}
		return r.attempt(), nil
	})
	if err != nil {
		return nil, fmt.Errorf("list attempts of %s: %w", p.DeliveryID, err)
	}
	return store.NewPage(items, limit, func(a *herald.Attempt) string { return a.ID }), nil
}
