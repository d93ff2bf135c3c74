package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/heraldhooks/herald/internal/store"
)

// ConsumerNotificationsGet returns the consumer's notification settings,
// the zero settings when it has none.
func (s *Store) ConsumerNotificationsGet(ctx context.Context, consumerID string) (*store.ConsumerNotifications, error) {
	out := &store.ConsumerNotifications{ConsumerID: consumerID}
	var updated int64
	err := s.reader.QueryRowContext(ctx, `SELECT email, updated_at FROM consumer_notifications WHERE consumer_id = ?`,
		consumerID).Scan(&out.Email, &updated)
	if errors.Is(err, sql.ErrNoRows) {
		return out, nil
	}
	if err != nil {
		return nil, fmt.Errorf("get notifications of consumer %s: %w", consumerID, err)
	}
	out.UpdatedAt = fromMicros(updated)
	return out, nil
}

// ConsumerNotificationsSet stores (or clears) the consumer's address.
func (s *Store) ConsumerNotificationsSet(ctx context.Context, p *store.ConsumerNotificationsSetParams) (*store.ConsumerNotifications, error) {
	t := now(p.Now)
	err := s.write(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO consumer_notifications (consumer_id, email, updated_at) VALUES (?, ?, ?)
			ON CONFLICT (consumer_id) DO UPDATE SET email = excluded.email, updated_at = excluded.updated_at`,
			p.ConsumerID, p.Email, micros(t))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("set notifications of consumer %s: %w", p.ConsumerID, err)
	}
	return &store.ConsumerNotifications{ConsumerID: p.ConsumerID, Email: p.Email, UpdatedAt: t}, nil
}

// NoticeReserve moves the endpoint's last notice to Now if the one before
// is at least p.Interval old (or there is none). SQLite has one writer, so
// the read and the write in one transaction decide alone.
func (s *Store) NoticeReserve(ctx context.Context, p *store.NoticeReserveParams) (store.NoticeReservation, bool, error) {
	t := now(p.Now)
	r := store.NoticeReservation{EndpointID: p.EndpointID, SentAt: t}
	ok := false
	err := s.write(ctx, func(tx *sql.Tx) error {
		ok = false
		r.Previous = time.Time{}
		var prev int64
		err := tx.QueryRowContext(ctx, `SELECT sent_at FROM endpoint_notices WHERE endpoint_id = ?`, p.EndpointID).Scan(&prev)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			_, err = tx.ExecContext(ctx, `INSERT INTO endpoint_notices (endpoint_id, sent_at) VALUES (?, ?)`, p.EndpointID, micros(t))
			ok = err == nil
			return err
		case err != nil:
			return err
		}
		if fromMicros(prev).After(t.Add(-p.Interval)) {
			return nil // mailed less than Interval ago
		}
		r.Previous = fromMicros(prev)
		_, err = tx.ExecContext(ctx, `UPDATE endpoint_notices SET sent_at = ? WHERE endpoint_id = ?`, micros(t), p.EndpointID)
		ok = err == nil
		return err
	})
	if err != nil {
		return store.NoticeReservation{}, false, fmt.Errorf("reserve notice of endpoint %s: %w", p.EndpointID, err)
	}
	if !ok {
		return store.NoticeReservation{}, false, nil
	}
	return r, true, nil
}

// NoticeRelease puts the endpoint's record back to r.Previous, if it is
// still r's.
func (s *Store) NoticeRelease(ctx context.Context, r store.NoticeReservation) error {
	err := s.write(ctx, func(tx *sql.Tx) error {
		if r.Previous.IsZero() {
			_, err := tx.ExecContext(ctx, `DELETE FROM endpoint_notices WHERE endpoint_id = ? AND sent_at = ?`,
				r.EndpointID, micros(r.SentAt))
			return err
		}
		_, err := tx.ExecContext(ctx, `UPDATE endpoint_notices SET sent_at = ? WHERE endpoint_id = ? AND sent_at = ?`,
			micros(r.Previous), r.EndpointID, micros(r.SentAt))
		return err
	})
	if err != nil {
		return fmt.Errorf("release notice of endpoint %s: %w", r.EndpointID, err)
	}
	return nil
}
