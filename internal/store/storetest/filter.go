package storetest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhooks/herald/internal/filter"
	"github.com/heraldhooks/herald/internal/store"
)

func filterCases() []testCase {
	return []testCase{
		{"EndpointKeepsItsFilter", testFilterKept},
		{"IngestSkipsFilteredEndpointAndRecordsWhy", testFilterSkips},
		{"IngestRuntimeErrorSkipsAndDoesNotFail", testFilterRuntimeError},
		{"TestEventIgnoresTheFilter", testFilterTestEvent},
		{"PurgeTakesTheSkips", testFilterPurge},
	}
}

// testFilterKept: an endpoint's filter is stored, read back, changed and
// cleared.
func testFilterKept(t *testing.T, s store.Store) {
	ep := newEndpoint("c")
	ep.Filter = "payload.amount > 1000"
	ep = createEndpoint(t, s, ep, at(0))
	got, err := s.EndpointGet(t.Context(), ep.ID)
	require.NoError(t, err)
	require.Equal(t, "payload.amount > 1000", got.Filter)

	got.Filter = ""
	_, err = s.EndpointUpdate(t.Context(), &store.EndpointUpdateParams{Endpoint: got, Now: at(time.Second)})
	require.NoError(t, err)
	got, err = s.EndpointGet(t.Context(), ep.ID)
	require.NoError(t, err)
	require.Empty(t, got.Filter)
}

// testFilterSkips: an event goes to the endpoints whose filters pass and
// to those without; the others get no delivery and are recorded, with
// the reason, in the answer and for EventSkipList. A filter changed is
// the one the next ingest uses.
func testFilterSkips(t *testing.T, s store.Store) {
	plain := createEndpoint(t, s, newEndpoint("c"), at(0))
	big := newEndpoint("c")
	big.Filter = "payload.amount > 1000"
	big = createEndpoint(t, s, big, at(0))
	eur := newEndpoint("c")
	eur.Filter = "payload.currency == 'EUR' && event_type == 'order.paid' && consumer_id == 'c'"
	eur = createEndpoint(t, s, eur, at(0))

	small := ingest(t, s, at(time.Minute), store.EventIngestItem{
		ConsumerID: "c", EventType: "order.paid", Payload: []byte(`{"amount": 5, "currency": "EUR"}`),
	})[0]
	require.ElementsMatch(t, []string{plain.ID, eur.ID}, endpointsOf(small.Deliveries))
	require.Equal(t, []store.EventSkip{{EndpointID: big.ID, Reason: filter.ReasonFilter}}, small.Skips)
	skips, err := s.EventSkipList(t.Context(), small.Event.ID)
	require.NoError(t, err)
	require.Equal(t, []store.EventSkip{{EndpointID: big.ID, Reason: filter.ReasonFilter}}, skips)

	// A batch: one event passes all, one none; a key used again makes
	// nothing new, skips neither.
	res := ingest(t, s, at(2*time.Minute),
		store.EventIngestItem{ConsumerID: "c", EventType: "order.paid", Payload: []byte(`{"amount": 5000, "currency": "EUR"}`), IdempotencyKey: "k"},
		store.EventIngestItem{ConsumerID: "c", EventType: "order.paid", Payload: []byte(`{"amount": 1, "currency": "USD"}`)},
		store.EventIngestItem{ConsumerID: "c", EventType: "order.paid", Payload: []byte(`{"amount": 1, "currency": "USD"}`), IdempotencyKey: "k"},
	)
	require.Len(t, res[0].Deliveries, 3)
	require.Empty(t, res[0].Skips)
	require.ElementsMatch(t, []string{plain.ID}, endpointsOf(res[1].Deliveries))
	require.ElementsMatch(t, []store.EventSkip{
		{EndpointID: big.ID, Reason: filter.ReasonFilter},
		{EndpointID: eur.ID, Reason: filter.ReasonFilter},
	}, res[1].Skips)
	require.True(t, res[2].Duplicate)
	skips, err = s.EventSkipList(t.Context(), res[0].Event.ID)
	require.NoError(t, err)
	require.Empty(t, skips, "an event without a skip writes none")

	// The filter changed: the next ingest fans out with the new one.
	big.Filter = "payload.amount > 1"
	_, err = s.EndpointUpdate(t.Context(), &store.EndpointUpdateParams{Endpoint: big, Now: at(3 * time.Minute)})
	require.NoError(t, err)
	again := ingest(t, s, at(4*time.Minute), store.EventIngestItem{
		ConsumerID: "c", EventType: "order.paid", Payload: []byte(`{"amount": 5, "currency": "EUR"}`),
	})[0]
	require.ElementsMatch(t, []string{plain.ID, big.ID, eur.ID}, endpointsOf(again.Deliveries))
	require.Empty(t, again.Skips)
}

