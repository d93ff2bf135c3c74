package storetest

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhooks/herald/internal/store"
)

func traceCases() []testCase {
	return []testCase{
		{"ContextStoredWithTheEventAndClaimed", testTraceContextClaimed},
		{"NoContextStoresNone", testTraceNoContext},
		{"EndpointKeepsItsPropagationChoice", testTracePropagationKept},
	}
}

// traceContext is a span context as internal/trace stores it: a trace
// id, a span id and the flags (25 bytes).
var traceContext = append(bytes.Repeat([]byte{0xab}, 16), append(bytes.Repeat([]byte{0xcd}, 8), 1)...)

// testTraceContextClaimed: the ingest's span context given with an event
// (tracing on) is stored with it and comes back with the event of each
// of its claimed deliveries, with a batch of several events, keyed or
// not, and from EventGet.
func testTraceContextClaimed(t *testing.T, s store.Store) {
	createEndpoint(t, s, newEndpoint("c"), at(0))
	createEndpoint(t, s, newEndpoint("c"), at(0))
	res := ingest(t, s, at(0),
		store.EventIngestItem{ConsumerID: "c", EventType: "a", Payload: []byte(`{}`), TraceContext: traceContext},
		store.EventIngestItem{ConsumerID: "c", EventType: "b", Payload: []byte(`{}`), TraceContext: traceContext, IdempotencyKey: "k"},
	)
	for _, r := range res {
		require.Equal(t, traceContext, r.Event.TraceContext)
		got, err := s.EventGet(t.Context(), r.Event.ID)
		require.NoError(t, err)
		require.Equal(t, traceContext, got.TraceContext)
	}
	claimed := claimAll(t, s, at(time.Second))
	require.Len(t, claimed, 4)
	for _, c := range claimed {
		require.Equal(t, traceContext, c.Event.TraceContext, "delivery %s", c.Delivery.ID)
	}
}

// testTraceNoContext: an event ingested without a span context (tracing
// off) has none stored, and its deliveries claim none.
func testTraceNoContext(t *testing.T, s store.Store) {
	createEndpoint(t, s, newEndpoint("c"), at(0))
	r := ingestOne(t, s, at(0), "c", "a")
	require.Nil(t, r.Event.TraceContext)
	got, err := s.EventGet(t.Context(), r.Event.ID)
	require.NoError(t, err)
	require.Nil(t, got.TraceContext)
	for _, c := range claimAll(t, s, at(time.Second)) {
		require.Nil(t, c.Event.TraceContext)
	}
}

// testTracePropagationKept: an endpoint propagates by default; its opting
// out is stored, read back (and claimed with it) and changed back.
func testTracePropagationKept(t *testing.T, s store.Store) {
	ep := createEndpoint(t, s, newEndpoint("c"), at(0))
	require.False(t, ep.NoTracePropagation)
	ep.NoTracePropagation = true
	_, err := s.EndpointUpdate(t.Context(), &store.EndpointUpdateParams{Endpoint: ep, Now: at(time.Second)})
	require.NoError(t, err)
	got, err := s.EndpointGet(t.Context(), ep.ID)
	require.NoError(t, err)
	require.True(t, got.NoTracePropagation)
	ingestOne(t, s, at(2*time.Second), "c", "a")
	for _, c := range claimAll(t, s, at(3*time.Second)) {
		require.True(t, c.Endpoint.NoTracePropagation)
	}

	off := newEndpoint("c")
	off.NoTracePropagation = true
	off = createEndpoint(t, s, off, at(0))
	require.True(t, off.NoTracePropagation)
	off.NoTracePropagation = false
	_, err = s.EndpointUpdate(t.Context(), &store.EndpointUpdateParams{Endpoint: off, Now: at(time.Second)})
	require.NoError(t, err)
	got, err = s.EndpointGet(t.Context(), off.ID)
	require.NoError(t, err)
	require.False(t, got.NoTracePropagation)
}
