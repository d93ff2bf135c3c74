// Package logkey names the structured-log keys Herald uses, once, so every
// package logs the same thing under the same snake_case key.
package logkey

// The log keys.
const (
	DeliveryID = "delivery_id"
	EndpointID = "endpoint_id"
	EventID    = "event_id"
	ConsumerID = "consumer_id"
	// EventType is an event's type, or a catalog entry's name.
	EventType  = "event_type"
	Attempt    = "attempt"
	StatusCode = "status_code"
	DurationMS = "duration_ms"
	Error      = "error"
	Count      = "count"
	Addr       = "addr"
	Outcome    = "outcome"
	// APIKeyID is a stored API key's id (key_…), never the key.
	APIKeyID = "api_key_id"
	// Scope is an API key's scope (operator or consumer).
	Scope = "scope"
	// LeaseLeftMS is how much of a lease was left, in milliseconds
	// (negative once it has run out).
	LeaseLeftMS = "lease_left_ms"
	// Try numbers the tries of one write that is tried again (not an
	// attempt of a delivery).
	Try = "try"
	// KeyFile is the file that holds the key ring beside a SQLite
	// database.
	KeyFile = "key_file"
	// KeyID names a key of the ring that seals endpoint secrets (never
	// the key itself).
	KeyID = "key_id"
	// Events, Deliveries and Attempts count rows of those tables (a
	// purge's deletions, say); Batches counts the transactions they took.
	Events     = "events"
	Deliveries = "deliveries"
	Attempts   = "attempts"
	Batches    = "batches"
	// Retention is how long ended history is kept (--retention).
	Retention = "retention"
	// ClientAddr is the address of a request's client, as a trusted
	// proxy forwarded it, or else its peer's; PeerAddr the peer's (the
	// proxy's) when they differ.
	ClientAddr = "client_addr"
	PeerAddr   = "peer_addr"
	// TLSCert and TLSKey are the files of the TLS pair (--tls-cert,
	// --tls-key): paths, never their contents.
	TLSCert = "tls_cert"
	TLSKey  = "tls_key"
)
