// Package trace is a node's OpenTelemetry tracing: the spans of API calls,
// of ingest and of each delivery attempt, exported over OTLP/HTTP
// (protobuf) to the collector the standard OTEL_* variables name, and the
// W3C trace context that joins them across the hop to the receiver.
//
// Tracing is off unless OTEL_EXPORTER_OTLP_ENDPOINT or
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set. Off, a *Tracing is a no-op
// tracer: its spans record nothing, Context gives nil (no bytes stored with
// an event) and TraceParent "" (no header on a webhook), so the hot path
// pays a nil check.
//
// The variables are read through the Getenv given to New, never from the
// process by the SDK, so that tests running in parallel each trace to their
// own collector; the exporter is given every setting as an option.
package trace

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	oteltrace "go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// Config configures New.
type Config struct {
	// Getenv reads the OTEL_* variables (os.Getenv in production).
	Getenv func(string) string
	// ServiceVersion is reported as service.version.
	ServiceVersion string
	// BatchTimeout is how long spans wait to be exported in a batch
	// (default 5 s, or OTEL_BSP_SCHEDULE_DELAY); tests shorten it.
	BatchTimeout time.Duration
}

// Tracing starts spans, or does nothing when tracing is off. Its methods
// are safe for concurrent use; a nil *Tracing is off too.
type Tracing struct {
	tracer   oteltrace.Tracer
	provider *sdktrace.TracerProvider // nil when off
	prop     propagation.TraceContext
}

// Off is tracing that is off: a no-op tracer.
func Off() *Tracing {
	return &Tracing{tracer: noop.NewTracerProvider().Tracer("herald")}
}

// New sets tracing up from the OTEL_* variables that cfg.Getenv reads:
// off (Off) when neither OTEL_EXPORTER_OTLP_ENDPOINT nor
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set, or OTEL_SDK_DISABLED is
// true. Understood besides: OTEL_EXPORTER_OTLP_(TRACES_)HEADERS,
// OTEL_EXPORTER_OTLP_(TRACES_)TIMEOUT, OTEL_SERVICE_NAME,
// OTEL_TRACES_SAMPLER and OTEL_TRACES_SAMPLER_ARG, OTEL_BSP_SCHEDULE_DELAY.
// Only OTLP over HTTP with protobuf is spoken: another
// OTEL_EXPORTER_OTLP_PROTOCOL is refused.
func New(cfg Config) (*Tracing, error) {
	env := cfg.Getenv
	if env == nil {
		return nil, errors.New("trace: no Getenv")
	}
	if strings.EqualFold(strings.TrimSpace(env("OTEL_SDK_DISABLED")), "true") {
		return Off(), nil
	}
	endpoint, err := endpointURL(env)
	if err != nil || endpoint == "" {
		return Off(), err
	}
	var problems []error
	for _, name := range []string{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"} {
		if p := strings.TrimSpace(env(name)); p != "" {
			if p != "http/protobuf" {
				problems = append(problems, fmt.Errorf("%s=%s: only http/protobuf is supported", name, p))
			}
			break
		}
	}
	opts := []otlptracehttp.Option{otlptracehttp.WithEndpointURL(endpoint)}
	if h := first(env, "OTEL_EXPORTER_OTLP_TRACES_HEADERS", "OTEL_EXPORTER_OTLP_HEADERS"); h != "" {
		headers, err := parseHeaders(h)
		if err != nil {
			problems = append(problems, err)
		}
		opts = append(opts, otlptracehttp.WithHeaders(headers))
	}
	if t := first(env, "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "OTEL_EXPORTER_OTLP_TIMEOUT"); t != "" {
		ms, err := strconv.Atoi(t)
		if err != nil || ms <= 0 {
			problems = append(problems, fmt.Errorf("OTEL_EXPORTER_OTLP_TIMEOUT=%s: not a number of milliseconds", t))
		} else {
			opts = append(opts, otlptracehttp.WithTimeout(time.Duration(ms)*time.Millisecond))
		}
	}
	sampler, err := parseSampler(env("OTEL_TRACES_SAMPLER"), env("OTEL_TRACES_SAMPLER_ARG"))
	if err != nil {
		problems = append(problems, err)
	}
	batch := cfg.BatchTimeout
	if d := strings.TrimSpace(env("OTEL_BSP_SCHEDULE_DELAY")); d != "" && batch == 0 {
		ms, err := strconv.Atoi(d)
		if err != nil || ms < 0 {
			problems = append(problems, fmt.Errorf("OTEL_BSP_SCHEDULE_DELAY=%s: not a number of milliseconds", d))
		}
		batch = time.Duration(ms) * time.Millisecond
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("tracing: %w", errors.Join(problems...))
	}
	exporter, err := otlptracehttp.New(context.Background(), opts...)
	if err != nil {
		return nil, fmt.Errorf("tracing: exporter: %w", err)
	}
	service := strings.TrimSpace(env("OTEL_SERVICE_NAME"))
	if service == "" {
		service = "herald"
	}
	var bspOpts []sdktrace.BatchSpanProcessorOption
	if batch > 0 {
		bspOpts = append(bspOpts, sdktrace.WithBatchTimeout(batch))
	}
	provider := sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exporter, bspOpts...),
		sdktrace.WithSampler(sampler),
		sdktrace.WithResource(resource.NewSchemaless(
			attribute.String("service.name", service), attribute.String("service.version", cfg.ServiceVersion))),
	)
	return &Tracing{tracer: provider.Tracer("github.com/heraldhooks/herald"), provider: provider}, nil
}

