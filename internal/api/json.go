package api

import (
	"encoding/json"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/heraldhooks/herald"
	"github.com/heraldhooks/herald/internal/retry"
)

// This file holds the typed shapes of requests and answers, and the
// conversions from domain types. Times are RFC 3339 in UTC, durations Go
// duration strings.

// endpointRequest is the body of POST and PATCH /v1/endpoints. Every field
// is a pointer so that an absent field is told apart from a zero one.
type endpointRequest struct {
	ConsumerID        *string            `json:"consumer_id"`
	URL               *string            `json:"url"`
	Description       *string            `json:"description"`
	EventTypes        *[]string          `json:"event_types"`
	Secret            *string            `json:"secret"`
	Timeout           *string            `json:"timeout"`
	RetrySchedule     *[]string          `json:"retry_schedule"`
	RetryPolicy       *retryPolicyJSON   `json:"retry_policy"`
	RetryClientErrors *bool              `json:"retry_client_errors"`
	RateLimit         *rateLimitJSON     `json:"rate_limit"`
	MaxInFlight       *int               `json:"max_in_flight"`
	SignatureScheme   *string            `json:"signature_scheme"`
	Headers           *map[string]string `json:"headers"`
	// Ordering is "fifo" or "none"; AutoDisableAfterFailures and
	// AutoDisableAfter tune the auto-disable rules (null: the defaults).
	Ordering                 *string `json:"ordering"`
	AutoDisableAfterFailures *int    `json:"auto_disable_after_failures"`
	AutoDisableAfter         *string `json:"auto_disable_after"`
}

// retryPolicyJSON is an exponential retry policy:
// {"type":"exponential","base":"1s","factor":2,"cap":"1h","attempts":10}.
type retryPolicyJSON struct {
	Type     string  `json:"type"`
	Base     string  `json:"base"`
	Factor   float64 `json:"factor"`
	Cap      string  `json:"cap"`
	Attempts int     `json:"attempts"`
}

// rateLimitJSON is a token bucket: per_second tokens a second, burst deep.
type rateLimitJSON struct {
	PerSecond float64 `json:"per_second"`
	Burst     int     `json:"burst"`
}

// endpointJSON is an endpoint in an answer: every setting, effective
// defaults included. Secret is null for ed25519, whose secret is the
// private key: the answer carries its PublicKey instead, and
// PreviousPublicKey while the previous key still signs (showKeys,
// Server.endpointAnswer).
type endpointJSON struct {
	ID                       string            `json:"id"`
	ConsumerID               string            `json:"consumer_id"`
	URL                      string            `json:"url"`
	Description              string            `json:"description"`
	EventTypes               []string          `json:"event_types"`
	Secret                   *string           `json:"secret"`
	PublicKey                *string           `json:"public_key"`
	PreviousPublicKey        *string           `json:"previous_public_key"`
	PreviousSecretExpiresAt  *time.Time        `json:"previous_secret_expires_at"`
	Enabled                  bool              `json:"enabled"`
	DisabledReason           string            `json:"disabled_reason"`
	Timeout                  string            `json:"timeout"`
	RetrySchedule            []string          `json:"retry_schedule"`
	RetryPolicy              *retryPolicyJSON  `json:"retry_policy"`
	RetryClientErrors        bool              `json:"retry_client_errors"`
	RateLimit                *rateLimitJSON    `json:"rate_limit"`
	MaxInFlight              int               `json:"max_in_flight"`
	SignatureScheme          string            `json:"signature_scheme"`
	Headers                  map[string]string `json:"headers"`
	Ordering                 string            `json:"ordering"`
	AutoDisableAfterFailures int               `json:"auto_disable_after_failures"`
	AutoDisableAfter         string            `json:"auto_disable_after"`
	Health                   healthJSON        `json:"health"`
	CreatedAt                time.Time         `json:"created_at"`
	UpdatedAt                time.Time         `json:"updated_at"`
}

// orderingNone is how an answer (and a request) names herald.OrderingNone,
// whose Go value is the empty string.
const orderingNone = "none"

