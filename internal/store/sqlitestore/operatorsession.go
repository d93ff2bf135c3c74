package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/heraldhooks/herald"
	"github.com/heraldhooks/herald/internal/store"
)

// operatorSessionColumns are read by scanOperatorSession, in this order.
const operatorSessionColumns = `id, key_hash, expires_at, created_at`

func scanOperatorSession(sc scanner) (*store.OperatorSession, error) {
	var (
		os               store.OperatorSession
		key              []byte
		expires, created int64
	)
	if err := sc.Scan(&os.ID, &key, &expires, &created); err != nil {
		return nil, err
	}
	if len(key) != len(os.KeyHash) {
		return nil, fmt.Errorf("operator session %s: key hash of %d bytes", os.ID, len(key))
	}
	copy(os.KeyHash[:], key)
	os.ExpiresAt = fromMicros(expires)
	os.CreatedAt = fromMicros(created)
	return &os, nil
}

// OperatorSessionCreate stores a new session, deleting the ones that ended.
func (s *Store) OperatorSessionCreate(ctx context.Context, p *store.OperatorSessionCreateParams) (*store.OperatorSession, error) {
	t := now(p.Now)
	id := herald.NewID(store.PrefixOperatorSession, t)
	var out *store.OperatorSession
	err := s.write(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `DELETE FROM operator_sessions WHERE expires_at <= ?`, micros(t)); err != nil {
			return err
		}
		var err error
		out, err = scanOperatorSession(tx.QueryRowContext(ctx, `INSERT INTO operator_sessions
			(id, session_hash, key_hash, expires_at, created_at) VALUES (?, ?, ?, ?, ?)
			RETURNING `+operatorSessionColumns,
			id, p.SessionHash[:], p.KeyHash[:], micros(t.Add(p.TTL)), micros(t)))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("create operator session: %w", err)
	}
	return out, nil
}

// OperatorSessionGet returns the live session known by p.SessionHash.
func (s *Store) OperatorSessionGet(ctx context.Context, p *store.OperatorSessionGetParams) (*store.OperatorSession, error) {
	os, err := scanOperatorSession(s.reader.QueryRowContext(ctx, `SELECT `+operatorSessionColumns+
		` FROM operator_sessions WHERE session_hash = ? AND expires_at > ?`, p.SessionHash[:], micros(now(p.Now))))
	if errors.Is(err, sql.ErrNoRows) {
		err = store.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("get operator session: %w", err)
	}
	return os, nil
}

// OperatorSessionEnd deletes one session.
func (s *Store) OperatorSessionEnd(ctx context.Context, p *store.OperatorSessionEndParams) error {
	err := s.write(ctx, func(tx *sql.Tx) error {
		return oneRow(tx.ExecContext(ctx, `DELETE FROM operator_sessions WHERE id = ?`, p.ID))
	})
	if err != nil {
		return fmt.Errorf("end operator session %s: %w", p.ID, err)
	}
	return nil
}