// endpointURL is the URL spans are posted to: OTEL_EXPORTER_OTLP_TRACES_ENDPOINT
// as it is, or OTEL_EXPORTER_OTLP_ENDPOINT with /v1/traces appended; "" for none.
func endpointURL(env func(string) string) (string, error) {
	if u := strings.TrimSpace(env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")); u != "" {
		if _, err := parseURL("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", u); err != nil {
			return "", err
		}
		return u, nil
	}
	base := strings.TrimSpace(env("OTEL_EXPORTER_OTLP_ENDPOINT"))
	if base == "" {
		return "", nil
	}
	u, err := parseURL("OTEL_EXPORTER_OTLP_ENDPOINT", base)
	if err != nil {
		return "", err
	}
	u.Path = strings.TrimSuffix(u.Path, "/") + "/v1/traces"
	return u.String(), nil
}

func parseURL(name, v string) (*url.URL, error) {
	u, err := url.Parse(v)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("tracing: %s=%s: not an http(s) URL", name, v)
	}
	return u, nil
}

// first is the first of the variables named that is set.
func first(env func(string) string, names ...string) string {
	for _, n := range names {
		if v := strings.TrimSpace(env(n)); v != "" {
			return v
		}
	}
	return ""
}

// parseHeaders reads the W3C-baggage-like list "k=v,k2=v2" (values
// URL-encoded) of OTEL_EXPORTER_OTLP_HEADERS.
func parseHeaders(s string) (map[string]string, error) {
	headers := map[string]string{}
	for pair := range strings.SplitSeq(s, ",") {
		k, v, ok := strings.Cut(pair, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			return nil, errors.New("OTEL_EXPORTER_OTLP_HEADERS: want name=value pairs separated by commas")
		}
		value, err := url.PathUnescape(strings.TrimSpace(v))
		if err != nil {
			return nil, fmt.Errorf("OTEL_EXPORTER_OTLP_HEADERS: %s: %w", k, err)
		}
		headers[k] = value
	}
	return headers, nil
}

