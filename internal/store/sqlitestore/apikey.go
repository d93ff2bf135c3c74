package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/heraldhooks/herald"
	"github.com/heraldhooks/herald/internal/store"
)

// apiKeyColumns are read by scanAPIKey, in this order.
const apiKeyColumns = `id, name, scope, consumer_id, key_hash, prefix, created_at, last_used_at`

// scanAPIKey reads one row of apiKeyColumns.
func scanAPIKey(sc scanner) (*herald.APIKey, error) {
	var (
		k         herald.APIKey
		scope     string
		hash      []byte
		createdAt int64
		lastUsed  sql.NullInt64
	)
	if err := sc.Scan(&k.ID, &k.Name, &scope, &k.ConsumerID, &hash, &k.Prefix, &createdAt, &lastUsed); err != nil {
		return nil, err
	}
	if len(hash) != len(k.Hash) {
		return nil, fmt.Errorf("api key %s: stored hash has %d bytes", k.ID, len(hash))
	}
	copy(k.Hash[:], hash)
	k.Scope = herald.Scope(scope)
	k.CreatedAt = fromMicros(createdAt)
	k.LastUsedAt = fromNullMicros(lastUsed)
	return &k, nil
}

// getAPIKey reads one key by a condition on one column.
func getAPIKey(ctx context.Context, q interface {
	QueryRowContext(context.Context, string, ...any) *sql.Row
}, cond string, arg any) (*herald.APIKey, error) {
	k, err := scanAPIKey(q.QueryRowContext(ctx, `SELECT `+apiKeyColumns+` FROM api_keys WHERE `+cond, arg))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, store.ErrNotFound
	}
	return k, err
}

// APIKeyCreate stores p.Key; an id or hash already taken gives
// store.ErrConflict.
func (s *Store) APIKeyCreate(ctx context.Context, p *store.APIKeyCreateParams) (*herald.APIKey, error) {
	if p.Key == nil {
		return nil, errors.New("create api key: no key given")
	}
	in := p.Key
	t := now(p.Now)
	id := in.ID
	if id == "" {
		id = herald.NewID(herald.PrefixAPIKey, t)
	}
	var out *herald.APIKey
	err := s.write(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `INSERT INTO api_keys (`+apiKeyColumns+`)
			VALUES (?, ?, ?, ?, ?, ?, ?, NULL) ON CONFLICT DO NOTHING`,
			id, in.Name, string(in.Scope), in.ConsumerID, in.Hash[:], in.Prefix, micros(t))
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n == 0 {
			return fmt.Errorf("its id or its hash is taken: %w", store.ErrConflict)
		}
		out, err = getAPIKey(ctx, tx, "id = ?", id)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("create api key: %w", err)
	}
	return out, nil
}

// APIKeyGet returns the key with that id, or store.ErrNotFound.
func (s *Store) APIKeyGet(ctx context.Context, id string) (*herald.APIKey, error) {
	k, err := getAPIKey(ctx, s.reader, "id = ?", id)
	if err != nil {
		return nil, fmt.Errorf("get api key %s: %w", id, err)
	}
	return k, nil
}

// APIKeyGetByHash returns the key whose hash is p.Hash (through the unique
// index on key_hash), or store.ErrNotFound.
func (s *Store) APIKeyGetByHash(ctx context.Context, p *store.APIKeyGetByHashParams) (*herald.APIKey, error) {
	k, err := getAPIKey(ctx, s.reader, "key_hash = ?", p.Hash[:])
	if err != nil {
		return nil, fmt.Errorf("get api key by hash: %w", err)
	}
	return k, nil
}

// APIKeyList lists keys newest first, of one consumer or of all.
func (s *Store) APIKeyList(ctx context.Context, p *store.APIKeyListParams) (*store.Page[*herald.APIKey], error) {
	limit := store.ClampLimit(p.Limit)
	w := &where{}
	if p.ConsumerID != "" {
		w.add("consumer_id = ?", p.ConsumerID)
	}
	if p.Cursor != "" {
		w.add("id < ?", p.Cursor)
	}
	rows, err := s.reader.QueryContext(ctx, `SELECT `+apiKeyColumns+` FROM api_keys`+w.String()+
		` ORDER BY id DESC LIMIT ?`, append(w.args, limit+1)...)
	items, err := collect(rows, err, scanAPIKey)
	if err != nil {
		return nil, fmt.Errorf("list api keys: %w", err)
	}
	return store.NewPage(items, limit, func(k *herald.APIKey) string { return k.ID }), nil
}

// APIKeyRevoke deletes the key, or gives store.ErrNotFound.
func (s *Store) APIKeyRevoke(ctx context.Context, p *store.APIKeyRevokeParams) error {
	err := s.write(ctx, func(tx *sql.Tx) error {
		return oneRow(tx.ExecContext(ctx, `DELETE FROM api_keys WHERE id = ?`, p.ID))
	})
	if err != nil {
		return fmt.Errorf("revoke api key %s: %w", p.ID, err)
	}
	return nil
}

// APIKeyTouch moves the key's last use forward to p.Now.
func (s *Store) APIKeyTouch(ctx context.Context, p *store.APIKeyTouchParams) error {
	t := micros(now(p.Now))
	err := s.write(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `UPDATE api_keys SET last_used_at = ?
			WHERE id = ? AND (last_used_at IS NULL OR last_used_at < ?)`, t, p.ID, t)
		return err
	})
	if err != nil {
		return fmt.Errorf("touch api key %s: %w", p.ID, err)
	}
	return nil
}
