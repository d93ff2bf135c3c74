package client

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/heraldhooks/herald"
)

// Duration is a time.Duration that travels as a Go duration string
// ("30s", "5m"), as the API writes durations.
type Duration time.Duration

// MarshalJSON writes d as a Go duration string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(d.String()) }

// UnmarshalJSON reads a Go duration string.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("duration must be a string such as \"30s\": %w", err)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

// String writes d without the zero units time.Duration adds: "5m", not
// "5m0s".
func (d Duration) String() string { return herald.FormatDuration(time.Duration(d)) }

// Endpoint is an endpoint as the API answers it: every setting, effective
// defaults included. Secret is "" for an ed25519 endpoint (the API answers
// null: its secret is the private key, which it never shows); PublicKey is
// that endpoint's "whpk_" key, and PreviousPublicKey the previous one while
// it still signs after a rotation.
type Endpoint struct {
	ID                      string            `json:"id"`
	ConsumerID              string            `json:"consumer_id"`
	URL                     string            `json:"url"`
	Description             string            `json:"description"`
	EventTypes              []string          `json:"event_types"`
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
	AutoDisableAfterFailures int            `json:"auto_disable_after_failures"`
	AutoDisableAfter         Duration       `json:"auto_disable_after"`
	Health                   EndpointHealth `json:"health"`
	CreatedAt                time.Time      `json:"created_at"`
	UpdatedAt                time.Time      `json:"updated_at"`
	// Raw is the endpoint's JSON as the server sent it.
	Raw json.RawMessage `json:"-"`
}

func (e *Endpoint) setRaw(b json.RawMessage) { e.Raw = b }

// EndpointHealth is how an endpoint has been answering, as Herald keeps it.
// SuccessRate1h and Attempts1h are filled by EndpointGet only.
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
	// succeeded, nil when there were none (or outside EndpointGet).
	SuccessRate1h *float64 `json:"success_rate_1h"`
	Attempts1h    int      `json:"attempts_1h"`
}

// RetryPolicy is an exponential retry policy.
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

// EndpointParams are the settings of POST /v1/endpoints and PATCH
// /v1/endpoints/{id}. Only the fields set are sent: a nil pointer, slice or
// map is left out, so an update changes only what it names.
type EndpointParams struct {
	ConsumerID        *string           `json:"consumer_id,omitempty"`
	URL               *string           `json:"url,omitempty"`
	Description       *string           `json:"description,omitempty"`
	EventTypes        []string          `json:"event_types,omitempty"`
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
	Ordering                 *string   `json:"ordering,omitempty"`
	AutoDisableAfterFailures *int      `json:"auto_disable_after_failures,omitempty"`
	AutoDisableAfter         *Duration `json:"auto_disable_after,omitempty"`
	// Reset names fields (by their JSON name, as "rate_limit") to send as
	// null, which an update takes as "back to the default".
	Reset []string `json:"-"`
}

