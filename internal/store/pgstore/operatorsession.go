package pgstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/heraldhooks/herald"
	"github.com/heraldhooks/herald/internal/store"
)

// operatorSessionCols are read by scanOperatorSession, in this order.
const operatorSessionCols = `id, key_hash, expires_at, created_at`

func scanOperatorSession(row pgx.Row) (*store.OperatorSession, error) {
	var os store.OperatorSession
	var key []byte
	if err := row.Scan(&os.ID, &key, &os.ExpiresAt, &os.CreatedAt); err != nil {
		return nil, err
	}
	if len(key) != len(os.KeyHash) {
		return nil, fmt.Errorf("operator session %s: key hash of %d bytes", os.ID, len(key))
	}
	copy(os.KeyHash[:], key)
	os.ExpiresAt = os.ExpiresAt.UTC()
	os.CreatedAt = os.CreatedAt.UTC()
	return &os, nil
}

// OperatorSessionCreate stores a new session, deleting the ones that
// ended; times from p.Now or the database clock.
func (s *Store) OperatorSessionCreate(ctx context.Context, p *store.OperatorSessionCreateParams) (*store.OperatorSession, error) {
	id := herald.NewID(store.PrefixOperatorSession, idTime(p.Now))
	os, err := scanOperatorSession(s.pool.QueryRow(ctx, `
		WITH n AS (SELECT coalesce($5::timestamptz, now()) AS t),
		ended AS (DELETE FROM operator_sessions WHERE expires_at <= (SELECT t FROM n))
		INSERT INTO operator_sessions (id, session_hash, key_hash, expires_at, created_at)
		SELECT $1, $2, $3, t + $4::bigint * interval '1 microsecond', t
		FROM n
		RETURNING `+operatorSessionCols,
		id, p.SessionHash[:], p.KeyHash[:], micros(p.TTL), nowArg(p.Now)))
	if err != nil {
		return nil, fmt.Errorf("create operator session: %w", err)
	}
	return os, nil
}

// OperatorSessionGet returns the live session known by p.SessionHash.
func (s *Store) OperatorSessionGet(ctx context.Context, p *store.OperatorSessionGetParams) (*store.OperatorSession, error) {
	os, err := scanOperatorSession(s.pool.QueryRow(ctx, `SELECT `+operatorSessionCols+`
		FROM operator_sessions WHERE session_hash = $1 AND expires_at > coalesce($2::timestamptz, now())`,
		p.SessionHash[:], nowArg(p.Now)))
	if errors.Is(err, pgx.ErrNoRows) {
		err = store.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("get operator session: %w", err)
	}
	return os, nil
}

// OperatorSessionEnd deletes one session.
func (s *Store) OperatorSessionEnd(ctx context.Context, p *store.OperatorSessionEndParams) error {
	tag, err := s.pool.Exec(ctx, `DELETE FROM operator_sessions WHERE id = $1`, p.ID)
	if err == nil && tag.RowsAffected() == 0 {
		err = store.ErrNotFound
	}
	if err != nil {
		return fmt.Errorf("end operator session %s: %w", p.ID, err)
	}
	return nil
}
