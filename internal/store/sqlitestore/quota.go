package sqlitestore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/heraldhooks/herald/internal/store"
)

// ConsumerQuotaTake spends one of the consumer's quota of p.Kind as
// store.QuotaSpend decides, in one write transaction (one at a time).
func (s *Store) ConsumerQuotaTake(ctx context.Context, p *store.ConsumerQuotaTakeParams) (store.QuotaTaken, error) {
	t := now(p.Now)
	var out store.QuotaTaken
	err := s.write(ctx, func(tx *sql.Tx) error {
		var raw string
		err := tx.QueryRowContext(ctx, `SELECT spent FROM consumer_quotas WHERE consumer_id = ? AND kind = ?`,
			p.ConsumerID, p.Kind).Scan(&raw)
		var stored []int64
		switch {
		case errors.Is(err, sql.ErrNoRows):
		case err != nil:
			return err
		default:
			if err := json.Unmarshal([]byte(raw), &stored); err != nil {
				return fmt.Errorf("read spent: %w", err)
			}
		}
		spent := make([]time.Time, len(stored))
		for i, us := range stored {
			spent[i] = fromMicros(us)
		}
		kept, retryAt, ok := store.QuotaSpend(spent, p.Limit, p.Window, t)
		out = store.QuotaTaken{OK: ok, RetryAt: retryAt, Now: t}
		if !ok {
			return nil
		}
		us := make([]int64, len(kept))
		for i, k := range kept {
			us[i] = micros(k)
		}
		b, err := json.Marshal(us)
		if err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `INSERT INTO consumer_quotas (consumer_id, kind, spent) VALUES (?, ?, ?)
			ON CONFLICT (consumer_id, kind) DO UPDATE SET spent = excluded.spent`, p.ConsumerID, p.Kind, string(b))
		return err
	})
	if err != nil {
		return store.QuotaTaken{}, fmt.Errorf("take %s quota of consumer %s: %w", p.Kind, p.ConsumerID, err)
	}
	return out, nil
}