// body encodes p, with the Reset fields as null.
func (p *EndpointParams) body() ([]byte, error) {
	b, err := marshalBody(p)
	if err != nil || len(p.Reset) == 0 {
		return b, err
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(b, &fields); err != nil {
		return nil, fmt.Errorf("encode request: %w", err)
	}
	for _, name := range p.Reset {
		if _, set := fields[name]; set {
			return nil, fmt.Errorf("%s is both set and reset", name)
		}
		fields[name] = json.RawMessage("null")
	}
	return marshalBody(fields)
}

// ReplayParams filter a bulk replay of an endpoint's deliveries. Zero
// fields do not filter; the server's default status is dead.
type ReplayParams struct {
	Status string
	// Since and Until bound the deliveries' creation; Until is exclusive.
	Since time.Time
	Until time.Time
	// DryRun only counts what would be replayed.
	DryRun bool
	// Rate, when above 0, paces the replay in deliveries per second.
	Rate float64
}

// EventReplayParams choose which of an event's deliveries to replay, and
// how. A zero Status means every terminal status.
type EventReplayParams struct {
	Status string
	// DryRun only counts what would be replayed.
	DryRun bool
	// Rate, when above 0, paces the replay in deliveries per second.
	Rate float64
}

// replayRequest is the body of both bulk replays.
type replayRequest struct {
	Status string  `json:"status,omitempty"`
	Since  string  `json:"since,omitempty"`
	Until  string  `json:"until,omitempty"`
	DryRun bool    `json:"dry_run,omitempty"`
	Rate   float64 `json:"rate,omitempty"`
}

// Replayed answers a bulk replay: how many deliveries went back to pending,
// or with DryRun how many would have.
type Replayed struct {
	Replayed int  `json:"replayed"`
	DryRun   bool `json:"dry_run"`
	// Raw is the answer's JSON as the server sent it.
	Raw json.RawMessage `json:"-"`
}

func (r *Replayed) setRaw(b json.RawMessage) { r.Raw = b }

// EventParams is one event to send. Payload must be JSON; it is sent
// byte for byte.
type EventParams struct {
	// ConsumerID; "" means the server's default consumer.
	ConsumerID     string
	EventType      string
	Payload        json.RawMessage
	IdempotencyKey string
}

// IngestResult answers POST /v1/events.
type IngestResult struct {
	ID string `json:"id"`
	// Duplicate is set when the idempotency key was used before: ID is the
	// first event's, and nothing new was created.
	Duplicate  bool          `json:"duplicate"`
	Deliveries []DeliveryRef `json:"deliveries"`
	// Raw is the answer's JSON as the server sent it.
	Raw json.RawMessage `json:"-"`
}

func (r *IngestResult) setRaw(b json.RawMessage) { r.Raw = b }

// DeliveryRef names a delivery an event made.
type DeliveryRef struct {
	ID         string `json:"id"`
	EndpointID string `json:"endpoint_id"`
}

// Event is an event as the API answers it. Deliveries is filled by
// EventGet only.
type Event struct {
	ID             string    `json:"id"`
	ConsumerID     string    `json:"consumer_id"`
	EventType      string    `json:"event_type"`
	IdempotencyKey string    `json:"idempotency_key"`
	CreatedAt      time.Time `json:"created_at"`
	// Payload is the exact bytes the event was accepted with.
	Payload    json.RawMessage `json:"payload"`
	Deliveries []Delivery      `json:"deliveries"`
	// Raw is the event's JSON as the server sent it.
	Raw json.RawMessage `json:"-"`
}

func (e *Event) setRaw(b json.RawMessage) { e.Raw = b }

// EventListParams filter GET /v1/events; zero fields do not filter.
type EventListParams struct {
	ConsumerID string
	EventType  string
	Since      time.Time
	Until      time.Time
	ListOptions
}

// Delivery is a delivery as the API answers it.
type Delivery struct {
	ID            string     `json:"id"`
	EventID       string     `json:"event_id"`
	EndpointID    string     `json:"endpoint_id"`
	ConsumerID    string     `json:"consumer_id"`
	EventType     string     `json:"event_type"`
	Status        string     `json:"status"`
	AttemptCount  int        `json:"attempt_count"`
	NextAttemptAt *time.Time `json:"next_attempt_at"`
	// LastStatusCode is 0 when no answer came (or no attempt yet).
	LastStatusCode int    `json:"last_status_code"`
	LastError      string `json:"last_error"`
	// DeadReason is set when Status is dead.
	DeadReason  string     `json:"dead_reason"`
	CreatedAt   time.Time  `json:"created_at"`
	UpdatedAt   time.Time  `json:"updated_at"`
	DeliveredAt *time.Time `json:"delivered_at"`
	// Raw is the delivery's JSON as the server sent it (not set for the
	// deliveries inside an Event).
	Raw json.RawMessage `json:"-"`
}

func (d *Delivery) setRaw(b json.RawMessage) { d.Raw = b }

// DeliveryListParams filter GET /v1/deliveries; zero fields do not filter.
type DeliveryListParams struct {
	Status     string
	EndpointID string
	ConsumerID string
	EventID    string
	ListOptions
}

// EndpointListParams filter GET /v1/endpoints.
type EndpointListParams struct {
	ConsumerID string
	ListOptions
}

// Attempt is one HTTP request of a delivery.
type Attempt struct {
	ID          string    `json:"id"`
	DeliveryID  string    `json:"delivery_id"`
	EndpointID  string    `json:"endpoint_id"`
	Number      int       `json:"number"`
	AttemptedAt time.Time `json:"attempted_at"`
	DurationMS  int64     `json:"duration_ms"`
	// StatusCode is 0 when no answer came.
	StatusCode int `json:"status_code"`
	// ResponseBody is the start of the answer (at most 4 KiB).
	ResponseBody string `json:"response_body"`
	Error        string `json:"error"`
	// Raw is the attempt's JSON as the server sent it.
	Raw json.RawMessage `json:"-"`
}

func (a *Attempt) setRaw(b json.RawMessage) { a.Raw = b }

// Duration is how long the attempt took.
func (a *Attempt) Duration() time.Duration { return time.Duration(a.DurationMS) * time.Millisecond }

// Stats answers GET /v1/stats.
type Stats struct {
	// Deliveries counts deliveries by status; every status is present.
	Deliveries map[string]int64 `json:"deliveries"`
	// DeadLetterDepth is the number of dead (replayable) deliveries.
	DeadLetterDepth int64 `json:"dead_letter_depth"`
	// DueNow counts pending deliveries whose time has come.
	DueNow int64 `json:"due_now"`
	// OldestDueAgeSeconds is how long the oldest due delivery has waited.
	OldestDueAgeSeconds float64 `json:"oldest_due_age_seconds"`
	// Raw is the answer's JSON as the server sent it.
	Raw json.RawMessage `json:"-"`
}

func (s *Stats) setRaw(b json.RawMessage) { s.Raw = b }
