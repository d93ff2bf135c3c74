// Package auth says who is asking: it turns the bearer key of a call into
// a Principal (an operator, or one consumer) and carries it in the
// request's context. What a principal may see is decided in one place, the
// API's route table (internal/api, scope.go), from the Principal this
// package gives.
//
// Keys are high-entropy random strings (hk_ and 32 random bytes), so Herald
// keeps only their SHA-256: unlike a password, such a key cannot be guessed
// from its hash by trying likely values, and a slow password hash would
// only cost every call time. A key is found by its hash through a unique
// index and the hash is then compared in constant time.
//
// Nothing is cached between calls: every call with a stored key reads it
// from the store, so a revoked key stops working on every node at once.
// Only the last use is kept in memory, so that it is written at most once a
// minute per key and node rather than on every call.
package auth

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/heraldhooks/herald"
	"github.com/heraldhooks/herald/internal/clock"
	"github.com/heraldhooks/herald/internal/logkey"
	"github.com/heraldhooks/herald/internal/store"
)

// ErrInvalidKey: no key of this installation matches the one presented.
var ErrInvalidKey = errors.New("the API key is not valid")

// keyBytes is the randomness of a key made by NewKey.
const keyBytes = 32

// PrefixLen is how many characters of a key its Prefix keeps: "hk_" and
// nine more, enough to tell keys apart by eye, far too few to guess the rest.
const PrefixLen = 12

// DefaultTouchEvery is how often, at most, a node writes a key's last use.
const DefaultTouchEvery = time.Minute

// Principal is who makes a call.
type Principal struct {
	// Scope is herald.ScopeOperator or herald.ScopeConsumer.
	Scope herald.Scope
	// ConsumerID is the one consumer a consumer principal reaches.
	ConsumerID string
	// KeyID is the stored key that authenticated the call; empty for the
	// key given with --api-key or made on first start.
	KeyID string
	// Session is the id of the portal session that acts (ps_…), empty for
	// a key: each session has a request limit of its own, as each key has.
	Session string
}

// Operator is the principal of an operator key.
func Operator(keyID string) Principal {
	return Principal{Scope: herald.ScopeOperator, KeyID: keyID}
}

// Consumer is the principal of a key scoped to consumer.
func Consumer(consumer, keyID string) Principal {
	return Principal{Scope: herald.ScopeConsumer, ConsumerID: consumer, KeyID: keyID}
}

// IsOperator reports whether p reaches everything.
func (p Principal) IsOperator() bool { return p.Scope == herald.ScopeOperator }

// Reaches reports whether p may see the data of consumer: an operator
// reaches every consumer, a consumer principal its own alone.
func (p Principal) Reaches(consumer string) bool {
	return p.IsOperator() || p.Scope == herald.ScopeConsumer && p.ConsumerID != "" && p.ConsumerID == consumer
}

type principalKey struct{}

// WithPrincipal returns ctx carrying p.
func WithPrincipal(ctx context.Context, p Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// FromContext returns the principal ctx carries; ok is false when the call
// was not authenticated.
func FromContext(ctx context.Context) (p Principal, ok bool) {
	p, ok = ctx.Value(principalKey{}).(Principal)
	return p, ok
}

// NewKey makes a key: "hk_" and 32 random bytes in unpadded base64url.
func NewKey() (string, error) {
	var raw [keyBytes]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", fmt.Errorf("make API key: %w", err)
	}
	return herald.PrefixAPIKeySecret + base64.RawURLEncoding.EncodeToString(raw[:]), nil
}

// Hash is what Herald keeps of a key: its SHA-256 (see the package comment
// for why a fast hash is right for random keys).
func Hash(key string) [32]byte { return sha256.Sum256([]byte(key)) }

// Prefix is the beginning of key that answers show, to recognise it.
func Prefix(key string) string { return key[:min(len(key), PrefixLen)] }

// Config wires an Authenticator.
type Config struct {
	// Keys finds stored keys; required.
	Keys store.APIKeyStore
	// OperatorKeyHash is the SHA-256 of the --api-key key (or of the one
	// made on first start): an operator key that is not in Keys. The zero
	// value matches no key.
	OperatorKeyHash [32]byte
	// Clock paces the writes of last use and gives their time. Default
	// clock.Real.
	Clock clock.Clock
	// Logger hears of last-use writes that failed. Default: discard.
	Logger *slog.Logger
	// TouchEvery is how often, at most, a key's last use is written by
	// this node. Default DefaultTouchEvery.
	TouchEvery time.Duration
}