// healthJSON is what Herald knows of how an endpoint has been answering.
// SuccessRate1h and Attempts1h are filled by GET /v1/endpoints/{id} only
// (they cost a look at the last hour's attempts); elsewhere they are null
// and 0.
type healthJSON struct {
	BreakerState        string     `json:"breaker_state"`
	ConsecutiveFailures int        `json:"consecutive_failures"`
	FailingSince        *time.Time `json:"failing_since"`
	LastSuccessAt       *time.Time `json:"last_success_at"`
	LastFailureAt       *time.Time `json:"last_failure_at"`
	ProbeAt             *time.Time `json:"probe_at"`
	PausedUntil         *time.Time `json:"paused_until"`
	RateFactor          float64    `json:"rate_factor"`
	SuccessRate1h       *float64   `json:"success_rate_1h"`
	Attempts1h          int        `json:"attempts_1h"`
}

func toHealthJSON(h *herald.EndpointHealth) healthJSON {
	out := healthJSON{
		BreakerState:        string(h.BreakerState),
		ConsecutiveFailures: h.ConsecutiveFailures,
		FailingSince:        utcPtr(h.FailingSince),
		LastSuccessAt:       utcPtr(h.LastSuccessAt),
		LastFailureAt:       utcPtr(h.LastFailureAt),
		ProbeAt:             utcPtr(h.ProbeAt),
		PausedUntil:         utcPtr(h.PausedUntil),
		RateFactor:          h.RateFactor,
		SuccessRate1h:       h.SuccessRate1h,
		Attempts1h:          h.Attempts1h,
	}
	// An endpoint never tried may carry the zero health: show it as
	// herald.NewEndpointHealth, which is what it means.
	if out.BreakerState == "" {
		out.BreakerState = string(herald.BreakerClosed)
	}
	if out.RateFactor <= 0 {
		out.RateFactor = 1
	}
	return out
}

func toEndpointJSON(ep *herald.Endpoint) endpointJSON {
	out := endpointJSON{
		ID:                       ep.ID,
		ConsumerID:               ep.ConsumerID,
		URL:                      ep.URL,
		Description:              ep.Description,
		EventTypes:               ep.EventTypes,
		PreviousSecretExpiresAt:  utcPtr(ep.PreviousSecretExpiresAt),
		Enabled:                  ep.Enabled,
		DisabledReason:           ep.DisabledReason,
		Timeout:                  herald.FormatDuration(ep.Timeout),
		RetryClientErrors:        ep.RetryClientErrors,
		MaxInFlight:              ep.MaxInFlight,
		SignatureScheme:          string(ep.SignatureScheme),
		Headers:                  ep.Headers,
		Ordering:                 string(ep.Ordering),
		AutoDisableAfterFailures: ep.AutoDisableAfterFailures,
		AutoDisableAfter:         herald.FormatDuration(ep.AutoDisableAfter),
		Health:                   toHealthJSON(&ep.Health),
		CreatedAt:                ep.CreatedAt.UTC(),
		UpdatedAt:                ep.UpdatedAt.UTC(),
	}
	showKeys(&out, ep)
	if out.EventTypes == nil {
		out.EventTypes = []string{}
	}
	if out.Headers == nil {
		out.Headers = map[string]string{}
	}
	if out.Timeout == "0s" {
		out.Timeout = herald.FormatDuration(herald.DefaultTimeout)
	}
	if out.MaxInFlight == 0 {
		out.MaxInFlight = herald.DefaultMaxInFlight
	}
	if out.SignatureScheme == "" {
		out.SignatureScheme = string(herald.SchemeStandard)
	}
	if ep.Ordering == herald.OrderingNone {
		out.Ordering = orderingNone
	}
	if out.AutoDisableAfterFailures <= 0 {
		out.AutoDisableAfterFailures = herald.DefaultAutoDisableAfterFailures
	}
	if ep.AutoDisableAfter <= 0 {
		out.AutoDisableAfter = herald.FormatDuration(herald.DefaultAutoDisableAfter)
	}
	switch {
	case ep.RetryExponential != nil:
		p := ep.RetryExponential
		out.RetryPolicy = &retryPolicyJSON{
			Type: retryPolicyExponential, Base: herald.FormatDuration(p.Base), Factor: p.Factor,
			Cap: herald.FormatDuration(p.Cap), Attempts: p.Attempts,
		}
	case len(ep.RetrySchedule) > 0:
		out.RetrySchedule = retry.FormatSchedule(ep.RetrySchedule)
	default:
		out.RetrySchedule = retry.FormatSchedule(herald.DefaultRetrySchedule)
	}
	if ep.RateLimit != nil {
		out.RateLimit = &rateLimitJSON{PerSecond: ep.RateLimit.PerSecond, Burst: ep.RateLimit.Burst}
	}
	return out
}

