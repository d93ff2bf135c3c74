package wire

import "time"

// Endpoint is an endpoint in an answer: every setting, effective defaults
// included. Secret is "" (null on the wire) for an ed25519 endpoint, whose
// secret is the private key the API never shows: PublicKey is its "whpk_"
// key instead, and PreviousPublicKey the previous one while it still signs
// after a rotation ("" and null otherwise). Filter is the endpoint's CEL
// filter, null when none.
type Endpoint struct {
	ID                      string            `json:"id"`
	ConsumerID              string            `json:"consumer_id"`
	URL                     string            `json:"url"`
	Description             string            `json:"description"`
	EventTypes              []string          `json:"event_types"`
	Filter                  *string           `json:"filter"`
	Secret                  string            `json:"secret"`
	PublicKey               string            `json:"public_key"`
	PreviousPublicKey       string            `json:"previous_public_key"`
	PreviousSecretExpiresAt *time.Time        `json:"previous_secret_expires_at"`
	Enabled                 bool              `json:"enabled"`
	DisabledReason          string            `json:"disabled_reason"`
	Timeout                 Duration          `json:"timeout"`
	RetrySchedule           []Duration        `json:"retry_schedule"`
	RetryPolicy             *RetryPolicy      `json:"retry_policy"`
	RetryClientErrors       bool              `json:"retry_client_errors"`
	RateLimit               *RateLimit        `json:"rate_limit"`
	MaxInFlight             int               `json:"max_in_flight"`
	SignatureScheme         string            `json:"signature_scheme"`
	Headers                 map[string]string `json:"headers"`
	// Ordering is "none" (parallel delivery) or "fifo".
	Ordering string `json:"ordering"`
	// AutoDisableAfterFailures consecutive failures, or AutoDisableAfter
	// without a success, disable the endpoint (the effective values).
	AutoDisableAfterFailures int      `json:"auto_disable_after_failures"`
	AutoDisableAfter         Duration `json:"auto_disable_after"`
	// ClientCertificate (PEM) is presented to receivers that ask for
	// one (mutual TLS), and ClientCertificateExpiresAt is when it
	// expires; null when none. Its key is never shown.
	ClientCertificate          string     `json:"client_certificate"`
	ClientCertificateExpiresAt *time.Time `json:"client_certificate_expires_at"`
	// TracePropagation says whether webhooks carry the attempt's W3C
	// traceparent when tracing is on (default true).
	TracePropagation bool           `json:"trace_propagation"`
	Health           EndpointHealth `json:"health"`
	CreatedAt        time.Time      `json:"created_at"`
	UpdatedAt        time.Time      `json:"updated_at"`
}

// MarshalJSON writes e with null for an empty Secret, PublicKey,
// PreviousPublicKey and ClientCertificate.
func (e Endpoint) MarshalJSON() ([]byte, error) {
	type fields Endpoint
	return marshal(struct {
		fields
		Secret            *string `json:"secret"`
		PublicKey         *string `json:"public_key"`
		PreviousPublicKey *string `json:"previous_public_key"`
		ClientCertificate *string `json:"client_certificate"`
	}{fields(e), nullString(e.Secret), nullString(e.PublicKey), nullString(e.PreviousPublicKey), nullString(e.ClientCertificate)})
}

// EndpointHealth is how an endpoint has been answering, as Herald keeps it.
// SuccessRate1h, Attempts1h and the queue's figures are filled by GET
// /v1/endpoints/{id} and by GET /v1/endpoints?include=health only (they
// cost a look at the last hour's attempts and the endpoint's queue);
// elsewhere they are null and 0.
type EndpointHealth struct {
	// BreakerState is "closed", "open" or "half_open".
	BreakerState        string     `json:"breaker_state"`
	ConsecutiveFailures int        `json:"consecutive_failures"`
	FailingSince        *time.Time `json:"failing_since"`
	LastSuccessAt       *time.Time `json:"last_success_at"`
	LastFailureAt       *time.Time `json:"last_failure_at"`
	// ProbeAt is, while the breaker is open, when the next probe may go.
	ProbeAt *time.Time `json:"probe_at"`
	// PausedUntil is when a Retry-After pause ends (or ended).
	PausedUntil *time.Time `json:"paused_until"`
	// RateFactor below 1 is the share of its rate the endpoint is held to
	// after 429 answers.
	RateFactor float64 `json:"rate_factor"`
	// SuccessRate1h is the share of the last hour's attempts that
	// succeeded, nil when there were none (or outside GET one endpoint).
	SuccessRate1h *float64 `json:"success_rate_1h"`
	Attempts1h    int      `json:"attempts_1h"`
	// InFlight, Due and Dead are the endpoint's queue (deliveries leased
	// now, due now, dead), and Score its health score (0-100, nil without
	// an attempt in the last hour; herald.HealthScore). They are filled
	// where the hour's figures are (GET one endpoint, and lists with
	// include=health), and nil elsewhere. Counts stop at
	// store.FigureLimit (1,000), which then means at least that many.
	InFlight *int `json:"in_flight"`
	Due      *int `json:"due"`
	Dead     *int `json:"dead"`
	Score    *int `json:"score"`
}

