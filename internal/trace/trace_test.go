package trace

import (
	"context"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	oteltrace "go.opentelemetry.io/otel/trace"
)

// envOf reads variables from m.
func envOf(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

func TestNew(t *testing.T) {
	t.Parallel()
	t.Run("OffWithoutAnEndpoint", func(t *testing.T) {
		t.Parallel()
		tr, err := New(Config{Getenv: envOf(nil)})
		require.NoError(t, err)
		require.False(t, tr.On())
		ctx, end := tr.StartIngest(t.Context(), 1)
		end(nil)
		require.Nil(t, tr.Context(ctx), "nothing to store")
		require.Empty(t, tr.TraceParent(ctx), "no header")
	})
	t.Run("OffWhenDisabled", func(t *testing.T) {
		t.Parallel()
		tr, err := New(Config{Getenv: envOf(map[string]string{
			"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", "OTEL_SDK_DISABLED": "true"})})
		require.NoError(t, err)
		require.False(t, tr.On())
	})
	t.Run("OnWithAnEndpoint", func(t *testing.T) {
		t.Parallel()
		tr, err := New(Config{Getenv: envOf(map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:4318/v1/traces"})})
		require.NoError(t, err)
		require.True(t, tr.On())
		require.NoError(t, tr.Shutdown(t.Context()))
	})
	t.Run("RefusesWhatItCannotSpeak", func(t *testing.T) {
		t.Parallel()
		for name, env := range map[string]map[string]string{
			"grpc":     {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://h:4317", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"},
			"notAURL":  {"OTEL_EXPORTER_OTLP_ENDPOINT": "h:4318"},
			"sampler":  {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://h:4318", "OTEL_TRACES_SAMPLER": "sometimes"},
			"ratio":    {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://h:4318", "OTEL_TRACES_SAMPLER": "traceidratio", "OTEL_TRACES_SAMPLER_ARG": "2"},
			"headers":  {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://h:4318", "OTEL_EXPORTER_OTLP_HEADERS": "novalue"},
			"timeout":  {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://h:4318", "OTEL_EXPORTER_OTLP_TIMEOUT": "soon"},
			"bspDelay": {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://h:4318", "OTEL_BSP_SCHEDULE_DELAY": "-"},
		} {
			_, err := New(Config{Getenv: envOf(env)})
			require.Error(t, err, name)
		}
	})
}

func TestEndpointURL(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{}, ""},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}, "http://c:4318/v1/traces"},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "https://c/otlp/"}, "https://c/otlp/v1/traces"},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://t/x"}, "http://t/x"},
	} {
		got, err := endpointURL(envOf(c.env))
		require.NoError(t, err)
		require.Equal(t, c.want, got, "%v", c.env)
	}
}

func TestParseHeaders(t *testing.T) {
	t.Parallel()
	h, err := parseHeaders("api-key=a%20b, x=1")
	require.NoError(t, err)
	require.Equal(t, map[string]string{"api-key": "a b", "x": "1"}, h)
}

// onForTest is tracing that records spans but exports none.
func onForTest(tb testing.TB) *Tracing {
	p := sdktrace.NewTracerProvider()
	tb.Cleanup(func() { _ = p.Shutdown(context.Background()) })
	return &Tracing{tracer: p.Tracer("test"), provider: p}
}

// TestStoredContext: the ingest's context stored with an event is the
// parent of the attempt's span, whose traceparent names it.
func TestStoredContext(t *testing.T) {
	t.Parallel()
	tr := onForTest(t)
	r := httptest.NewRequest("POST", "/v1/events", nil)
	r.Header.Set("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	ctx, endCall := tr.StartRequest(r, "POST /v1/events")
	ctx, endIngest := tr.StartIngest(ctx, 1)
	stored := tr.Context(ctx)
	require.Len(t, stored, contextLen)
	ingest := oteltrace.SpanContextFromContext(ctx)
	endIngest(nil)
	endCall(202)

	actx, endAttempt := tr.StartAttempt(context.Background(), stored, Attempt{EndpointID: "ep_1", DeliveryID: "dlv_1", Number: 1})
	defer endAttempt(AttemptEnd{StatusCode: 200, Outcome: "delivered"})
	attempt := oteltrace.SpanContextFromContext(actx)
	require.Equal(t, ingest.TraceID(), attempt.TraceID())
	require.Equal(t, "4bf92f3577b34da6a3ce929d0e0e4736", attempt.TraceID().String(), "the caller's trace")
	ro, ok := oteltrace.SpanFromContext(actx).(sdktrace.ReadOnlySpan)
	require.True(t, ok)
	require.Equal(t, ingest.SpanID(), ro.Parent().SpanID())
	require.Equal(t, "00-4bf92f3577b34da6a3ce929d0e0e4736-"+attempt.SpanID().String()+"-01", tr.TraceParent(actx))

	require.Equal(t, context.Background(), Parent(context.Background(), []byte{1, 2}), "not a stored context")
}

// BenchmarkAttempt is what tracing adds to one attempt: off (no OTEL_*
// variables) against on (spans recorded, none exported here).
func BenchmarkAttempt(b *testing.B) {
	stored := append(make([]byte, 0, contextLen), []byte("0123456789abcdef01234567")...)
	stored = append(stored, 1)
	for _, c := range []struct {
		name string
		tr   *Tracing
	}{{"Off", Off()}, {"On", onForTest(b)}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				ctx, end := c.tr.StartAttempt(context.Background(), stored, Attempt{EndpointID: "ep", DeliveryID: "dlv", Number: 1})
				_ = c.tr.TraceParent(ctx)
				end(AttemptEnd{StatusCode: 200, Outcome: "delivered"})
			}
		})
	}
}
