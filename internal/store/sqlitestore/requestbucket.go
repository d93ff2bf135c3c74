package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/heraldhooks/herald/internal/ratelimit"
	"github.com/heraldhooks/herald/internal/store"
)

// RequestBucketTake takes tokens of the bucket p.Name as
// ratelimit.TakeUpTo decides, in one write transaction (one at a time). A
// missing row is a full bucket.
func (s *Store) RequestBucketTake(ctx context.Context, p *store.RequestBucketTakeParams) (store.RequestBucketTaken, error) {
	t := now(p.Now)
	var out store.RequestBucketTaken
	err := s.write(ctx, func(tx *sql.Tx) error {
		var b ratelimit.Bucket
		var at int64
		err := tx.QueryRowContext(ctx, `SELECT tokens, at FROM request_buckets WHERE name = ?`, p.Name).Scan(&b.Tokens, &at)
		switch {
		case errors.Is(err, sql.ErrNoRows):
		case err != nil:
			return err
		default:
			b.At = fromMicros(at)
		}
		next, got, wait := ratelimit.TakeUpTo(p.Rate, b, p.Want, t)
		out = store.RequestBucketTaken{Got: got, Wait: wait}
		if got == 0 {
			return nil
		}
		_, err = tx.ExecContext(ctx, `INSERT INTO request_buckets (name, tokens, at, full_at) VALUES (?, ?, ?, ?)
			ON CONFLICT (name) DO UPDATE SET tokens = excluded.tokens, at = excluded.at, full_at = excluded.full_at`,
			p.Name, next.Tokens, micros(next.At), micros(ratelimit.FullAt(p.Rate, next)))
		return err
	})
	if err != nil {
		return store.RequestBucketTaken{}, fmt.Errorf("take from request bucket: %w", err)
	}
	return out, nil
}

// RequestBucketPurge deletes up to p.Limit buckets full by Now.
func (s *Store) RequestBucketPurge(ctx context.Context, p *store.RequestBucketPurgeParams) (int, error) {
	var n int64
	err := s.write(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM request_buckets WHERE name IN (
			SELECT name FROM request_buckets WHERE full_at <= ? LIMIT ?)`, micros(now(p.Now)), p.Bound())
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("purge request buckets: %w", err)
	}
	return int(n), nil
}