// RetryPolicy is an exponential retry policy, in requests and answers:
// {"type":"exponential","base":"1s","factor":2,"cap":"1h","attempts":10}.
type RetryPolicy struct {
	Type     string   `json:"type"`
	Base     Duration `json:"base"`
	Factor   float64  `json:"factor"`
	Cap      Duration `json:"cap"`
	Attempts int      `json:"attempts"`
}

// RateLimit is a token bucket: PerSecond tokens a second, Burst deep.
type RateLimit struct {
	PerSecond float64 `json:"per_second"`
	Burst     int     `json:"burst"`
}

// EndpointRequest is the body of POST /v1/endpoints and PATCH
// /v1/endpoints/{id}. A nil pointer, slice or map is left out, so an update
// changes only what it names; the server tells absent from present by the
// same nil. Only url is required on create. Filter is a CEL expression
// over event_type, consumer_id and payload; "" or null clears it.
type EndpointRequest struct {
	ConsumerID        *string           `json:"consumer_id,omitempty"`
	URL               *string           `json:"url,omitempty"`
	Description       *string           `json:"description,omitempty"`
	EventTypes        []string          `json:"event_types,omitempty"`
	Filter            *string           `json:"filter,omitempty"`
	Secret            *string           `json:"secret,omitempty"`
	Timeout           *Duration         `json:"timeout,omitempty"`
	RetrySchedule     []Duration        `json:"retry_schedule,omitempty"`
	RetryPolicy       *RetryPolicy      `json:"retry_policy,omitempty"`
	RetryClientErrors *bool             `json:"retry_client_errors,omitempty"`
	RateLimit         *RateLimit        `json:"rate_limit,omitempty"`
	MaxInFlight       *int              `json:"max_in_flight,omitempty"`
	SignatureScheme   *string           `json:"signature_scheme,omitempty"`
	Headers           map[string]string `json:"headers,omitempty"`
	// Ordering is "fifo" or "none".
	Ordering *string `json:"ordering,omitempty"`
	// AutoDisableAfterFailures and AutoDisableAfter tune the auto-disable
	// rules (null: the defaults).
	AutoDisableAfterFailures *int      `json:"auto_disable_after_failures,omitempty"`
	AutoDisableAfter         *Duration `json:"auto_disable_after,omitempty"`
	// ClientCertificate and ClientKey (PEM) are set together; null (Reset
	// "client_certificate") clears both. The key is write-only.
	ClientCertificate *string `json:"client_certificate,omitempty"`
	ClientKey         *string `json:"client_key,omitempty"`
	// TracePropagation false keeps the traceparent header off the
	// endpoint's webhooks; true or null (the default) sends it.
	TracePropagation *bool `json:"trace_propagation,omitempty"`
	// Reset names fields (by their JSON name, as "rate_limit") sent as
	// null, which an update takes as "back to the default". encoding/json
	// alone cannot write them: the client adds them to the body it sends,
	// and the server reads nulls from the body itself.
	Reset []string `json:"-"`
}

// EndpointReplayRequest is the optional body of POST
// /v1/endpoints/{id}/replay: which terminal deliveries (status, default
// dead; since and until, RFC 3339, bound their creation, until exclusive).
type EndpointReplayRequest struct {
	Status *string `json:"status,omitempty"`
	Since  *string `json:"since,omitempty"`
	Until  *string `json:"until,omitempty"`
	ReplayOptions
}

// ReplayOptions are how a bulk replay goes: DryRun only counts; Rate paces
// the replayed deliveries, in deliveries per second.
type ReplayOptions struct {
	DryRun *bool    `json:"dry_run,omitempty"`
	Rate   *float64 `json:"rate,omitempty"`
}

// RotateSecretRequest is the optional body of POST
// /v1/endpoints/{id}/rotate-secret: the new secret, or none to have Herald
// make one.
type RotateSecretRequest struct {
	Secret *string `json:"secret,omitempty"`
}

// DisableRequest is the optional body of POST /v1/endpoints/{id}/disable.
type DisableRequest struct {
	Reason *string `json:"reason,omitempty"`
}

// FilterTestRequest is the optional body of POST
// /v1/endpoints/{id}/filter-test: the filter to try (the endpoint's own
// when absent).
type FilterTestRequest struct {
	Filter *string `json:"filter,omitempty"`
}

// FilterTestResult is what a filter made of one of the consumer's recent
// events: whether it passes, or the error that would skip it (Pass
// false).
type FilterTestResult struct {
	EventID   string  `json:"event_id"`
	EventType string  `json:"event_type"`
	Pass      bool    `json:"pass"`
	Error     *string `json:"error"`
}

// FilterTestAnswer is the answer of POST /v1/endpoints/{id}/filter-test:
// the consumer's last events, newest first.
type FilterTestAnswer struct {
	Data []FilterTestResult `json:"data"`
}