// testFilterRuntimeError: a filter that cannot be evaluated on a payload
// (a missing field, a wrong type, no JSON) skips its endpoint with
// filter_error; the ingest succeeds and the other endpoints get theirs.
func testFilterRuntimeError(t *testing.T, s store.Store) {
	plain := createEndpoint(t, s, newEndpoint("c"), at(0))
	deep := newEndpoint("c")
	deep.Filter = "payload.customer.country == 'FR'"
	deep = createEndpoint(t, s, deep, at(0))

	for i, payload := range []string{`{"amount": 5}`, `{"customer": "just a name"}`, `not json`} {
		res := ingest(t, s, at(time.Duration(i+1)*time.Minute), store.EventIngestItem{
			ConsumerID: "c", EventType: "order.paid", Payload: []byte(payload),
		})[0]
		require.Equal(t, []string{plain.ID}, endpointsOf(res.Deliveries), payload)
		require.Equal(t, []store.EventSkip{{EndpointID: deep.ID, Reason: filter.ReasonFilterError}}, res.Skips, payload)
		skips, err := s.EventSkipList(t.Context(), res.Event.ID)
		require.NoError(t, err)
		require.Equal(t, res.Skips, skips)
	}
	ok := ingest(t, s, at(time.Hour), store.EventIngestItem{
		ConsumerID: "c", EventType: "order.paid", Payload: []byte(`{"customer": {"country": "FR"}}`),
	})[0]
	require.ElementsMatch(t, []string{plain.ID, deep.ID}, endpointsOf(ok.Deliveries))
}

// testFilterTestEvent: an event sent to one endpoint (a test event) goes
// to it whatever its filter.
func testFilterTestEvent(t *testing.T, s store.Store) {
	ep := newEndpoint("c")
	ep.Filter = "false"
	ep = createEndpoint(t, s, ep, at(0))
	res := ingest(t, s, at(time.Minute), store.EventIngestItem{
		ConsumerID: "c", EventType: "herald.test", Payload: []byte(`{}`), EndpointID: ep.ID,
	})[0]
	require.Equal(t, []string{ep.ID}, endpointsOf(res.Deliveries))
	require.Empty(t, res.Skips)
}

// testFilterPurge: an event purged takes the record of its skips with it.
func testFilterPurge(t *testing.T, s store.Store) {
	ep := newEndpoint("c")
	ep.Filter = "false"
	createEndpoint(t, s, ep, at(0))
	res := ingest(t, s, at(time.Minute), store.EventIngestItem{ConsumerID: "c", EventType: "a.b", Payload: []byte(`{}`)})[0]
	require.Len(t, res.Skips, 1)
	purgePass(t, s, at(31*day), 100)
	skips, err := s.EventSkipList(t.Context(), res.Event.ID)
	require.NoError(t, err)
	require.Empty(t, skips)
	_, err = s.EventGet(t.Context(), res.Event.ID)
	require.ErrorIs(t, err, store.ErrNotFound)
}

// endpointsOf lists the endpoints of refs.
func endpointsOf(refs []store.DeliveryRef) []string {
	out := make([]string, len(refs))
	for i, r := range refs {
		out[i] = r.EndpointID
	}
	return out
}
