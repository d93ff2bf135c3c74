package wire

import (
	"encoding/json"
	"time"
)

// EventRequest is one event to ingest (POST /v1/events, and each item of
// a batch). Payload is kept as the exact bytes of the request; a sender
// that wants the bytes it gave kept splices them in itself, since
// encoding/json compacts a json.RawMessage, and so leaves Payload empty
// when it marshals.
type EventRequest struct {
	ConsumerID     *string         `json:"consumer_id,omitempty"`
	EventType      *string         `json:"event_type,omitempty"`
	Payload        json.RawMessage `json:"payload,omitempty"`
	IdempotencyKey *string         `json:"idempotency_key,omitempty"`
}

// BatchRequest is the body of POST /v1/events/batch; each item is an
// EventRequest, decoded one by one so an error can name its index.
type BatchRequest struct {
	Events []json.RawMessage `json:"events"`
}

// IngestResult answers one ingested event. Duplicate is set when the
// idempotency key was used before: ID is the first event's, and nothing
// new was created.
type IngestResult struct {
	ID         string        `json:"id"`
	Duplicate  bool          `json:"duplicate"`
	Deliveries []DeliveryRef `json:"deliveries"`
}

// BatchResult answers a batch: one result per event, in order.
type BatchResult struct {
	Data []IngestResult `json:"data"`
}

// DeliveryRef names a delivery an event made.
type DeliveryRef struct {
	ID         string `json:"id"`
	EndpointID string `json:"endpoint_id"`
}

// Event is an event in an answer. Deliveries is present in the answer of
// GET /v1/events/{id} only (omitzero: nil leaves it out, an empty list is
// written). Payload is the exact bytes the event was accepted with: the
// server splices them in (see EventRequest) and leaves it empty when it
// marshals.
type Event struct {
	ID             string     `json:"id"`
	ConsumerID     string     `json:"consumer_id"`
	EventType      string     `json:"event_type"`
	IdempotencyKey string     `json:"idempotency_key"`
	CreatedAt      time.Time  `json:"created_at"`
	Deliveries     []Delivery `json:"deliveries,omitzero"`
	// Filtered are the endpoints the event's fan-out skipped by their
	// filters, beside Deliveries (GET /v1/events/{id} only).
	Filtered []EventSkip     `json:"filtered,omitzero"`
	Payload  json.RawMessage `json:"payload,omitempty"`
}

// EventSkip is an endpoint an event's filter skipped: reason "filter"
// (false) or "filter_error" (could not be evaluated).
type EventSkip struct {
	EndpointID string `json:"endpoint_id"`
	Reason     string `json:"reason"`
}

// EventReplayRequest is the optional body of POST /v1/events/{id}/replay:
// the status to replay (every terminal one when absent), and how.
type EventReplayRequest struct {
	Status *string `json:"status,omitempty"`
	ReplayOptions
}

// Delivery is a delivery in an answer. LastStatusCode is 0 (null on the
// wire) when no answer came or no attempt was made; DeadReason is set when
// Status is dead ("" and null otherwise).
type Delivery struct {
	ID             string     `json:"id"`
	EventID        string     `json:"event_id"`
	EndpointID     string     `json:"endpoint_id"`
	ConsumerID     string     `json:"consumer_id"`
	EventType      string     `json:"event_type"`
	Status         string     `json:"status"`
	AttemptCount   int        `json:"attempt_count"`
	NextAttemptAt  *time.Time `json:"next_attempt_at"`
	LastStatusCode int        `json:"last_status_code"`
	LastError      string     `json:"last_error"`
	DeadReason     string     `json:"dead_reason"`
	CreatedAt      time.Time  `json:"created_at"`
	UpdatedAt      time.Time  `json:"updated_at"`
	DeliveredAt    *time.Time `json:"delivered_at"`
}

