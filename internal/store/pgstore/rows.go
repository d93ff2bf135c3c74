package pgstore

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/heraldhooks/herald"
	"github.com/heraldhooks/herald/internal/ratelimit"
	"github.com/heraldhooks/herald/internal/store"
)

// qualify prefixes each column of a comma-separated list with alias.
func qualify(alias, columns string) string {
	names := strings.Split(columns, ", ")
	for i, n := range names {
		names[i] = alias + "." + n
	}
	return strings.Join(names, ", ")
}

// endpointCols are the columns of endpoints, in endpointRow.dest order.
const endpointCols = "id, consumer_id, url, description, event_types, secret, " +
	"previous_secret, previous_secret_expires_at, enabled, disabled_reason, " +
	"timeout_ns, retry_schedule_ns, retry_exponential, retry_client_errors, " +
	"rate_limit, max_in_flight, signature_scheme, headers, created_at, updated_at, " +
	"ordering, auto_disable_after_failures, auto_disable_after_ns, health, " +
	"bucket_tokens, bucket_at, secrets_encrypted, client_certificate, client_key, filter, " +
	"no_trace_propagation"

// endpointRow receives one endpoints row.
type endpointRow struct {
	ep            herald.Endpoint
	prevExpires   *time.Time
	timeoutNS     int64
	scheduleNS    []int64
	exponential   []byte
	rateLimit     []byte
	headers       []byte
	scheme        string
	maxInFlight   int32
	createdAt     time.Time
	updatedAt     time.Time
	eventTypesArr []string
	ordering      string
	adFailures    int32
	adAfterNS     int64
	health        []byte
	// The rate limit's token bucket, which only claims use.
	bucketTokens float64
	bucketAt     *time.Time
	// sealed says whether ep's secrets are sealed; endpoint leaves them
	// as stored, for the caller to open (store.Secrets.OpenEndpoint).
	sealed bool
}

// dest gives the scan targets, in endpointCols order.
func (r *endpointRow) dest() []any {
	e := &r.ep
	return []any{
		&e.ID, &e.ConsumerID, &e.URL, &e.Description, &r.eventTypesArr, &e.Secret,
		&e.PreviousSecret, &r.prevExpires, &e.Enabled, &e.DisabledReason,
		&r.timeoutNS, &r.scheduleNS, &r.exponential, &e.RetryClientErrors,
		&r.rateLimit, &r.maxInFlight, &r.scheme, &r.headers,
		&r.createdAt, &r.updatedAt,
		&r.ordering, &r.adFailures, &r.adAfterNS, &r.health,
		&r.bucketTokens, &r.bucketAt, &r.sealed, &e.ClientCertificate, &e.ClientKey,
		&e.Filter, &e.NoTracePropagation,
	}
}

// bucket is the endpoint's token bucket; the zero Bucket is full.
func (r *endpointRow) bucket() ratelimit.Bucket {
	if r.bucketAt == nil {
		return ratelimit.Bucket{}
	}
	return ratelimit.Bucket{Tokens: r.bucketTokens, At: r.bucketAt.UTC()}
}

// endpoint turns the row into the domain type, its secrets as stored.
func (r *endpointRow) endpoint() (*herald.Endpoint, error) {
	e := r.ep
	e.EventTypes = r.eventTypesArr
	e.PreviousSecretExpiresAt = utcPtr(r.prevExpires)
	e.Timeout = time.Duration(r.timeoutNS)
	if r.scheduleNS != nil {
		e.RetrySchedule = make([]time.Duration, len(r.scheduleNS))
		for i, ns := range r.scheduleNS {
			e.RetrySchedule[i] = time.Duration(ns)
		}
	}
	if r.exponential != nil {
		e.RetryExponential = new(herald.ExponentialPolicy)
		if err := json.Unmarshal(r.exponential, e.RetryExponential); err != nil {
			return nil, fmt.Errorf("endpoint %s: retry_exponential: %w", e.ID, err)
		}
	}
	if r.rateLimit != nil {
		e.RateLimit = new(herald.RateLimit)
		if err := json.Unmarshal(r.rateLimit, e.RateLimit); err != nil {
			return nil, fmt.Errorf("endpoint %s: rate_limit: %w", e.ID, err)
		}
	}
	if r.headers != nil {
		if err := json.Unmarshal(r.headers, &e.Headers); err != nil {
			return nil, fmt.Errorf("endpoint %s: headers: %w", e.ID, err)
		}
	}
	e.MaxInFlight = int(r.maxInFlight)
	e.SignatureScheme = herald.SignatureScheme(r.scheme)
	e.CreatedAt = r.createdAt.UTC()
	e.UpdatedAt = r.updatedAt.UTC()
	e.Ordering = herald.Ordering(r.ordering)
	e.AutoDisableAfterFailures = int(r.adFailures)
	e.AutoDisableAfter = time.Duration(r.adAfterNS)
	h, err := decodeHealth(r.health)
	if err != nil {
		return nil, fmt.Errorf("endpoint %s: health: %w", e.ID, err)
	}
	e.Health = h
	return &e, nil
}