// parseSampler reads OTEL_TRACES_SAMPLER and its argument; the default is
// parentbased_always_on.
func parseSampler(name, arg string) (sdktrace.Sampler, error) {
	ratio := 1.0
	if strings.Contains(name, "traceidratio") && arg != "" {
		r, err := strconv.ParseFloat(strings.TrimSpace(arg), 64)
		if err != nil || r < 0 || r > 1 {
			return nil, fmt.Errorf("OTEL_TRACES_SAMPLER_ARG=%s: want a ratio in [0, 1]", arg)
		}
		ratio = r
	}
	switch strings.TrimSpace(name) {
	case "", "parentbased_always_on":
		return sdktrace.ParentBased(sdktrace.AlwaysSample()), nil
	case "always_on":
		return sdktrace.AlwaysSample(), nil
	case "always_off":
		return sdktrace.NeverSample(), nil
	case "parentbased_always_off":
		return sdktrace.ParentBased(sdktrace.NeverSample()), nil
	case "traceidratio":
		return sdktrace.TraceIDRatioBased(ratio), nil
	case "parentbased_traceidratio":
		return sdktrace.ParentBased(sdktrace.TraceIDRatioBased(ratio)), nil
	}
	return nil, fmt.Errorf("OTEL_TRACES_SAMPLER=%s: not a sampler this build knows", name)
}

// On says whether spans are recorded and exported.
func (t *Tracing) On() bool { return t != nil && t.provider != nil }

// Flush exports the spans ended so far.
func (t *Tracing) Flush(ctx context.Context) error {
	if !t.On() {
		return nil
	}
	return t.provider.ForceFlush(ctx)
}

// Shutdown exports the spans ended so far and stops the exporter; spans
// started afterwards are dropped. It is for the end of a node's drain.
func (t *Tracing) Shutdown(ctx context.Context) error {
	if !t.On() {
		return nil
	}
	return t.provider.Shutdown(ctx)
}

// headerCarrier reads an http.Header for the propagator.
type headerCarrier struct {
	h interface{ Get(string) string }
}

func (c headerCarrier) Get(key string) string { return c.h.Get(key) }
func (headerCarrier) Set(string, string)      {}
func (headerCarrier) Keys() []string          { return nil }

// contextLen is the length of a stored span context: the trace id (16
// bytes), the span id (8) and the trace flags (1).
const contextLen = 16 + 8 + 1

// Context is the span context of the span in ctx as the bytes stored with
// an event (contextLen of them), nil when tracing is off or ctx has no
// valid span: nothing is stored then.
func (t *Tracing) Context(ctx context.Context) []byte {
	if !t.On() {
		return nil
	}
	sc := oteltrace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return nil
	}
	b := make([]byte, 0, contextLen)
	tid, sid := sc.TraceID(), sc.SpanID()
	b = append(b, tid[:]...)
	b = append(b, sid[:]...)
	return append(b, byte(sc.TraceFlags()))
}

// Parent is ctx with the remote span context stored as Context made it,
// ctx as it is for nil or bytes that are not one.
func Parent(ctx context.Context, stored []byte) context.Context {
	if len(stored) != contextLen {
		return ctx
	}
	var tid oteltrace.TraceID
	var sid oteltrace.SpanID
	copy(tid[:], stored[:16])
	copy(sid[:], stored[16:24])
	sc := oteltrace.NewSpanContext(oteltrace.SpanContextConfig{
		TraceID: tid, SpanID: sid, TraceFlags: oteltrace.TraceFlags(stored[24]), Remote: true,
	})
	if !sc.IsValid() {
		return ctx
	}
	return oteltrace.ContextWithRemoteSpanContext(ctx, sc)
}

// TraceParent is the W3C traceparent header value of the span in ctx, ""
// when tracing is off or there is no valid span.
func (t *Tracing) TraceParent(ctx context.Context) string {
	if !t.On() {
		return ""
	}
	sc := oteltrace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return ""
	}
	tid, sid := sc.TraceID(), sc.SpanID()
	return "00-" + hex.EncodeToString(tid[:]) + "-" + hex.EncodeToString(sid[:]) + "-" + hex.EncodeToString([]byte{byte(sc.TraceFlags())})
}
