package trace

import (
	"context"
	"net/http"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	oteltrace "go.opentelemetry.io/otel/trace"
)

// The span names and attributes Herald records (README, "Traces").
const (
	// SpanIngest is the store write of an ingest: the events, their
	// deliveries and keys in one transaction.
	SpanIngest = "herald.ingest"
	// SpanAttempt is one delivery attempt, a child of its event's ingest.
	SpanAttempt = "herald.attempt"

	AttrEndpointID = "herald.endpoint_id"
	AttrDeliveryID = "herald.delivery_id"
	AttrEventID    = "herald.event_id"
	AttrAttempt    = "herald.attempt"
	AttrOutcome    = "herald.outcome"
	AttrDurationMS = "herald.duration_ms"
	AttrEvents     = "herald.events"
	AttrStatusCode = "http.response.status_code"
	AttrRoute      = "http.route"
	AttrMethod     = "http.request.method"
)

// noEnd is the end of a span that was not started (tracing off): one
// value, nothing allocated.
func noEnd[T any](T) {}

// StartRequest starts the server span of an API call, continuing the
// caller's traceparent, named by its route pattern ("POST /v1/events";
// "unmatched" when none matched). The returned function ends it with the
// status answered. Off, it returns r's context and does nothing.
func (t *Tracing) StartRequest(r *http.Request, pattern string) (context.Context, func(status int)) {
	if !t.On() {
		return r.Context(), noEnd[int]
	}
	route := pattern
	if _, path, ok := strings.Cut(pattern, " "); ok {
		route = path
	}
	name := r.Method + " " + route
	if pattern == "" {
		name, route = r.Method+" unmatched", ""
	}
	ctx := t.prop.Extract(r.Context(), headerCarrier{r.Header})
	ctx, span := t.tracer.Start(ctx, name, oteltrace.WithSpanKind(oteltrace.SpanKindServer),
		oteltrace.WithAttributes(attribute.String(AttrMethod, r.Method), attribute.String(AttrRoute, route)))
	return ctx, func(status int) {
		span.SetAttributes(attribute.Int(AttrStatusCode, status))
		if status >= 500 {
			span.SetStatus(codes.Error, http.StatusText(status))
		}
		span.End()
	}
}

// StartIngest starts the span of an ingest of n events, a child of the
// span in ctx. Context(ctx) of the context it returns is what is stored
// with each event, the parent of its attempts. The returned function ends
// it with the store's error, if any.
func (t *Tracing) StartIngest(ctx context.Context, n int) (context.Context, func(error)) {
	if !t.On() {
		return ctx, noEnd[error]
	}
	ctx, span := t.tracer.Start(ctx, SpanIngest, oteltrace.WithSpanKind(oteltrace.SpanKindInternal),
		oteltrace.WithAttributes(attribute.Int(AttrEvents, n)))
	return ctx, func(err error) {
		if err != nil {
			span.RecordError(err)
			span.SetStatus(codes.Error, "ingest failed")
		}
		span.End()
	}
}

// Attempt names one delivery attempt for its span.
type Attempt struct {
	EndpointID string
	DeliveryID string
	EventID    string
	// Number is the attempt's number, from 1.
	Number int
}

// AttemptEnd is what an attempt came to.
type AttemptEnd struct {
	// StatusCode is the receiver's answer, 0 for none.
	StatusCode int
	Duration   time.Duration
	// Outcome is what the attempt decided: "delivered", "retry", "dead",
	// or "released" when it was handed back unspent.
	Outcome string
	// Error describes a failure, "" on success.
	Error string
}

// StartAttempt starts the client span of a delivery attempt whose event
// stored the ingest's span context stored (Context), as that span's
// child; a root span when stored is nil. TraceParent of the returned
// context is the header that carries it to the receiver. The returned
// function ends it.
func (t *Tracing) StartAttempt(ctx context.Context, stored []byte, a Attempt) (context.Context, func(AttemptEnd)) {
	if !t.On() {
		return ctx, noEnd[AttemptEnd]
	}
	ctx, span := t.tracer.Start(Parent(ctx, stored), SpanAttempt, oteltrace.WithSpanKind(oteltrace.SpanKindClient),
		oteltrace.WithAttributes(
			attribute.String(AttrEndpointID, a.EndpointID),
			attribute.String(AttrDeliveryID, a.DeliveryID),
			attribute.String(AttrEventID, a.EventID),
			attribute.Int(AttrAttempt, a.Number),
		))
	return ctx, func(e AttemptEnd) {
		span.SetAttributes(
			attribute.Int(AttrStatusCode, e.StatusCode),
			attribute.Int64(AttrDurationMS, e.Duration.Milliseconds()),
			attribute.String(AttrOutcome, e.Outcome),
		)
		if e.Error != "" {
			span.SetStatus(codes.Error, e.Error)
		}
		span.End()
	}
}