// endpointArgs are an endpoint's settings as query parameters, nil where a
// setting is unset so it is stored as NULL.
type endpointArgs struct {
	eventTypes  []string
	scheduleNS  []int64
	exponential []byte
	rateLimit   []byte
	headers     []byte
}

// newEndpointArgs turns e's settings into query parameters.
func newEndpointArgs(e *herald.Endpoint) (*endpointArgs, error) {
	a := &endpointArgs{eventTypes: e.EventTypes}
	if e.RetrySchedule != nil {
		a.scheduleNS = make([]int64, len(e.RetrySchedule))
		for i, d := range e.RetrySchedule {
			a.scheduleNS[i] = int64(d)
		}
	}
	var err error
	if e.RetryExponential != nil {
		if a.exponential, err = json.Marshal(e.RetryExponential); err != nil {
			return nil, fmt.Errorf("retry_exponential: %w", err)
		}
	}
	if e.RateLimit != nil {
		if a.rateLimit, err = json.Marshal(e.RateLimit); err != nil {
			return nil, fmt.Errorf("rate_limit: %w", err)
		}
	}
	if e.Headers != nil {
		if a.headers, err = json.Marshal(e.Headers); err != nil {
			return nil, fmt.Errorf("headers: %w", err)
		}
	}
	return a, nil
}

// eventCols are the columns of events, in eventRow.dest order.
const eventCols = "id, consumer_id, event_type, payload, idempotency_key, created_at, trace_context"

// eventRow receives one events row.
type eventRow struct {
	ev  herald.Event
	key *string
}

func (r *eventRow) dest() []any {
	e := &r.ev
	return []any{&e.ID, &e.ConsumerID, &e.EventType, store.PayloadColumn{P: &e.Payload}, &r.key, &e.CreatedAt, &e.TraceContext}
}

func (r *eventRow) event() *herald.Event {
	e := r.ev
	if r.key != nil {
		e.IdempotencyKey = *r.key
	}
	if e.Payload == nil {
		e.Payload = []byte{}
	}
	e.CreatedAt = e.CreatedAt.UTC()
	return &e
}

// deliveryCols are the columns of deliveries, in deliveryRow.dest order.
const deliveryCols = "id, event_id, endpoint_id, consumer_id, event_type, status, " +
	"attempt_count, due_at, last_status_code, last_error, dead_reason, " +
	"created_at, updated_at, delivered_at, lease_token"

// deliveryRow receives one deliveries row.
type deliveryRow struct {
	d            herald.Delivery
	status       string
	attemptCount int32
	dueAt        *time.Time
	lastCode     int32
	deadReason   string
	deliveredAt  *time.Time
	leaseToken   int64
}

func (r *deliveryRow) dest() []any {
	d := &r.d
	return []any{
		&d.ID, &d.EventID, &d.EndpointID, &d.ConsumerID, &d.EventType, &r.status,
		&r.attemptCount, &r.dueAt, &r.lastCode, &d.LastError, &r.deadReason,
		&d.CreatedAt, &d.UpdatedAt, &r.deliveredAt, &r.leaseToken,
	}
}

func (r *deliveryRow) delivery() *herald.Delivery {
	d := r.d
	d.Status = herald.Status(r.status)
	d.AttemptCount = int(r.attemptCount)
	if d.Status == herald.StatusPending {
		d.NextAttemptAt = utcPtr(r.dueAt)
	}
	d.LastStatusCode = int(r.lastCode)
	d.DeadReason = herald.DeadReason(r.deadReason)
	d.CreatedAt = d.CreatedAt.UTC()
	d.UpdatedAt = d.UpdatedAt.UTC()
	d.DeliveredAt = utcPtr(r.deliveredAt)
	return &d
}

// attemptCols are the columns of attempts, in attemptRow.dest order.
const attemptCols = "id, delivery_id, endpoint_id, number, attempted_at, " +
	"duration_ns, status_code, response, error"

// attemptRow receives one attempts row.
type attemptRow struct {
	a          herald.Attempt
	number     int32
	durationNS int64
	statusCode int32
}

func (r *attemptRow) dest() []any {
	a := &r.a
	return []any{
		&a.ID, &a.DeliveryID, &a.EndpointID, &r.number, &a.AttemptedAt, &r.durationNS,
		&r.statusCode, &a.Response, &a.Error,
	}
}

func (r *attemptRow) attempt() *herald.Attempt {
	a := r.a
	a.Number = int(r.number)
	a.AttemptedAt = a.AttemptedAt.UTC()
	a.Duration = time.Duration(r.durationNS)
	a.StatusCode = int(r.statusCode)
	return &a
}
