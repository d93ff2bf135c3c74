package herald

import "time"

// PrefixAPIKey starts the id of an API key (key_…); PrefixAPIKeySecret
// starts the key itself (hk_…), the bearer token a caller presents.
const (
	PrefixAPIKey       = "key_"
	PrefixAPIKeySecret = "hk_"
)

// Scope is what an API key may reach (API.md, "API keys and scopes").
type Scope string

// The scopes of an API key.
const (
	// ScopeOperator reaches everything: every consumer's data, sending
	// events, and the API keys themselves.
	ScopeOperator Scope = "operator"
	// ScopeConsumer reaches one consumer's endpoints, events, deliveries
	// and attempts, and nothing of any other consumer.
	ScopeConsumer Scope = "consumer"
)

// Valid reports whether s is a known scope.
func (s Scope) Valid() bool { return s == ScopeOperator || s == ScopeConsumer }

// APIKey is a stored API key. Herald keeps only Hash, the SHA-256 of the
// key: the key itself is shown once, when it is made, and cannot be read
// back. Prefix, the key's first characters, lets a person recognise it.
type APIKey struct {
	ID    string
	Name  string
	Scope Scope
	// ConsumerID is the one consumer a consumer-scoped key reaches; empty
	// for an operator key.
	ConsumerID string
	Hash       [32]byte
	Prefix     string
	CreatedAt  time.Time
	// LastUsedAt is when the key last authenticated a call, to within a
	// minute (it is not written on every call); nil until first used.
	LastUsedAt *time.Time
}
