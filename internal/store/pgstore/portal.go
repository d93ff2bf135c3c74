package pgstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/heraldhooks/herald"
	"github.com/heraldhooks/herald/internal/store"
)

// portalCols are read by scanPortalSession, in this order.
const portalCols = `id, consumer_id, link_expires_at, exchanged_at, expires_at, created_at`

// scanPortalSession reads one row of portalCols.
func scanPortalSession(row pgx.Row) (*store.PortalSession, error) {
	var ps store.PortalSession
	var exchanged, sessExp *time.Time
	if err := row.Scan(&ps.ID, &ps.ConsumerID, &ps.LinkExpiresAt, &exchanged, &sessExp, &ps.CreatedAt); err != nil {
		return nil, err
	}
	ps.LinkExpiresAt = ps.LinkExpiresAt.UTC()
	ps.CreatedAt = ps.CreatedAt.UTC()
	ps.ExchangedAt = utcPtr(exchanged)
	ps.ExpiresAt = utcPtr(sessExp)
	return &ps, nil
}

// PortalSessionCreate stores a new link, deleting the consumer's links and
// sessions that ended; times from p.Now or the database clock.
func (s *Store) PortalSessionCreate(ctx context.Context, p *store.PortalSessionCreateParams) (*store.PortalSession, error) {
	id := herald.NewID(store.PrefixPortalSession, idTime(p.Now))
	ps, err := scanPortalSession(s.pool.QueryRow(ctx, `
		WITH n AS (SELECT coalesce($5::timestamptz, now()) AS t),
		ended AS (
			DELETE FROM portal_sessions
			WHERE consumer_id = $2 AND coalesce(expires_at, link_expires_at) <= (SELECT t FROM n)
		)
		INSERT INTO portal_sessions (id, consumer_id, link_hash, link_expires_at, created_at)
		SELECT $1, $2, $3, t + $4::bigint * interval '1 microsecond', t
		FROM n
		RETURNING `+portalCols,
		id, p.ConsumerID, p.LinkHash[:], micros(p.LinkTTL), nowArg(p.Now)))
	if err != nil {
		return nil, fmt.Errorf("create portal session: %w", err)
	}
	return ps, nil
}

// PortalSessionExchange opens a link in one conditional UPDATE.
func (s *Store) PortalSessionExchange(ctx context.Context, p *store.PortalSessionExchangeParams) (*store.PortalSession, error) {
	ps, err := scanPortalSession(s.pool.QueryRow(ctx, `
		UPDATE portal_sessions
		SET session_hash = $1, exchanged_at = n.t, expires_at = n.t + $2::bigint * interval '1 microsecond'
		FROM (SELECT coalesce($4::timestamptz, now()) AS t) n
		WHERE link_hash = $3 AND exchanged_at IS NULL AND link_expires_at > n.t
		RETURNING `+portalCols,
		p.SessionHash[:], micros(p.SessionTTL), p.LinkHash[:], nowArg(p.Now)))
	if errors.Is(err, pgx.ErrNoRows) {
		var used bool
		err = s.pool.QueryRow(ctx, `SELECT exchanged_at IS NOT NULL FROM portal_sessions WHERE link_hash = $1`,
			p.LinkHash[:]).Scan(&used)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			err = store.ErrNotFound
		case err != nil:
		case used:
			err = store.ErrPortalLinkUsed
		default:
			err = store.ErrPortalLinkExpired
		}
	}
	if err != nil {
		return nil, fmt.Errorf("open portal link: %w", err)
	}
	return ps, nil
}

// PortalSessionGet returns the live session known by p.SessionHash.
func (s *Store) PortalSessionGet(ctx context.Context, p *store.PortalSessionGetParams) (*store.PortalSession, error) {
	ps, err := scanPortalSession(s.pool.QueryRow(ctx, `SELECT `+portalCols+` FROM portal_sessions
		WHERE session_hash = $1 AND expires_at > coalesce($2::timestamptz, now())`, p.SessionHash[:], nowArg(p.Now)))
	if errors.Is(err, pgx.ErrNoRows) {
		err = store.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("get portal session: %w", err)
	}
	return ps, nil
}

// PortalSessionEnd deletes one link or session.
func (s *Store) PortalSessionEnd(ctx context.Context, p *store.PortalSessionEndParams) error {
	tag, err := s.pool.Exec(ctx, `DELETE FROM portal_sessions WHERE id = $1`, p.ID)
	if err == nil && tag.RowsAffected() == 0 {
		err = store.ErrNotFound
	}
	if err != nil {
		return fmt.Errorf("end portal session %s: %w", p.ID, err)
	}
	return nil
}

// PortalSessionRevokeConsumer deletes every link and session of a consumer.
func (s *Store) PortalSessionRevokeConsumer(ctx context.Context, p *store.PortalSessionRevokeConsumerParams) (int, error) {
	tag, err := s.pool.Exec(ctx, `DELETE FROM portal_sessions WHERE consumer_id = $1`, p.ConsumerID)
	if err != nil {
		return 0, fmt.Errorf("revoke portal sessions of %s: %w", p.ConsumerID, err)
	}
	return int(tag.RowsAffected()), nil
}
