package store

import (
	"context"
	"time"

	"github.com/heraldhooks/herald"
)

// APIKeyStore keeps the API keys made through /v1/api-keys. The key given
// with --api-key and the one made on first start are not kept here: they
// live in the configuration and in the settings. Keys are found by the
// SHA-256 of the key, which is all a backend stores of it.
type APIKeyStore interface {
	// APIKeyCreate stores a new key. The store makes its id when Key.ID is
	// empty; an id or hash already taken gives ErrConflict. CreatedAt is
	// set from Now; LastUsedAt starts nil.
	APIKeyCreate(ctx context.Context, p *APIKeyCreateParams) (*herald.APIKey, error)
	// APIKeyGet returns the key with that id, or ErrNotFound (revoked
	// keys too).
	APIKeyGet(ctx context.Context, id string) (*herald.APIKey, error)
	// APIKeyGetByHash returns the key whose hash is p.Hash, or ErrNotFound.
	// A revoked key is never found: authentication reads this on every
	// call, so a revocation holds from its commit on, on every node.
	APIKeyGetByHash(ctx context.Context, p *APIKeyGetByHashParams) (*herald.APIKey, error)
	// APIKeyList lists keys newest first, of one consumer or of all.
	APIKeyList(ctx context.Context, p *APIKeyListParams) (*Page[*herald.APIKey], error)
	// APIKeyRevoke deletes the key: it authenticates nothing from then on.
	// An unknown or already revoked id gives ErrNotFound.
	APIKeyRevoke(ctx context.Context, p *APIKeyRevokeParams) error
	// APIKeyTouch records that the key was used at Now. It never moves
	// LastUsedAt back (several nodes may touch one key out of order), and
	// touching a revoked or unknown key is not an error: there is nothing
	// to record.
	APIKeyTouch(ctx context.Context, p *APIKeyTouchParams) error
}

// APIKeyCreateParams creates Key (its ID, Name, Scope, ConsumerID, Hash and
// Prefix are stored as given).
type APIKeyCreateParams struct {
	Key *herald.APIKey
	Now time.Time
}

// APIKeyGetByHashParams names a key by the SHA-256 of the key.
type APIKeyGetByHashParams struct {
	Hash [32]byte
}

// APIKeyListParams filters keys; an empty ConsumerID lists all.
type APIKeyListParams struct {
	ConsumerID string
	Cursor     string
	Limit      int
}

// APIKeyRevokeParams names the key to revoke.
type APIKeyRevokeParams struct {
	ID  string
	Now time.Time
}

// APIKeyTouchParams records a use of key ID at Now.
type APIKeyTouchParams struct {
	ID  string
	Now time.Time
}