// endpointReplayRequest is the body of POST /v1/endpoints/{id}/replay.
type endpointReplayRequest struct {
	Status *string `json:"status"`
	Since  *string `json:"since"`
	Until  *string `json:"until"`
	replayOptionsJSON
}

// eventReplayRequest is the optional body of POST /v1/events/{id}/replay.
type eventReplayRequest struct {
	Status *string `json:"status"`
	replayOptionsJSON
}

// replayOptionsJSON are how a bulk replay goes: DryRun only counts; Rate
// paces the replayed deliveries, in deliveries per second.
type replayOptionsJSON struct {
	DryRun *bool    `json:"dry_run"`
	Rate   *float64 `json:"rate"`
}

// replayedJSON answers a bulk replay: how many deliveries went back to
// pending, or with DryRun how many would have.
type replayedJSON struct {
	Replayed int  `json:"replayed"`
	DryRun   bool `json:"dry_run"`
}

// rotateSecretRequest is the optional body of POST .../rotate-secret.
type rotateSecretRequest struct {
	Secret *string `json:"secret"`
}

// disableRequest is the optional body of POST .../disable.
type disableRequest struct {
	Reason *string `json:"reason"`
}

// emptyRequest is a body that may only be {} (or absent).
type emptyRequest struct{}

// eventRequest is one event to ingest. Payload keeps the exact bytes of the
// request (invariant 5).
type eventRequest struct {
	ConsumerID     *string         `json:"consumer_id"`
	EventType      *string         `json:"event_type"`
	Payload        json.RawMessage `json:"payload"`
	IdempotencyKey *string         `json:"idempotency_key"`
}

// batchRequest is the body of POST /v1/events/batch.
type batchRequest struct {
	Events []json.RawMessage `json:"events"`
}

// ingestJSON answers one ingested event.
type ingestJSON struct {
	ID         string            `json:"id"`
	Duplicate  bool              `json:"duplicate"`
	Deliveries []deliveryRefJSON `json:"deliveries"`
}

// batchJSON answers a batch: one result per event, in order.
type batchJSON struct {
	Data []ingestJSON `json:"data"`
}

type deliveryRefJSON struct {
	ID         string `json:"id"`
	EndpointID string `json:"endpoint_id"`
}

// eventJSON is an event in an answer, but for its payload, which is
// spliced in as raw bytes (see appendEvent): encoding/json would compact a
// json.RawMessage and so change the bytes.
type eventJSON struct {
	ID             string          `json:"id"`
	ConsumerID     string          `json:"consumer_id"`
	EventType      string          `json:"event_type"`
	IdempotencyKey string          `json:"idempotency_key"`
	CreatedAt      time.Time       `json:"created_at"`
	Deliveries     *[]deliveryJSON `json:"deliveries,omitempty"`
}

// deliveryJSON is a delivery in an answer; absent values are null.
type deliveryJSON struct {
	ID             string     `json:"id"`
	EventID        string     `json:"event_id"`
	EndpointID     string     `json:"endpoint_id"`
	ConsumerID     string     `json:"consumer_id"`
	EventType      string     `json:"event_type"`
	Status         string     `json:"status"`
	AttemptCount   int        `json:"attempt_count"`
	NextAttemptAt  *time.Time `json:"next_attempt_at"`
	LastStatusCode *int       `json:"last_status_code"`
	LastError      string     `json:"last_error"`
	DeadReason     *string    `json:"dead_reason"`
	CreatedAt      time.Time  `json:"created_at"`
	UpdatedAt      time.Time  `json:"updated_at"`
	DeliveredAt    *time.Time `json:"delivered_at"`
}

func toDeliveryJSON(d *herald.Delivery) deliveryJSON {
	out := deliveryJSON{
		ID:            d.ID,
		EventID:       d.EventID,
		EndpointID:    d.EndpointID,
		ConsumerID:    d.ConsumerID,
		EventType:     d.EventType,
		Status:        string(d.Status),
		AttemptCount:  d.AttemptCount,
		NextAttemptAt: utcPtr(d.NextAttemptAt),
		LastError:     d.LastError,
		CreatedAt:     d.CreatedAt.UTC(),
		UpdatedAt:     d.UpdatedAt.UTC(),
		DeliveredAt:   utcPtr(d.DeliveredAt),
	}
	if d.LastStatusCode != 0 {
		code := d.LastStatusCode
		out.LastStatusCode = &code
	}
	if d.DeadReason != "" {
		reason := string(d.DeadReason)
		out.DeadReason = &reason
	}
	return out
}

