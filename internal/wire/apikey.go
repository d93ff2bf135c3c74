package wire

import "time"

// APIKeyRequest is the body of POST /v1/api-keys. ConsumerID is required
// for a consumer key and refused for an operator key.
type APIKeyRequest struct {
	Name *string `json:"name,omitempty"`
	// Scope is "operator" (everything) or "consumer" (one consumer's data).
	Scope      *string `json:"scope,omitempty"`
	ConsumerID *string `json:"consumer_id,omitempty"`
}

// APIKey is an API key in an answer. Key, the key itself, is set only in
// the answer that made it (APIKeyCreated in openapi.json): Herald keeps
// only its hash, so every other answer leaves it out. ConsumerID is ""
// (null on the wire) for an operator key; LastUsedAt is nil until the key
// is first used.
type APIKey struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	// Scope is "operator" or "consumer".
	Scope      string `json:"scope"`
	ConsumerID string `json:"consumer_id"`
	Key        string `json:"key,omitempty"`
	// Prefix is the key's first characters, to recognise it.
	Prefix     string     `json:"prefix"`
	CreatedAt  time.Time  `json:"created_at"`
	LastUsedAt *time.Time `json:"last_used_at"`
}

// MarshalJSON writes k with null for an empty ConsumerID.
func (k APIKey) MarshalJSON() ([]byte, error) {
	type fields APIKey
	return marshal(struct {
		fields
		ConsumerID *string `json:"consumer_id"`
	}{fields(k), nullString(k.ConsumerID)})
}

// PortalSessionRequest is the optional body of POST
// /v1/consumers/{consumer_id}/portal-sessions: how long the link opens, a
// Go duration string (default 15m). It stays text here: the server answers
// a bad one with its own code.
type PortalSessionRequest struct {
	TTL *string `json:"ttl,omitempty"`
}

// PortalSession answers POST /v1/consumers/{consumer_id}/portal-sessions: a
// one-time link to the consumer portal and when it stops opening.
type PortalSession struct {
	URL       string    `json:"url"`
	ExpiresAt time.Time `json:"expires_at"`
}

// PortalRevoked answers DELETE /v1/consumers/{consumer_id}/portal-sessions:
// how many links and sessions were ended.
type PortalRevoked struct {
	Revoked int `json:"revoked"`
}
