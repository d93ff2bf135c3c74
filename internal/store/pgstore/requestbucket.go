package pgstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/heraldhooks/herald/internal/ratelimit"
	"github.com/heraldhooks/herald/internal/store"
)

// RequestBucketTake takes tokens of the bucket p.Name as
// ratelimit.TakeUpTo decides, in one transaction that locks the bucket's
// row: a second node taking at once waits for the first one's commit and
// counts its take. A missing row is a full bucket; two nodes making it at
// once cannot both count it full (the second insert finds the first one's
// row and the take starts again under its lock).
func (s *Store) RequestBucketTake(ctx context.Context, p *store.RequestBucketTakeParams) (store.RequestBucketTaken, error) {
	var out store.RequestBucketTaken
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		for range 3 {
			var b ratelimit.Bucket
			var now time.Time
			found := true
			err := tx.QueryRow(ctx, `SELECT tokens, at, coalesce($2::timestamptz, now()) FROM request_buckets
				WHERE name = $1 FOR UPDATE`, p.Name, nowArg(p.Now)).Scan(&b.Tokens, &b.At, &now)
			if errors.Is(err, pgx.ErrNoRows) {
				found = false
				err = tx.QueryRow(ctx, `SELECT coalesce($1::timestamptz, now())`, nowArg(p.Now)).Scan(&now)
			}
			if err != nil {
				return err
			}
			now = now.UTC().Truncate(time.Microsecond)
			b.At = b.At.UTC()
			next, got, wait := ratelimit.TakeUpTo(p.Rate, b, p.Want, now)
			out = store.RequestBucketTaken{Got: got, Wait: wait}
			if got == 0 {
				return nil
			}
			if found {
				_, err = tx.Exec(ctx, `UPDATE request_buckets SET tokens = $2, at = $3, full_at = $4 WHERE name = $1`,
					p.Name, next.Tokens, next.At, ratelimit.FullAt(p.Rate, next))
				return err
			}
			tag, err := tx.Exec(ctx, `INSERT INTO request_buckets (name, tokens, at, full_at) VALUES ($1, $2, $3, $4)
				ON CONFLICT (name) DO NOTHING`, p.Name, next.Tokens, next.At, ratelimit.FullAt(p.Rate, next))
			if err != nil || tag.RowsAffected() == 1 {
				return err
			}
		}
		return errors.New("the bucket's row came and went three times")
	})
	if err != nil {
		return store.RequestBucketTaken{}, fmt.Errorf("take from request bucket: %w", err)
	}
	return out, nil
}

// RequestBucketPurge deletes up to p.Limit buckets full by Now, skipping
// any a take holds.
func (s *Store) RequestBucketPurge(ctx context.Context, p *store.RequestBucketPurgeParams) (int, error) {
	tag, err := s.pool.Exec(ctx, `DELETE FROM request_buckets WHERE name IN (
		SELECT name FROM request_buckets WHERE full_at <= coalesce($1::timestamptz, now())
		LIMIT $2 FOR UPDATE SKIP LOCKED)`, nowArg(p.Now), p.Bound())
	if err != nil {
		return 0, fmt.Errorf("purge request buckets: %w", err)
	}
	return int(tag.RowsAffected()), nil
}