// Authenticator turns keys into principals. It is safe for concurrent use.
type Authenticator struct {
	keys         store.APIKeyStore
	operatorHash [32]byte
	clock        clock.Clock
	log          *slog.Logger
	every        time.Duration

	mu      sync.Mutex
	touched map[string]time.Time // key id -> when this node last wrote its use
}

// New returns an Authenticator for cfg.
func New(cfg Config) *Authenticator {
	a := &Authenticator{
		keys:         cfg.Keys,
		operatorHash: cfg.OperatorKeyHash,
		clock:        cfg.Clock,
		log:          cfg.Logger,
		every:        cfg.TouchEvery,
		touched:      map[string]time.Time{},
	}
	if a.clock == nil {
		a.clock = clock.Real{}
	}
	if a.log == nil {
		a.log = slog.New(slog.DiscardHandler)
	}
	if a.every <= 0 {
		a.every = DefaultTouchEvery
	}
	return a
}

// Authenticate returns the principal of key, ErrInvalidKey when no key
// matches (or a stored key is damaged: it fails closed), or the store's
// error when the store cannot answer.
func (a *Authenticator) Authenticate(ctx context.Context, key string) (Principal, error) {
	return a.AuthenticateHash(ctx, Hash(key))
}

// AuthenticateHash is Authenticate for the key whose SHA-256 is sum: a
// dashboard session keeps only that hash of the key it was opened with
// and checks it again on every request, so a revoked key ends it.
func (a *Authenticator) AuthenticateHash(ctx context.Context, sum [32]byte) (Principal, error) {
	if subtle.ConstantTimeCompare(sum[:], a.operatorHash[:]) == 1 {
		return Operator(""), nil
	}
	k, err := a.keys.APIKeyGetByHash(ctx, &store.APIKeyGetByHashParams{Hash: sum})
	if errors.Is(err, store.ErrNotFound) {
		return Principal{}, ErrInvalidKey
	}
	if err != nil {
		return Principal{}, fmt.Errorf("authenticate: %w", err)
	}
	// The index found the row by this hash; comparing again, in constant
	// time, keeps a store that matched loosely from letting a key in.
	if subtle.ConstantTimeCompare(k.Hash[:], sum[:]) != 1 {
		return Principal{}, ErrInvalidKey
	}
	var p Principal
	switch {
	case k.Scope == herald.ScopeOperator && k.ConsumerID == "":
		p = Operator(k.ID)
	case k.Scope == herald.ScopeConsumer && k.ConsumerID != "":
		p = Consumer(k.ConsumerID, k.ID)
	default:
		a.log.Error("stored API key has no valid scope; refusing it", logkey.APIKeyID, k.ID, logkey.Scope, string(k.Scope))
		return Principal{}, ErrInvalidKey
	}
	a.touch(ctx, k.ID)
	return p, nil
}

// touch writes the key's last use unless this node wrote it less than
// a.every ago. A failed write is logged and tried again on the next call:
// it never fails the call itself.
func (a *Authenticator) touch(ctx context.Context, id string) {
	now := a.clock.Now()
	a.mu.Lock()
	if last, ok := a.touched[id]; ok && now.Sub(last) < a.every {
		a.mu.Unlock()
		return
	}
	a.touched[id] = now
	if len(a.touched) > maxTouched {
		// Keys revoked or idle for a while need no entry: their next use
		// is written at once, which is what a fresh entry would allow.
		for kid, last := range a.touched {
			if now.Sub(last) >= a.every {
				delete(a.touched, kid)
			}
		}
	}
	a.mu.Unlock()
	err := a.keys.APIKeyTouch(ctx, &store.APIKeyTouchParams{ID: id, Now: a.clock.StoreNow()})
	if err != nil {
		a.log.Warn("could not record the API key's last use", logkey.APIKeyID, id, logkey.Error, err)
		a.mu.Lock()
		if a.touched[id].Equal(now) {
			delete(a.touched, id)
		}
		a.mu.Unlock()
	}
}

// maxTouched bounds the last-use entries a node keeps before it drops
// those older than the touch interval.
const maxTouched = 10000
