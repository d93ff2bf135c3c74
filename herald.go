// Package herald holds the domain words of the Herald webhook service as plain
// types: endpoints, events, deliveries and attempts, their statuses, ids and
// event-type patterns. It is a leaf package (standard library only) so every
// other package can share these words without importing behaviour.
package herald

import (
	"strings"
	"time"
)

// FormatDuration writes d as the API shows durations: d.String() without
// the zero units a person would not write ("5m" for 5m0s, "2h" for
// 2h0m0s). time.ParseDuration reads it back.
func FormatDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// Status is where a delivery stands. pending and delivering are live states;
// delivered, dead and cancelled are terminal (DESIGN.md, invariant 2).
type Status string

// The delivery statuses.
const (
	StatusPending    Status = "pending"
	StatusDelivering Status = "delivering"
	StatusDelivered  Status = "delivered"
	StatusDead       Status = "dead"
	StatusCancelled  Status = "cancelled"
)

// Valid reports whether s is one of the known statuses.
func (s Status) Valid() bool {
	switch s {
	case StatusPending, StatusDelivering, StatusDelivered, StatusDead, StatusCancelled:
		return true
	}
	return false
}

// Terminal reports whether s is an end state that the dispatcher never leaves
// on its own (only an operator's replay brings such a delivery back).
func (s Status) Terminal() bool {
	return s == StatusDelivered || s == StatusDead || s == StatusCancelled
}

// DeadReason says why a delivery went dead.
type DeadReason string

// The reasons a delivery goes dead.
const (
	DeadGone             DeadReason = "gone"              // the receiver answered 410
	DeadClientError      DeadReason = "client_error"      // a 4xx that retrying cannot fix
	DeadExhausted        DeadReason = "exhausted"         // the attempt budget ran out
	DeadEndpointDisabled DeadReason = "endpoint_disabled" // its endpoint was disabled
	// DeadLeaseLost: its lease was lost DefaultMaxLeaseLosses times (or
	// the node's --max-lease-losses): every node that took it died or
	// froze before writing an outcome, as a payload that kills nodes
	// would make them, so it is not handed out again.
	DeadLeaseLost DeadReason = "lease_lost"
)

// SignatureScheme names how a webhook is signed (DESIGN.md, Signing).
type SignatureScheme string

// The signature schemes.
const (
	// SchemeStandard is Standard Webhooks: webhook-id, webhook-timestamp and
	// webhook-signature: v1,<base64 HMAC-SHA256>.
	SchemeStandard SignatureScheme = "standard"
	// SchemeHMACSHA256 is the common hex style: X-Webhook-Signature: sha256=<hex>.
	SchemeHMACSHA256 SignatureScheme = "hmac-sha256"
	// SchemeEd25519 is Standard Webhooks' asymmetric form: the headers of
	// SchemeStandard with webhook-signature: v1a,<base64 Ed25519>. The
	// endpoint's secret is its private key (whsk_…), which the API never
	// shows; receivers verify with its public key (whpk_…).
	SchemeEd25519 SignatureScheme = "ed25519"
)

// Valid reports whether s is a known scheme.
func (s SignatureScheme) Valid() bool {
	return s == SchemeStandard || s == SchemeHMACSHA256 || s == SchemeEd25519
}

// Defaults that DESIGN.md fixes for every endpoint that does not choose its own.
const (
	DefaultConsumerID     = "default"
	DefaultTimeout        = 10 * time.Second
	MaxTimeout            = 60 * time.Second
	DefaultConnectTimeout = 5 * time.Second
	DefaultMaxInFlight    = 10
	// DefaultMaxLeaseLosses is how many times a delivery's lease may be
	// lost (its node died or froze mid-attempt) before it goes dead
	// with DeadLeaseLost.
	DefaultMaxLeaseLosses = 5
	MaxResponseBodyKeep   = 4 << 10 // bytes of a response body read and kept
)

// DefaultRetrySchedule is the delay before each attempt: the first at once,
// then 30 s, 5 m, 30 m, 2 h, 8 h and 24 h after each failure (7 attempts).
var DefaultRetrySchedule = []time.Duration{
	0, 30 * time.Second, 5 * time.Minute, 30 * time.Minute,
	2 * time.Hour, 8 * time.Hour, 24 * time.Hour,
}

