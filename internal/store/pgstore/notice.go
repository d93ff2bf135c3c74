package pgstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/heraldhooks/herald/internal/store"
)

// noticeAddressColumns are the columns scanNoticeAddress reads.
const noticeAddressColumns = `email, updated_at, confirmed_at, token_sent_at, token_expires_at`

// scanNoticeAddress reads a row of noticeAddressColumns into out.
func scanNoticeAddress(row pgx.Row, out *store.NoticeAddress) error {
	var confirmed, sent, expires *time.Time
	if err := row.Scan(&out.Email, &out.UpdatedAt, &confirmed, &sent, &expires); err != nil {
		return err
	}
	out.UpdatedAt = out.UpdatedAt.UTC()
	out.ConfirmedAt = orZero(confirmed)
	out.ConfirmationSentAt = orZero(sent)
	out.ConfirmationExpiresAt = orZero(expires)
	return nil
}

// orZero reads a nullable timestamp in UTC, the zero time for NULL.
func orZero(t *time.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return t.UTC()
}

// NoticeAddressGet returns the consumer's notice address,
// the zero settings when it has none.
func (s *Store) NoticeAddressGet(ctx context.Context, consumerID string) (*store.NoticeAddress, error) {
	out := &store.NoticeAddress{ConsumerID: consumerID}
	err := scanNoticeAddress(s.pool.QueryRow(ctx, `SELECT `+noticeAddressColumns+
		` FROM consumer_notifications WHERE consumer_id = $1`, consumerID), out)
	if errors.Is(err, pgx.ErrNoRows) {
		return out, nil
	}
	if err != nil {
		return nil, fmt.Errorf("get notice address of consumer %s: %w", consumerID, err)
	}
	return out, nil
}

// NoticeAddressSet stores (or clears) the consumer's address; the
// time from p.Now or the database clock. A new address starts pending (or
// confirmed), the same one keeps its state.
func (s *Store) NoticeAddressSet(ctx context.Context, p *store.NoticeAddressSetParams) (*store.NoticeAddress, error) {
	out := &store.NoticeAddress{ConsumerID: p.ConsumerID}
	err := scanNoticeAddress(s.pool.QueryRow(ctx, `INSERT INTO consumer_notifications AS n (consumer_id, email, updated_at, confirmed_at)
		VALUES ($1, $2, coalesce($3::timestamptz, now()),
			CASE WHEN $4::boolean AND $2 <> '' THEN coalesce($3::timestamptz, now()) END)
		ON CONFLICT (consumer_id) DO UPDATE SET
			email = excluded.email,
			updated_at = CASE WHEN n.email = excluded.email THEN n.updated_at ELSE excluded.updated_at END,
			confirmed_at = CASE WHEN n.email = excluded.email AND n.email <> '' THEN coalesce(n.confirmed_at, excluded.confirmed_at)
				ELSE excluded.confirmed_at END,
			token_hash = CASE WHEN n.email = excluded.email THEN n.token_hash END,
			token_sent_at = CASE WHEN n.email = excluded.email THEN n.token_sent_at END,
			token_expires_at = CASE WHEN n.email = excluded.email THEN n.token_expires_at END
		RETURNING `+noticeAddressColumns, p.ConsumerID, p.Email, nowArg(p.Now), p.Confirmed), out)
	if err != nil {
		return nil, fmt.Errorf("set notice address of consumer %s: %w", p.ConsumerID, err)
	}
	return out, nil
}

// NoticeAddressIssue records a confirmation token for a pending
// address, at most once per p.Every, in one conditional UPDATE: of two
// nodes asking at once, the second waits for the first one's row and
// finds its token too recent.
func (s *Store) NoticeAddressIssue(ctx context.Context, p *store.NoticeAddressIssueParams) (*store.NoticeAddress, bool, error) {
	out := &store.NoticeAddress{ConsumerID: p.ConsumerID}
	err := scanNoticeAddress(s.pool.QueryRow(ctx, `
		WITH t AS (SELECT coalesce($3::timestamptz, now()) AS now)
		UPDATE consumer_notifications
		SET token_hash = $4, token_sent_at = t.now, token_expires_at = t.now + $5::bigint * interval '1 microsecond'
		FROM t
		WHERE consumer_id = $1 AND email = $2 AND email <> '' AND confirmed_at IS NULL
			AND (token_sent_at IS NULL OR token_sent_at <= t.now - $6::bigint * interval '1 microsecond')
		RETURNING `+noticeAddressColumns,
		p.ConsumerID, p.Email, nowArg(p.Now), p.TokenHash[:], micros(p.TTL), micros(p.Every)), out)
	if errors.Is(err, pgx.ErrNoRows) {
		cur, err := s.NoticeAddressGet(ctx, p.ConsumerID)
		if err != nil {
			return nil, false, fmt.Errorf("issue confirmation of consumer %s: %w", p.ConsumerID, err)
		}
		return cur, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("issue confirmation of consumer %s: %w", p.ConsumerID, err)
	}
	return out, true, nil
}

// NoticeAddressUnissue withdraws the token of p.TokenHash, if it
// is still the consumer's.
func (s *Store) NoticeAddressUnissue(ctx context.Context, p *store.NoticeAddressUnissueParams) error {
	_, err := s.pool.Exec(ctx, `UPDATE consumer_notifications
		SET token_hash = NULL, token_sent_at = NULL, token_expires_at = NULL
		WHERE consumer_id = $1 AND token_hash = $2 AND confirmed_at IS NULL`, p.ConsumerID, p.TokenHash[:])
	if err != nil {
		return fmt.Errorf("withdraw confirmation of consumer %s: %w", p.ConsumerID, err)
	}
	return nil
}

// NoticeAddressConfirm confirms the address whose live token has
// p.TokenHash, in one conditional UPDATE; when it changes nothing, a read
// tells why.
func (s *Store) NoticeAddressConfirm(ctx context.Context, p *store.NoticeAddressConfirmParams) (*store.NoticeAddress, error) {
	out := &store.NoticeAddress{ConsumerID: p.ConsumerID}
	err := scanNoticeAddress(s.pool.QueryRow(ctx, `
		UPDATE consumer_notifications SET confirmed_at = coalesce($3::timestamptz, now())
		WHERE consumer_id = $1 AND token_hash = $2 AND email <> '' AND confirmed_at IS NULL
			AND token_expires_at > coalesce($3::timestamptz, now())
		RETURNING `+noticeAddressColumns, p.ConsumerID, p.TokenHash[:], nowArg(p.Now)), out)
	if err == nil {
		return out, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("confirm notice address of consumer %s: %w", p.ConsumerID, err)
	}
	var confirmed bool
	err = s.pool.QueryRow(ctx, `SELECT confirmed_at IS NOT NULL FROM consumer_notifications
		WHERE consumer_id = $1 AND token_hash = $2 AND email <> ''`, p.ConsumerID, p.TokenHash[:]).Scan(&confirmed)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		err = store.ErrNotFound
	case err != nil:
	case confirmed:
		err = store.ErrConfirmationUsed
	default:
		err = store.ErrConfirmationExpired
	}
	return nil, fmt.Errorf("confirm notice address of consumer %s: %w", p.ConsumerID, err)
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
func (s *Store) NoticeRelease(ctx context.Context, p *store.NoticeReleaseParams) error {
	r := p.Reservation
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
