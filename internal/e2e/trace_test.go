package e2e

import (
	"bytes"
	"compress/gzip"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// collector is an OTLP/HTTP trace collector: it decodes the protobuf
// spans posted to /v1/traces and keeps them.
type collector struct {
	*httptest.Server
	mu    sync.Mutex
	spans []*tracepb.Span
}

func newCollector(t *testing.T) *collector {
	t.Helper()
	c := &collector{}
	c.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/v1/traces" {
			http.NotFound(w, r)
			return
		}
		var body io.Reader = r.Body
		if r.Header.Get("Content-Encoding") == "gzip" {
			zr, err := gzip.NewReader(r.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			body = zr
		}
		raw, err := io.ReadAll(body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		var req collectortrace.ExportTraceServiceRequest
		if err := proto.Unmarshal(raw, &req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		c.mu.Lock()
		for _, rs := range req.GetResourceSpans() {
			for _, ss := range rs.GetScopeSpans() {
				c.spans = append(c.spans, ss.GetSpans()...)
			}
		}
		c.mu.Unlock()
		out, _ := proto.Marshal(&collectortrace.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(out)
	}))
	t.Cleanup(c.Close)
	return c
}

// named returns the spans collected with the name.
func (c *collector) named(name string) []*tracepb.Span {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []*tracepb.Span
	for _, s := range c.spans {
		if s.GetName() == name {
			out = append(out, s)
		}
	}
	return out
}

// strAttr and intAttr are a span's attribute of that key ("" and 0 if
// absent).
func strAttr(s *tracepb.Span, key string) string {
	for _, kv := range s.GetAttributes() {
		if kv.GetKey() == key {
			return kv.GetValue().GetStringValue()
		}
	}
	return ""
}

func intAttr(s *tracepb.Span, key string) int64 {
	for _, kv := range s.GetAttributes() {
		if kv.GetKey() == key {
			return kv.GetValue().GetIntValue()
		}
	}
	return 0
}

// tracingOn makes a node trace to c through its own OTEL_* variables.
func tracingOn(c *collector) func(*options) {
	return func(o *options) {
		o.getenv = func(name string) string {
			if name == "OTEL_EXPORTER_OTLP_ENDPOINT" {
				return c.URL
			}
			return ""
		}
	}
}

// TestTraces: with the OTEL_* variables naming a collector, an API call
// continues the caller's traceparent, the ingest is its child, each
// delivery attempt is a child of the ingest (by the span context stored
// with the event), and the receiver gets a traceparent in that trace,
// the attempt's; an endpoint with trace_propagation false gets none. With
// tracing off no header is sent and nothing is stored with the event.
func TestTraces(t *testing.T) {
	t.Parallel()
	// Each case has databases of its own: a node tracing would otherwise
	// dispatch the other's deliveries.
	t.Run("OneTraceFromTheCallToTheReceiver", func(t *testing.T) {
		t.Parallel()
		backends(t, func(t *testing.T, db string) {
			col := newCollector(t)
			e := setup(t, db, tracingOn(col))
			// The first attempt fails: the retry, claimed later from the
			// database, reads the ingest's context stored with the event.
			rc := newReceiver(t, e.clock, func(n int, _ *http.Request, w http.ResponseWriter) {
				if n == 1 {
					w.WriteHeader(http.StatusServiceUnavailable)
					return
				}
				w.WriteHeader(http.StatusOK)
			})
			quiet := newReceiver(t, e.clock, nil)
			ep := e.createEndpoint(map[string]any{"consumer_id": "c", "url": rc.URL})
			var off struct {
				ID               string `json:"id"`
				TracePropagation bool   `json:"trace_propagation"`
			}
			e.must(http.StatusCreated, "POST", "/v1/endpoints",
				map[string]any{"consumer_id": "c", "url": quiet.URL, "trace_propagation": false}, &off)
			require.False(t, off.TracePropagation)
			var shown struct {
				TracePropagation bool `json:"trace_propagation"`
			}
			e.must(http.StatusOK, "GET", "/v1/endpoints/"+ep.ID, nil, &shown)
			require.True(t, shown.TracePropagation, "the default")

			const callerTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
			const callerSpan = "00f067aa0ba902b7"
			req, err := http.NewRequest("POST", e.api.URL+"/v1/events",
				strings.NewReader(`{"consumer_id":"c","event_type":"order.paid","payload":{"amount":1}}`))
			require.NoError(t, err)
			req.Header.Set("Authorization", "Bearer "+testAPIKey)
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("traceparent", "00-"+callerTrace+"-"+callerSpan+"-01")
			resp, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			var ing ingestJSON
			require.NoError(t, json.NewDecoder(resp.Body).Decode(&ing))
			resp.Body.Close()
			require.Equal(t, http.StatusAccepted, resp.StatusCode)
			require.Len(t, ing.Deliveries, 2)

			rc.waitHits(t, 1)
			quiet.waitHits(t, 1)
			for _, d := range ing.Deliveries {
				if d.EndpointID == ep.ID {
					retry := e.waitStatus(d.ID, "pending") // its retry written
					e.tick(retry.NextAttemptAt.Sub(e.clock.Now()))
				}
			}
			rc.waitHits(t, 2)
			require.NoError(t, e.app.Trace.Flush(t.Context()))

			api := col.named("POST /v1/events")
			require.Len(t, api, 1)
			require.Equal(t, callerTrace, hex.EncodeToString(api[0].GetTraceId()), "the call continues the caller's trace")
			require.Equal(t, callerSpan, hex.EncodeToString(api[0].GetParentSpanId()))
			require.Equal(t, tracepb.Span_SPAN_KIND_SERVER, api[0].GetKind())
			require.Equal(t, int64(http.StatusAccepted), intAttr(api[0], "http.response.status_code"))

			ingest := col.named("herald.ingest")
			require.Len(t, ingest, 1)
			require.Equal(t, api[0].GetTraceId(), ingest[0].GetTraceId())
			require.Equal(t, api[0].GetSpanId(), ingest[0].GetParentSpanId(), "the ingest is the call's child")

			waitFor(t, "the three attempts' spans", func() bool {
				require.NoError(t, e.app.Trace.Flush(t.Context()))
				n := len(col.named("herald.attempt"))
				require.LessOrEqual(t, n, 3, "%d attempt spans", n)
				return n == 3
			})
			type key struct {
				endpoint string
				number   int64
			}
			attempts := map[key]*tracepb.Span{}
			for _, s := range col.named("herald.attempt") {
				require.Equal(t, ingest[0].GetTraceId(), s.GetTraceId())
				require.Equal(t, ingest[0].GetSpanId(), s.GetParentSpanId(), "an attempt is the ingest's child")
				require.Equal(t, tracepb.Span_SPAN_KIND_CLIENT, s.GetKind())
				require.NotEmpty(t, strAttr(s, "herald.delivery_id"))
				attempts[key{strAttr(s, "herald.endpoint_id"), intAttr(s, "herald.attempt")}] = s
			}
			first, second, other := attempts[key{ep.ID, 1}], attempts[key{ep.ID, 2}], attempts[key{off.ID, 1}]
			require.NotNil(t, first)
			require.NotNil(t, second)
			require.NotNil(t, other)
			require.Equal(t, int64(http.StatusServiceUnavailable), intAttr(first, "http.response.status_code"))
			require.Equal(t, "retry", strAttr(first, "herald.outcome"))
			require.Equal(t, int64(http.StatusOK), intAttr(second, "http.response.status_code"))
			require.Equal(t, "delivered", strAttr(second, "herald.outcome"))
			require.Equal(t, "delivered", strAttr(other, "herald.outcome"))

			for i, s := range []*tracepb.Span{first, second} {
				want := "00-" + callerTrace + "-" + hex.EncodeToString(s.GetSpanId()) + "-01"
				require.Equal(t, want, rc.all()[i].Headers.Get("traceparent"), "the receiver joins the trace as attempt %d's child", i+1)
			}
			require.Empty(t, quiet.all()[0].Headers.Values("traceparent"), "trace_propagation false")

			// PATCH turns it back on.
			e.must(http.StatusOK, "PATCH", "/v1/endpoints/"+off.ID, map[string]any{"trace_propagation": true}, &shown)
			require.True(t, shown.TracePropagation)
		})
	})

	t.Run("OffSendsNoHeaderAndStoresNothing", func(t *testing.T) {
		t.Parallel()
		backends(t, func(t *testing.T, db string) {
			e := setup(t, db)
			require.False(t, e.app.Trace.On())
			rc := newReceiver(t, e.clock, nil)
			e.createEndpoint(map[string]any{"consumer_id": "c", "url": rc.URL})
			req, err := http.NewRequest("POST", e.api.URL+"/v1/events",
				bytes.NewReader([]byte(`{"consumer_id":"c","event_type":"order.paid","payload":{}}`)))
			require.NoError(t, err)
			req.Header.Set("Authorization", "Bearer "+testAPIKey)
			req.Header.Set("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
			resp, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			var out ingestJSON
			require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
			resp.Body.Close()
			require.Equal(t, http.StatusAccepted, resp.StatusCode)
			rc.waitHits(t, 1)
			require.Empty(t, rc.all()[0].Headers.Values("traceparent"))
			ev, err := e.app.Store.EventGet(t.Context(), out.ID)
			require.NoError(t, err)
			require.Nil(t, ev.TraceContext, "nothing stored with the event")
		})
	})
}