// ExponentialPolicy is a retry policy of delays growing by Factor from Base,
// capped at Cap, each drawn with full jitter, for Attempts attempts in all.
type ExponentialPolicy struct {
	Base     time.Duration `json:"base"`
	Factor   float64       `json:"factor"`
	Cap      time.Duration `json:"cap"`
	Attempts int           `json:"attempts"`
}

// RateLimit is a token bucket for one endpoint.
type RateLimit struct {
	PerSecond float64 `json:"per_second"`
	Burst     int     `json:"burst"`
}

// Endpoint is a URL owned by a consumer, with its secret, event-type filter
// and delivery settings.
type Endpoint struct {
	ID          string
	ConsumerID  string
	URL         string
	Description string
	// EventTypes are patterns: "*", an exact type, or "prefix.*".
	EventTypes []string
	// Filter, when not "", is a CEL expression over event_type,
	// consumer_id and payload that an event must make true to go to the
	// endpoint (internal/filter).
	Filter string
	// Secret signs every webhook: "whsec_" and base64 for the standard
	// scheme; used as the raw UTF-8 string by hmac-sha256; the private key,
	// "whsk_" and the base64 of its 32-byte seed, for ed25519.
	Secret string
	// PreviousSecret also signs until PreviousSecretExpiresAt, after a rotation.
	PreviousSecret          string
	PreviousSecretExpiresAt *time.Time
	Enabled                 bool
	// DisabledReason says why the endpoint was disabled ("" when enabled or
	// disabled by hand without a reason).
	DisabledReason string
	// Timeout bounds one attempt in all (connect, send, answer).
	Timeout time.Duration
	// RetrySchedule, when set, is the delay before each attempt; its length
	// is the attempt budget. Exponential, when set, is used instead.
	RetrySchedule     []time.Duration
	RetryExponential  *ExponentialPolicy
	RetryClientErrors bool
	RateLimit         *RateLimit
	MaxInFlight       int
	SignatureScheme   SignatureScheme
	Headers           map[string]string
	// Ordering "fifo" sends one delivery at a time, in event order.
	Ordering Ordering
	// AutoDisableAfterFailures consecutive failures disable the endpoint
	// (0: the default, 100). AutoDisableAfter without a success, across at
	// least AutoDisableMinFailures failed attempts, does too (0: 24 h).
	AutoDisableAfterFailures int
	AutoDisableAfter         time.Duration
	// NoTracePropagation keeps the traceparent header off this endpoint's
	// webhooks (trace_propagation false); by default, with tracing on,
	// each attempt carries its span's context to the receiver.
	NoTracePropagation bool
	// ClientCertificate (PEM, the chain) and ClientKey (its private key,
	// PEM) are presented to a receiver that asks for a client certificate
	// (mutual TLS); both "" when none. The key is sealed at rest as the
	// secrets are, and never shown.
	ClientCertificate string
	ClientKey         string
	// Health is kept by Herald (breaker, streak, pause); read only.
	Health    EndpointHealth
	CreatedAt time.Time
	UpdatedAt time.Time
}

// Event is something that happened, for one consumer. Payload is kept byte
// for byte as it was accepted (invariant 5).
type Event struct {
	ID             string
	ConsumerID     string
	EventType      string
	Payload        []byte
	IdempotencyKey string
	CreatedAt      time.Time
	// TraceContext is the span context of the ingest that accepted the
	// event (internal/trace: trace id, span id, flags), the parent of its
	// attempts' spans; nil when tracing was off.
	TraceContext []byte
}

// Delivery is one event to one endpoint: the unit that is queued, retried,
// dead-lettered and replayed.
type Delivery struct {
	ID           string
	EventID      string
	EndpointID   string
	ConsumerID   string
	EventType    string
	Status       Status
	AttemptCount int
	// NextAttemptAt is when a pending delivery is due; nil in other states.
	NextAttemptAt  *time.Time
	LastStatusCode int
	LastError      string
	DeadReason     DeadReason
	CreatedAt      time.Time
	UpdatedAt      time.Time
	DeliveredAt    *time.Time
}

// Attempt is one HTTP request of a delivery.
type Attempt struct {
	ID          string
	DeliveryID  string
	EndpointID  string
	Number      int // 1 for the first attempt of the current budget
	AttemptedAt time.Time
	Duration    time.Duration
	StatusCode  int    // 0 when no answer came
	Response    []byte // at most MaxResponseBodyKeep bytes of the answer
	Error       string
}
