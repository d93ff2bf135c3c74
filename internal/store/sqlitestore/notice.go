package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/heraldhooks/herald/internal/store"
)

// noticeAddressColumns are the columns scanNoticeAddress reads.
const noticeAddressColumns = `email, updated_at, confirmed_at, token_sent_at, token_expires_at`

// scanNoticeAddress reads a row of noticeAddressColumns into out.
func scanNoticeAddress(row interface{ Scan(...any) error }, out *store.NoticeAddress) error {
	var updated int64
	var confirmed, sent, expires sql.NullInt64
	if err := row.Scan(&out.Email, &updated, &confirmed, &sent, &expires); err != nil {
		return err
	}
	out.UpdatedAt = fromMicros(updated)
	out.ConfirmedAt = fromNull(confirmed)
	out.ConfirmationSentAt = fromNull(sent)
	out.ConfirmationExpiresAt = fromNull(expires)
	return nil
}

// fromNull reads an optional time, the zero time for NULL.
func fromNull(v sql.NullInt64) time.Time {
	if !v.Valid {
		return time.Time{}
	}
	return fromMicros(v.Int64)
}

// NoticeAddressGet returns the consumer's notice address,
// the zero settings when it has none.
func (s *Store) NoticeAddressGet(ctx context.Context, consumerID string) (*store.NoticeAddress, error) {
	out := &store.NoticeAddress{ConsumerID: consumerID}
	err := scanNoticeAddress(s.reader.QueryRowContext(ctx, `SELECT `+noticeAddressColumns+
		` FROM consumer_notifications WHERE consumer_id = ?`, consumerID), out)
	if errors.Is(err, sql.ErrNoRows) {
		return out, nil
	}
	if err != nil {
		return nil, fmt.Errorf("get notice address of consumer %s: %w", consumerID, err)
	}
	return out, nil
}

// getNoticeAddress reads the consumer's settings inside tx.
func getNoticeAddress(ctx context.Context, tx *sql.Tx, consumerID string) (*store.NoticeAddress, error) {
	out := &store.NoticeAddress{ConsumerID: consumerID}
	err := scanNoticeAddress(tx.QueryRowContext(ctx, `SELECT `+noticeAddressColumns+
		` FROM consumer_notifications WHERE consumer_id = ?`, consumerID), out)
	if errors.Is(err, sql.ErrNoRows) {
		return out, nil
	}
	return out, err
}

// NoticeAddressSet stores (or clears) the consumer's address: a
// new one starts pending (or confirmed), the same one keeps its state.
func (s *Store) NoticeAddressSet(ctx context.Context, p *store.NoticeAddressSetParams) (*store.NoticeAddress, error) {
	t := now(p.Now)
	var out *store.NoticeAddress
	err := s.write(ctx, func(tx *sql.Tx) error {
		var confirmed any
		if p.Confirmed && p.Email != "" {
			confirmed = micros(t)
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO consumer_notifications (consumer_id, email, updated_at, confirmed_at)
			VALUES (?, ?, ?, ?)
			ON CONFLICT (consumer_id) DO UPDATE SET
				email = excluded.email,
				updated_at = CASE WHEN email = excluded.email THEN updated_at ELSE excluded.updated_at END,
				confirmed_at = CASE WHEN email = excluded.email AND email <> '' THEN coalesce(confirmed_at, excluded.confirmed_at)
					ELSE excluded.confirmed_at END,
				token_hash = CASE WHEN email = excluded.email THEN token_hash END,
				token_sent_at = CASE WHEN email = excluded.email THEN token_sent_at END,
				token_expires_at = CASE WHEN email = excluded.email THEN token_expires_at END`,
			p.ConsumerID, p.Email, micros(t), confirmed)
		if err != nil {
			return err
		}
		out, err = getNoticeAddress(ctx, tx, p.ConsumerID)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("set notice address of consumer %s: %w", p.ConsumerID, err)
	}
	return out, nil
}

// NoticeAddressIssue records a confirmation token for a pending
// address, at most once per p.Every.
func (s *Store) NoticeAddressIssue(ctx context.Context, p *store.NoticeAddressIssueParams) (*store.NoticeAddress, bool, error) {
	t := now(p.Now)
	var out *store.NoticeAddress
	ok := false
	err := s.write(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE consumer_notifications
			SET token_hash = ?, token_sent_at = ?, token_expires_at = ?
			WHERE consumer_id = ? AND email = ? AND email <> '' AND confirmed_at IS NULL
				AND (token_sent_at IS NULL OR token_sent_at <= ?)`,
			p.TokenHash[:], micros(t), micros(t.Add(p.TTL)), p.ConsumerID, p.Email, micros(t.Add(-p.Every)))
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		if err != nil {
			return err
		}
		ok = n == 1
		out, err = getNoticeAddress(ctx, tx, p.ConsumerID)
		return err
	})
	if err != nil {
		return nil, false, fmt.Errorf("issue confirmation of consumer %s: %w", p.ConsumerID, err)
	}
	return out, ok, nil
}

// NoticeAddressUnissue withdraws the token of p.TokenHash, if it
// is still the consumer's.
func (s *Store) NoticeAddressUnissue(ctx context.Context, p *store.NoticeAddressUnissueParams) error {
	err := s.write(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `UPDATE consumer_notifications
			SET token_hash = NULL, token_sent_at = NULL, token_expires_at = NULL
			WHERE consumer_id = ? AND token_hash = ? AND confirmed_at IS NULL`, p.ConsumerID, p.TokenHash[:])
		return err
	})
	if err != nil {
		return fmt.Errorf("withdraw confirmation of consumer %s: %w", p.ConsumerID, err)
	}
	return nil
}

// NoticeAddressConfirm confirms the address whose live token has
// p.TokenHash.
func (s *Store) NoticeAddressConfirm(ctx context.Context, p *store.NoticeAddressConfirmParams) (*store.NoticeAddress, error) {
	t := now(p.Now)
	var out *store.NoticeAddress
	err := s.write(ctx, func(tx *sql.Tx) error {
		var confirmed, expires sql.NullInt64
		err := tx.QueryRowContext(ctx, `SELECT confirmed_at, token_expires_at FROM consumer_notifications
			WHERE consumer_id = ? AND token_hash = ? AND email <> ''`, p.ConsumerID, p.TokenHash[:]).Scan(&confirmed, &expires)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			return store.ErrNotFound
		case err != nil:
			return err
		case confirmed.Valid:
			return store.ErrConfirmationUsed
		case !expires.Valid || expires.Int64 <= micros(t):
			return store.ErrConfirmationExpired
		}
		if _, err := tx.ExecContext(ctx, `UPDATE consumer_notifications SET confirmed_at = ? WHERE consumer_id = ?`,
			micros(t), p.ConsumerID); err != nil {
			return err
		}
		out, err = getNoticeAddress(ctx, tx, p.ConsumerID)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("confirm notice address of consumer %s: %w", p.ConsumerID, err)
	}
	return out, nil
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
func (s *Store) NoticeRelease(ctx context.Context, p *store.NoticeReleaseParams) error {
	r := p.Reservation
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
