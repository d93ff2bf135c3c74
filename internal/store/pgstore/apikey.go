package pgstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/heraldhooks/herald"
	"github.com/heraldhooks/herald/internal/store"
)

// apiKeyCols are read by scanAPIKey, in this order.
const apiKeyCols = `id, name, scope, consumer_id, key_hash, prefix, created_at, last_used_at`

// scanAPIKey reads one row of apiKeyCols.
func scanAPIKey(row pgx.Row) (*herald.APIKey, error) {
	var (
		k         herald.APIKey
		scope     string
		hash      []byte
		createdAt time.Time
		lastUsed  *time.Time
	)
	if err := row.Scan(&k.ID, &k.Name, &scope, &k.ConsumerID, &hash, &k.Prefix, &createdAt, &lastUsed); err != nil {
		return nil, err
	}
	if len(hash) != len(k.Hash) {
		return nil, fmt.Errorf("api key %s: stored hash has %d bytes", k.ID, len(hash))
	}
	copy(k.Hash[:], hash)
	k.Scope = herald.Scope(scope)
	k.CreatedAt = createdAt.UTC()
	k.LastUsedAt = utcPtr(lastUsed)
	return &k, nil
}

// getAPIKey reads one key by a condition on one column.
func (s *Store) getAPIKey(ctx context.Context, cond string, arg any) (*herald.APIKey, error) {
	k, err := scanAPIKey(s.pool.QueryRow(ctx, "SELECT "+apiKeyCols+" FROM api_keys WHERE "+cond, arg))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, store.ErrNotFound
	}
	return k, err
}

// APIKeyCreate stores p.Key, CreatedAt from p.Now or the database clock;
// an id or hash already taken gives store.ErrConflict.
func (s *Store) APIKeyCreate(ctx context.Context, p *store.APIKeyCreateParams) (*herald.APIKey, error) {
	if p.Key == nil {
		return nil, errors.New("create api key: no key given")
	}
	in := p.Key
	id := in.ID
	if id == "" {
		id = herald.NewID(herald.PrefixAPIKey, idTime(p.Now))
	}
	k, err := scanAPIKey(s.pool.QueryRow(ctx, `
		INSERT INTO api_keys (`+apiKeyCols+`)
		VALUES ($1, $2, $3, $4, $5, $6, coalesce($7::timestamptz, now()), NULL)
		ON CONFLICT DO NOTHING
		RETURNING `+apiKeyCols,
		id, in.Name, string(in.Scope), in.ConsumerID, in.Hash[:], in.Prefix, nowArg(p.Now)))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("create api key: its id or its hash is taken: %w", store.ErrConflict)
	}
	if err != nil {
		return nil, fmt.Errorf("create api key: %w", err)
	}
	return k, nil
}

// APIKeyGet returns the key with that id, or store.ErrNotFound.
func (s *Store) APIKeyGet(ctx context.Context, id string) (*herald.APIKey, error) {
	k, err := s.getAPIKey(ctx, "id = $1", id)
	if err != nil {
		return nil, fmt.Errorf("get api key %s: %w", id, err)
	}
	return k, nil
}

// APIKeyGetByHash returns the key whose hash is p.Hash (through the unique
// index on key_hash), or store.ErrNotFound.
func (s *Store) APIKeyGetByHash(ctx context.Context, p *store.APIKeyGetByHashParams) (*herald.APIKey, error) {
	k, err := s.getAPIKey(ctx, "key_hash = $1", p.Hash[:])
	if err != nil {
		return nil, fmt.Errorf("get api key by hash: %w", err)
	}
	return k, nil
}

// APIKeyList lists keys newest first, of one consumer or of all.
func (s *Store) APIKeyList(ctx context.Context, p *store.APIKeyListParams) (*store.Page[*herald.APIKey], error) {
	limit := store.ClampLimit(p.Limit)
	var where []string
	var args []any
	if p.ConsumerID != "" {
		args = append(args, p.ConsumerID)
		where = append(where, "consumer_id = $"+strconv.Itoa(len(args)))
	}
	if p.Cursor != "" {
		args = append(args, p.Cursor)
		where = append(where, "id < $"+strconv.Itoa(len(args)))
	}
	args = append(args, limit+1)
	rows, err := s.pool.Query(ctx, "SELECT "+apiKeyCols+" FROM api_keys"+whereClause(where)+
		" ORDER BY id DESC LIMIT $"+strconv.Itoa(len(args)), args...)
	items, err := collect(rows, err, scanAPIKey)
	if err != nil {
		return nil, fmt.Errorf("list api keys: %w", err)
	}
	return store.NewPage(items, limit, func(k *herald.APIKey) string { return k.ID }), nil
}

// APIKeyRevoke deletes the key, or gives store.ErrNotFound. Every node
// reads keys from this table on every call, so the key stops working on
// all of them at this commit.
func (s *Store) APIKeyRevoke(ctx context.Context, p *store.APIKeyRevokeParams) error {
	tag, err := s.pool.Exec(ctx, "DELETE FROM api_keys WHERE id = $1", p.ID)
	if err != nil {
		return fmt.Errorf("revoke api key %s: %w", p.ID, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("revoke api key %s: %w", p.ID, store.ErrNotFound)
	}
	return nil
}

// APIKeyTouch moves the key's last use forward to p.Now (or the database
// clock).
func (s *Store) APIKeyTouch(ctx context.Context, p *store.APIKeyTouchParams) error {
	_, err := s.pool.Exec(ctx, `
		UPDATE api_keys SET last_used_at = n.t
		FROM (SELECT coalesce($2::timestamptz, now()) AS t) AS n
		WHERE id = $1 AND (last_used_at IS NULL OR last_used_at < n.t)`, p.ID, nowArg(p.Now))
	if err != nil {
		return fmt.Errorf("touch api key %s: %w", p.ID, err)
	}
	return nil
}
