package pgstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/heraldhooks/herald/internal/store"
)

// ConsumerNotificationsGet returns the consumer's notification settings,
// the zero settings when it has none.
func (s *Store) ConsumerNotificationsGet(ctx context.Context, consumerID string) (*store.ConsumerNotifications, error) {
	out := &store.ConsumerNotifications{ConsumerID: consumerID}
	err := s.pool.QueryRow(ctx, `SELECT email, updated_at FROM consumer_notifications WHERE consumer_id = $1`,
		consumerID).Scan(&out.Email, &out.UpdatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return out, nil
	}
	if err != nil {
		return nil, fmt.Errorf("get notifications of consumer %s: %w", consumerID, err)
	}
	out.UpdatedAt = out.UpdatedAt.UTC()
	return out, nil
}

// ConsumerNotificationsSet stores (or clears) the consumer's address; the
// time from p.Now or the database clock.
func (s *Store) ConsumerNotificationsSet(ctx context.Context, p *store.ConsumerNotificationsSetParams) (*store.ConsumerNotifications, error) {
	out := &store.ConsumerNotifications{ConsumerID: p.ConsumerID}
	err := s.pool.QueryRow(ctx, `INSERT INTO consumer_notifications (consumer_id, email, updated_at)
		VALUES ($1, $2, coalesce($3::timestamptz, now()))
		ON CONFLICT (consumer_id) DO UPDATE SET email = excluded.email, updated_at = excluded.updated_at
		RETURNING email, updated_at`, p.ConsumerID, p.Email, nowArg(p.Now)).Scan(&out.Email, &out.UpdatedAt)
	if err != nil {
		return nil, fmt.Errorf("set notifications of consumer %s: %w", p.ConsumerID, err)
	}
	out.UpdatedAt = out.UpdatedAt.UTC()
	return out, nil
}

// NoticeReserve moves the endpoint's last notice to Now (or the database
// clock) if the one before is at least p.Interval old, or there is none,
// in one conditional upsert: a second node asking at once waits for the
// first one's row, sees its new time, and is refused.
func (s *Store) NoticeReserve(ctx context.Context, p *store.NoticeReserveParams) (store.NoticeReservation, bool, error) {
	r := store.NoticeReservation{EndpointID: p.EndpointID}
	var prev *time.Time
	err := s.pool.QueryRow(ctx, `
		WITH prev AS (SELECT sent_at FROM endpoint_notices WHERE endpoint_id = $1)
		INSERT INTO endpoint_notices AS n (endpoint_id, sent_at)
		VALUES ($1, coalesce($2::timestamptz, now()))
		ON CONFLICT (endpoint_id) DO UPDATE SET sent_at = excluded.sent_at
			WHERE n.sent_at <= excluded.sent_at - $3::bigint * interval '1 microsecond'
		RETURNING n.sent_at, (SELECT sent_at FROM prev)`,
		p.EndpointID, nowArg(p.Now), micros(p.Interval)).Scan(&r.SentAt, &prev)
	if errors.Is(err, pgx.ErrNoRows) {
		return store.NoticeReservation{}, false, nil // mailed less than Interval ago
	}
	if err != nil {
		return store.NoticeReservation{}, false, fmt.Errorf("reserve notice of endpoint %s: %w", p.EndpointID, err)
	}
	r.SentAt = r.SentAt.UTC()
	if prev != nil {
		r.Previous = prev.UTC()
	}
	return r, true, nil
}

// NoticeRelease puts the endpoint's record back to r.Previous, if it is
// still r's.
func (s *Store) NoticeRelease(ctx context.Context, r store.NoticeReservation) error {
	var err error
	if r.Previous.IsZero() {
		_, err = s.pool.Exec(ctx, `DELETE FROM endpoint_notices WHERE endpoint_id = $1 AND sent_at = $2`, r.EndpointID, r.SentAt)
	} else {
		_, err = s.pool.Exec(ctx, `UPDATE endpoint_notices SET sent_at = $3 WHERE endpoint_id = $1 AND sent_at = $2`,
			r.EndpointID, r.SentAt, r.Previous)
	}
	if err != nil {
		return fmt.Errorf("release notice of endpoint %s: %w", r.EndpointID, err)
	}
	return nil
}
