package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/heraldhooks/herald"
	"github.com/heraldhooks/herald/internal/store"
)

// portalColumns are read by scanPortalSession, in this order.
const portalColumns = `id, consumer_id, link_expires_at, exchanged_at, expires_at, created_at`

// scanPortalSession reads one row of portalColumns.
func scanPortalSession(sc scanner) (*store.PortalSession, error) {
	var (
		ps                 store.PortalSession
		linkExp, created   int64
		exchanged, sessExp sql.NullInt64
	)
	if err := sc.Scan(&ps.ID, &ps.ConsumerID, &linkExp, &exchanged, &sessExp, &created); err != nil {
		return nil, err
	}
	ps.LinkExpiresAt = fromMicros(linkExp)
	ps.ExchangedAt = fromNullMicros(exchanged)
	ps.ExpiresAt = fromNullMicros(sessExp)
	ps.CreatedAt = fromMicros(created)
	return &ps, nil
}

// PortalSessionCreate stores a new link, deleting the consumer's links and
// sessions that ended.
func (s *Store) PortalSessionCreate(ctx context.Context, p *store.PortalSessionCreateParams) (*store.PortalSession, error) {
	t := now(p.Now)
	id := herald.NewID(store.PrefixPortalSession, t)
	var out *store.PortalSession
	err := s.write(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `DELETE FROM portal_sessions
			WHERE consumer_id = ? AND coalesce(expires_at, link_expires_at) <= ?`, p.ConsumerID, micros(t))
		if err != nil {
			return err
		}
		out, err = scanPortalSession(tx.QueryRowContext(ctx, `INSERT INTO portal_sessions
			(id, consumer_id, link_hash, link_expires_at, created_at) VALUES (?, ?, ?, ?, ?)
			RETURNING `+portalColumns,
			id, p.ConsumerID, p.LinkHash[:], micros(t.Add(p.LinkTTL)), micros(t)))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("create portal session: %w", err)
	}
	return out, nil
}

// PortalSessionExchange opens a link in one conditional UPDATE.
func (s *Store) PortalSessionExchange(ctx context.Context, p *store.PortalSessionExchangeParams) (*store.PortalSession, error) {
	t := micros(now(p.Now))
	var out *store.PortalSession
	err := s.write(ctx, func(tx *sql.Tx) error {
		var err error
		out, err = scanPortalSession(tx.QueryRowContext(ctx, `UPDATE portal_sessions
			SET session_hash = ?, exchanged_at = ?, expires_at = ?
			WHERE link_hash = ? AND exchanged_at IS NULL AND link_expires_at > ?
			RETURNING `+portalColumns,
			p.SessionHash[:], t, t+p.SessionTTL.Microseconds(), p.LinkHash[:], t))
		if !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		ps, err := scanPortalSession(tx.QueryRowContext(ctx,
			`SELECT `+portalColumns+` FROM portal_sessions WHERE link_hash = ?`, p.LinkHash[:]))
		switch {
		case errors.Is(err, sql.ErrNoRows):
			return store.ErrNotFound
		case err != nil:
			return err
		case ps.ExchangedAt != nil:
			return store.ErrPortalLinkUsed
		default:
			return store.ErrPortalLinkExpired
		}
	})
	if err != nil {
		return nil, fmt.Errorf("open portal link: %w", err)
	}
	return out, nil
}

// PortalSessionGet returns the live session known by p.SessionHash.
func (s *Store) PortalSessionGet(ctx context.Context, p *store.PortalSessionGetParams) (*store.PortalSession, error) {
	ps, err := scanPortalSession(s.reader.QueryRowContext(ctx, `SELECT `+portalColumns+
		` FROM portal_sessions WHERE session_hash = ? AND expires_at > ?`, p.SessionHash[:], micros(now(p.Now))))
	if errors.Is(err, sql.ErrNoRows) {
		err = store.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("get portal session: %w", err)
	}
	return ps, nil
}

// PortalSessionEnd deletes one link or session.
func (s *Store) PortalSessionEnd(ctx context.Context, p *store.PortalSessionEndParams) error {
	err := s.write(ctx, func(tx *sql.Tx) error {
		return oneRow(tx.ExecContext(ctx, `DELETE FROM portal_sessions WHERE id = ?`, p.ID))
	})
	if err != nil {
		return fmt.Errorf("end portal session %s: %w", p.ID, err)
	}
	return nil
}

// PortalSessionRevokeConsumer deletes every link and session of a consumer.
func (s *Store) PortalSessionRevokeConsumer(ctx context.Context, p *store.PortalSessionRevokeConsumerParams) (int, error) {
	var n int64
	err := s.write(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM portal_sessions WHERE consumer_id = ?`, p.ConsumerID)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("revoke portal sessions of %s: %w", p.ConsumerID, err)
	}
	return int(n), nil
}