func toDeliveriesJSON(ds []*herald.Delivery) []deliveryJSON {
	out := make([]deliveryJSON, 0, len(ds))
	for _, d := range ds {
		out = append(out, toDeliveryJSON(d))
	}
	return out
}

// attemptJSON is one attempt in an answer. ResponseBody is the kept start
// of the answer's body as text (at most 4 KiB, invalid UTF-8 replaced).
type attemptJSON struct {
	ID           string    `json:"id"`
	DeliveryID   string    `json:"delivery_id"`
	EndpointID   string    `json:"endpoint_id"`
	Number       int       `json:"number"`
	AttemptedAt  time.Time `json:"attempted_at"`
	DurationMS   int64     `json:"duration_ms"`
	StatusCode   *int      `json:"status_code"`
	ResponseBody string    `json:"response_body"`
	Error        string    `json:"error"`
}

func toAttemptJSON(a *herald.Attempt) attemptJSON {
	out := attemptJSON{
		ID:           a.ID,
		DeliveryID:   a.DeliveryID,
		EndpointID:   a.EndpointID,
		Number:       a.Number,
		AttemptedAt:  a.AttemptedAt.UTC(),
		DurationMS:   a.Duration.Milliseconds(),
		ResponseBody: responseText(a.Response),
		Error:        a.Error,
	}
	if a.StatusCode != 0 {
		code := a.StatusCode
		out.StatusCode = &code
	}
	return out
}

// responseText turns kept response bytes into valid UTF-8 of at most
// herald.MaxResponseBodyKeep bytes, cut at a character boundary.
func responseText(b []byte) string {
	s := strings.ToValidUTF8(string(b), "\uFFFD")
	if len(s) <= herald.MaxResponseBodyKeep {
		return s
	}
	s = s[:herald.MaxResponseBodyKeep]
	for len(s) > 0 && !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s
}

// statsJSON answers GET /v1/stats.
type statsJSON struct {
	// ByStatus counts deliveries in each status ("deliveries"); every status is present.
	ByStatus map[string]int64 `json:"deliveries"`
	// DeadLetterDepth is the number of dead deliveries (replayable).
	DeadLetterDepth int64 `json:"dead_letter_depth"`
	// DueNow counts pending deliveries whose time has come.
	DueNow int64 `json:"due_now"`
	// OldestDueAgeSeconds is how long the oldest due delivery has waited.
	OldestDueAgeSeconds float64 `json:"oldest_due_age_seconds"`
}

// apiKeyRequest is the body of POST /v1/api-keys.
type apiKeyRequest struct {
	Name       *string `json:"name"`
	Scope      *string `json:"scope"`
	ConsumerID *string `json:"consumer_id"`
}

// apiKeyJSON is an API key in an answer: never the key itself, which only
// the answer that made it carries (apiKeyCreatedJSON). ConsumerID is null
// for an operator key, LastUsedAt until the key is first used.
type apiKeyJSON struct {
	ID         string     `json:"id"`
	Name       string     `json:"name"`
	Scope      string     `json:"scope"`
	ConsumerID *string    `json:"consumer_id"`
	Prefix     string     `json:"prefix"`
	CreatedAt  time.Time  `json:"created_at"`
	LastUsedAt *time.Time `json:"last_used_at"`
}

// apiKeyCreatedJSON answers POST /v1/api-keys: the key with the one copy
// of its secret Herald ever shows.
type apiKeyCreatedJSON struct {
	apiKeyJSON
	Key string `json:"key"`
}

func toAPIKeyJSON(k *herald.APIKey) apiKeyJSON {
	out := apiKeyJSON{
		ID:         k.ID,
		Name:       k.Name,
		Scope:      string(k.Scope),
		Prefix:     k.Prefix,
		CreatedAt:  k.CreatedAt.UTC(),
		LastUsedAt: utcPtr(k.LastUsedAt),
	}
	if k.ConsumerID != "" {
		c := k.ConsumerID
		out.ConsumerID = &c
	}
	return out
}

// listJSON is one page of a list.
type listJSON[T any] struct {
	Data       []T    `json:"data"`
	NextCursor string `json:"next_cursor"`
}

// statusJSON answers the probes.
type statusJSON struct {
	Status string `json:"status"`
}

func utcPtr(t *time.Time) *time.Time {
	if t == nil || t.IsZero() {
		return nil
	}
	u := t.UTC()
	return &u
}
