package client

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/heraldhooks/herald/internal/wire"
)

// The shapes of requests and answers are internal/wire's, which the server
// uses too; the answer types here add Raw, the JSON as the server sent it,
// which --json prints unchanged.

// Duration is a time.Duration that travels as a Go duration string
// ("30s", "5m"), as the API writes durations.
type Duration = wire.Duration

// Endpoint is an endpoint as the API answers it (wire.Endpoint): every
// setting, effective defaults included.
type Endpoint struct {
	wire.Endpoint
	// Raw is the endpoint's JSON as the server sent it.
	Raw json.RawMessage `json:"-"`
}

func (e *Endpoint) setRaw(b json.RawMessage) { e.Raw = b }

// EndpointHealth is how an endpoint has been answering, as Herald keeps it.
// SuccessRate1h and Attempts1h are filled by EndpointGet only.
type EndpointHealth = wire.EndpointHealth

// RetryPolicy is an exponential retry policy.
type RetryPolicy = wire.RetryPolicy

// RateLimit is a token bucket: PerSecond tokens a second, Burst deep.
type RateLimit = wire.RateLimit

// EndpointParams are the settings of POST /v1/endpoints and PATCH
// /v1/endpoints/{id}. Only the fields set are sent: a nil pointer, slice or
// map is left out, so an update changes only what it names; Reset names
// fields to send as null ("back to the default").
type EndpointParams = wire.EndpointRequest

// endpointBody encodes p, with the Reset fields as null.
func endpointBody(p *EndpointParams) ([]byte, error) {
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

// replayOptions are the wire's dry_run and rate: left out when false and 0.
func replayOptions(dryRun bool, rate float64) wire.ReplayOptions {
	var o wire.ReplayOptions
	if dryRun {
		o.DryRun = &dryRun
	}
	if rate != 0 {
		o.Rate = &rate
	}
	return o
}

// Replayed answers a bulk replay: how many deliveries went back to pending,
// or with DryRun how many would have.
type Replayed struct {
	wire.ReplayResult
	// Raw is the answer's JSON as the server sent it.
	Raw json.RawMessage `json:"-"`
}

func (r *Replayed) setRaw(b json.RawMessage) { r.Raw = b }

// EventParams is one event to send. Payload must be JSON; it is sent
// byte for byte (spliced into a wire.EventRequest).
type EventParams struct {
	// ConsumerID; "" means the server's default consumer.
	ConsumerID     string
	EventType      string
	Payload        json.RawMessage
	IdempotencyKey string
}

// IngestResult answers POST /v1/events.
type IngestResult struct {
	wire.IngestResult
	// Raw is the answer's JSON as the server sent it.
	Raw json.RawMessage `json:"-"`
}

func (r *IngestResult) setRaw(b json.RawMessage) { r.Raw = b }

// DeliveryRef names a delivery an event made.
type DeliveryRef = wire.DeliveryRef

// Event is an event as the API answers it. Deliveries is filled by
// EventGet only; Payload is the exact bytes the event was accepted with.
type Event struct {
	wire.Event
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

// Delivery is a delivery as the API answers it. LastStatusCode is 0 when
// no answer came (or no attempt yet); DeadReason is set when Status is
// dead.
type Delivery struct {
	wire.Delivery
	// Raw is the delivery's JSON as the server sent it.
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

// Attempt is one HTTP request of a delivery; StatusCode is 0 when no
// answer came, and Duration() is how long it took.
type Attempt struct {
	wire.Attempt
	// Raw is the attempt's JSON as the server sent it.
	Raw json.RawMessage `json:"-"`
}

func (a *Attempt) setRaw(b json.RawMessage) { a.Raw = b }

// Stats answers GET /v1/stats.
type Stats struct {
	wire.Stats
	// Raw is the answer's JSON as the server sent it.
	Raw json.RawMessage `json:"-"`
}

func (s *Stats) setRaw(b json.RawMessage) { s.Raw = b }

// StatsSeries answers GET /v1/stats/series.
type StatsSeries struct {
	wire.StatsSeries
	// Raw is the answer's JSON as the server sent it.
	Raw json.RawMessage `json:"-"`
}

func (s *StatsSeries) setRaw(b json.RawMessage) { s.Raw = b }
