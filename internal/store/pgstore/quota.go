package pgstore

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/heraldhooks/herald/internal/store"
)

// ConsumerQuotaTake spends one of the consumer's quota of p.Kind as
// store.QuotaSpend decides, in one transaction that locks the consumer's
// row of that kind (made first if missing): a second node asking at once
// waits for the first one's commit and counts its take.
func (s *Store) ConsumerQuotaTake(ctx context.Context, p *store.ConsumerQuotaTakeParams) (store.QuotaTaken, error) {
	var out store.QuotaTaken
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO consumer_quotas (consumer_id, kind, spent) VALUES ($1, $2, '{}')
			ON CONFLICT (consumer_id, kind) DO NOTHING`, p.ConsumerID, p.Kind); err != nil {
			return err
		}
		var spent []time.Time
		var now time.Time
		if err := tx.QueryRow(ctx, `SELECT spent, coalesce($3::timestamptz, now()) FROM consumer_quotas
			WHERE consumer_id = $1 AND kind = $2 FOR UPDATE`, p.ConsumerID, p.Kind, nowArg(p.Now)).Scan(&spent, &now); err != nil {
			return err
		}
		for i := range spent {
			spent[i] = spent[i].UTC()
		}
		now = now.UTC().Truncate(time.Microsecond)
		kept, retryAt, ok := store.QuotaSpend(spent, p.Limit, p.Window, now)
		out = store.QuotaTaken{OK: ok, RetryAt: retryAt, Now: now}
		if !ok {
			return nil
		}
		_, err := tx.Exec(ctx, `UPDATE consumer_quotas SET spent = $3 WHERE consumer_id = $1 AND kind = $2`,
			p.ConsumerID, p.Kind, kept)
		return err
	})
	if err != nil {
		return store.QuotaTaken{}, fmt.Errorf("take %s quota of consumer %s: %w", p.Kind, p.ConsumerID, err)
	}
	return out, nil
}