// MarshalJSON writes d with null for a zero LastStatusCode and an empty
// DeadReason.
func (d Delivery) MarshalJSON() ([]byte, error) {
	type fields Delivery
	return marshal(struct {
		fields
		LastStatusCode *int    `json:"last_status_code"`
		DeadReason     *string `json:"dead_reason"`
	}{fields(d), nullInt(d.LastStatusCode), nullString(d.DeadReason)})
}

// Attempt is one HTTP request of a delivery. StatusCode is 0 (null on the
// wire) when no answer came; ResponseBody is the kept start of the answer
// as text (at most 4 KiB, invalid UTF-8 replaced).
type Attempt struct {
	ID           string    `json:"id"`
	DeliveryID   string    `json:"delivery_id"`
	EndpointID   string    `json:"endpoint_id"`
	Number       int       `json:"number"`
	AttemptedAt  time.Time `json:"attempted_at"`
	DurationMS   int64     `json:"duration_ms"`
	StatusCode   int       `json:"status_code"`
	ResponseBody string    `json:"response_body"`
	Error        string    `json:"error"`
}

// MarshalJSON writes a with null for a zero StatusCode.
func (a Attempt) MarshalJSON() ([]byte, error) {
	type fields Attempt
	return marshal(struct {
		fields
		StatusCode *int `json:"status_code"`
	}{fields(a), nullInt(a.StatusCode)})
}

// Duration is how long the attempt took.
func (a *Attempt) Duration() time.Duration { return time.Duration(a.DurationMS) * time.Millisecond }

// Stats answers GET /v1/stats.
type Stats struct {
	// Deliveries counts deliveries by status; every status is present.
	// Left out with ?counts=false, which spares the count of every
	// delivery kept.
	Deliveries map[string]int64 `json:"deliveries,omitempty"`
	// DeadLetterDepth is the number of dead (replayable) deliveries.
	DeadLetterDepth int64 `json:"dead_letter_depth"`
	// DueNow counts pending deliveries whose time has come.
	DueNow int64 `json:"due_now"`
	// OldestDueAgeSeconds is how long the oldest due delivery has waited.
	OldestDueAgeSeconds float64 `json:"oldest_due_age_seconds"`
}

// StatsSeries is the answer of GET /v1/stats/series: the activity and the
// queue's depth of the window before the minute under way, in points of
// Step each, oldest first.
type StatsSeries struct {
	// Window is "1h" or "24h"; Step "1m" or "15m".
	Window string       `json:"window"`
	Step   string       `json:"step"`
	Points []StatsPoint `json:"points"`
}

// StatsPoint is the activity of one step, from At.
type StatsPoint struct {
	At time.Time `json:"at"`
	// Attempts counts the HTTP attempts made, Succeeded those answered
	// 2xx, Failed the others.
	Attempts  int64 `json:"attempts"`
	Succeeded int64 `json:"succeeded"`
	Failed    int64 `json:"failed"`
	// Retries counts the attempts that scheduled another; Exhausted those
	// that sent their delivery dead.
	Retries   int64 `json:"retries"`
	Exhausted int64 `json:"exhausted"`
	// DeliveriesPerSecond is Attempts over the step's seconds.
	DeliveriesPerSecond float64 `json:"deliveries_per_second"`
	// SuccessRate is Succeeded/Attempts; null without attempts, and so
	// are the latencies.
	SuccessRate *float64 `json:"success_rate"`
	// LatencyP50MS and LatencyP95MS are the attempts' median and 95th
	// percentile durations, read from a histogram (within its bucket).
	LatencyP50MS *float64 `json:"latency_p50_ms"`
	LatencyP95MS *float64 `json:"latency_p95_ms"`
	// DueNow, OldestDueSeconds and Dead are the queue's depth, sampled
	// once a minute: the deliveries due, how long the oldest of them had
	// waited, and the dead-letter depth. A step of several minutes gives
	// each figure's highest sample. Null where the step has no sample
	// (unknown, not an empty queue).
	DueNow           *int64   `json:"due_now"`
	OldestDueSeconds *float64 `json:"oldest_due_seconds"`
	Dead             *int64   `json:"dead"`
}
