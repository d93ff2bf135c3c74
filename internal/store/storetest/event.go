package storetest

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhooks/herald"
	"github.com/heraldhooks/herald/internal/store"
)

func eventCases() []testCase {
	return []testCase{
		{"IngestFansOutToMatchingEnabledEndpoints", testIngestFanOut},
		{"IngestWithoutEndpointsKeepsEvent", testIngestNoEndpoints},
		{"IngestToOneEndpointOnly", testIngestToOneEndpoint},
		{"IngestIdempotencyKeyPerConsumer", testIngestIdempotency},
		{"IngestDuplicateKeysInOneBatch", testIngestBatchDuplicates},
		{"IngestConcurrentDuplicatesMakeOneEvent", testIngestConcurrentDuplicates},
		{"IngestConcurrentCallsEachGetTheirOwnAnswer", testIngestConcurrentCallsEachGetTheirOwnAnswer},
		{"IngestKeepsPayloadBytes", testIngestPayloadBytes},
		{"IngestBatchIsAtomic", testIngestAtomic},
		{"GetUnknownIsNotFound", testEventGetUnknown},
		{"ListFiltersAndPaginates", testEventList},
	}
}

// testIngestToOneEndpoint: an item that names an endpoint (a test event)
// gets one delivery, to that endpoint, whatever its filter, and none to the
// consumer's other endpoints; an endpoint that is disabled or another
// consumer's gets none.
func testIngestToOneEndpoint(t *testing.T, s store.Store) {
	target := createEndpoint(t, s, newEndpoint("c", "order.*"), at(0))
	createEndpoint(t, s, newEndpoint("c", "*"), at(0))
	createEndpoint(t, s, newEndpoint("c", "herald.*"), at(0))
	disabled := createEndpoint(t, s, newEndpoint("c", "*"), at(0))
	disableEndpoint(t, s, disabled.ID, at(0))
	other := createEndpoint(t, s, newEndpoint("someone_else", "*"), at(0))

	res := ingest(t, s, at(time.Minute), store.EventIngestItem{
		ConsumerID: "c", EventType: "herald.test", Payload: []byte(`{"test":true}`), EndpointID: target.ID,
	})[0]
	require.Len(t, res.Deliveries, 1)
	require.Equal(t, target.ID, res.Deliveries[0].EndpointID)
	d := getDelivery(t, s, res.Deliveries[0].ID)
	require.Equal(t, target.ID, d.EndpointID)
	require.Equal(t, "herald.test", d.EventType)
	require.Equal(t, herald.StatusPending, d.Status)

	for _, id := range []string{disabled.ID, other.ID} {
		res := ingest(t, s, at(2*time.Minute), store.EventIngestItem{
			ConsumerID: "c", EventType: "herald.test", Payload: []byte(`{}`), EndpointID: id,
		})[0]
		require.Empty(t, res.Deliveries, "endpoint %s", id)
		ev, err := s.EventGet(t.Context(), res.Event.ID)
		require.NoError(t, err)
		require.Equal(t, "herald.test", ev.EventType)
	}

	// Beside an ordinary event in the same call, each goes its own way.
	both := ingest(t, s, at(3*time.Minute),
		store.EventIngestItem{ConsumerID: "c", EventType: "herald.test", Payload: []byte(`{}`), EndpointID: target.ID},
		store.EventIngestItem{ConsumerID: "c", EventType: "order.created", Payload: []byte(`{}`)},
	)
	require.Len(t, both[0].Deliveries, 1)
	require.Len(t, both[1].Deliveries, 2, "order.* and *")
}

func testIngestFanOut(t *testing.T, s store.Store) {
	all := createEndpoint(t, s, newEndpoint("c", "*"), at(0))
	exact := createEndpoint(t, s, newEndpoint("c", "order.created"), at(0))
	prefix := createEndpoint(t, s, newEndpoint("c", "order.*"), at(0))
	invoices := createEndpoint(t, s, newEndpoint("c", "invoice.*", "refund.done"), at(0))
	disabled := createEndpoint(t, s, newEndpoint("c", "*"), at(0))
	disableEndpoint(t, s, disabled.ID, at(0))
	createEndpoint(t, s, newEndpoint("someone_else", "*"), at(0))
	createdDisabled := newEndpoint("c", "*")
	createdDisabled.Enabled = false
	createEndpoint(t, s, createdDisabled, at(0))

	cases := []struct {
		eventType string
		want      []string
	}{
		{"order.created", []string{all.ID, exact.ID, prefix.ID}},
		{"order.line.added", []string{all.ID, prefix.ID}},
		{"order", []string{all.ID}},
		{"orders.created", []string{all.ID}},
		{"invoice.paid", []string{all.ID, invoices.ID}},
		{"refund.done", []string{all.ID, invoices.ID}},
	}
	for i, tc := range cases {
		now := at(time.Duration(i+1) * time.Minute)
		payload := fmt.Appendf(nil, `{"i":%d}`, i)
		res := ingest(t, s, now, store.EventIngestItem{
			ConsumerID: "c", EventType: tc.eventType, Payload: payload, IdempotencyKey: fmt.Sprint("k", i),
		})[0]
		require.False(t, res.Duplicate)
		ev := res.Event
		require.Regexp(t, `^evt_[0-9a-z]{26}$`, ev.ID)
		require.Equal(t, "c", ev.ConsumerID)
		require.Equal(t, tc.eventType, ev.EventType)
		require.Equal(t, string(payload), string(ev.Payload))
		require.Equal(t, fmt.Sprint("k", i), ev.IdempotencyKey)
		requireTime(t, now, ev.CreatedAt)

		var got []string
		for _, ref := range res.Deliveries {
			got = append(got, ref.EndpointID)
			require.Regexp(t, `^dlv_[0-9a-z]{26}$`, ref.ID)
			d := getDelivery(t, s, ref.ID)
			require.Equal(t, ref.ID, d.ID)
			require.Equal(t, ev.ID, d.EventID)
			require.Equal(t, ref.EndpointID, d.EndpointID)
			require.Equal(t, "c", d.ConsumerID)
			require.Equal(t, tc.eventType, d.EventType)
			require.Equal(t, herald.StatusPending, d.Status)
			require.Zero(t, d.AttemptCount)
			requireTimePtr(t, now, d.NextAttemptAt, "a new delivery is due at once")
			require.Zero(t, d.LastStatusCode)
			require.Empty(t, d.LastError)
			require.Empty(t, d.DeadReason)
			requireTime(t, now, d.CreatedAt)
			requireTime(t, now, d.UpdatedAt)
			require.Nil(t, d.DeliveredAt)
		}
		require.ElementsMatch(t, tc.want, got, tc.eventType)

		read, err := s.EventGet(t.Context(), ev.ID)
		require.NoError(t, err)
		require.Equal(t, ev.ID, read.ID)
		require.Equal(t, "c", read.ConsumerID)
		require.Equal(t, tc.eventType, read.EventType)
		require.Equal(t, string(payload), string(read.Payload))
		require.Equal(t, fmt.Sprint("k", i), read.IdempotencyKey)
		requireTime(t, now, read.CreatedAt)
	}
}

func testIngestNoEndpoints(t *testing.T, s store.Store) {
	res := ingestOne(t, s, at(0), "lonely", "order.created")
	require.False(t, res.Duplicate)
	require.Empty(t, res.Deliveries)
	ev, err := s.EventGet(t.Context(), res.Event.ID)
	require.NoError(t, err)
	require.Equal(t, "lonely", ev.ConsumerID)
	require.Empty(t, ev.IdempotencyKey)
}

// deliveryIDsOf lists the ids of every delivery of consumer.
func deliveryIDsOf(t *testing.T, s store.Store, consumer string) []string {
	t.Helper()
	page, err := s.DeliveryList(t.Context(), &store.DeliveryListParams{ConsumerID: consumer, Limit: store.MaxListLimit})
	require.NoError(t, err)
	ids := make([]string, len(page.Items))
	for i, d := range page.Items {
		ids[i] = d.ID
	}
	return ids
}

// eventIDsOf lists the ids of every event of consumer.
func eventIDsOf(t *testing.T, s store.Store, consumer string) []string {
	t.Helper()
	page, err := s.EventList(t.Context(), &store.EventListParams{ConsumerID: consumer, Limit: store.MaxListLimit})
	require.NoError(t, err)
	ids := make([]string, len(page.Items))
	for i, ev := range page.Items {
		ids[i] = ev.ID
	}
	return ids
}

func testIngestIdempotency(t *testing.T, s store.Store) {
	createEndpoint(t, s, newEndpoint("c"), at(0))
	createEndpoint(t, s, newEndpoint("c", "order.*"), at(0))
	createEndpoint(t, s, newEndpoint("d"), at(0))

	first := ingest(t, s, at(time.Second), store.EventIngestItem{
		ConsumerID: "c", EventType: "order.created", Payload: []byte(`{"v":1}`), IdempotencyKey: "order-1-created",
	})[0]
	require.False(t, first.Duplicate)
	require.Len(t, first.Deliveries, 2)

	// The same key again, even with another body, is the first event.
	again := ingest(t, s, at(time.Minute), store.EventIngestItem{
		ConsumerID: "c", EventType: "invoice.paid", Payload: []byte(`{"v":2}`), IdempotencyKey: "order-1-created",
	})[0]
	require.True(t, again.Duplicate)
	require.Equal(t, first.Event.ID, again.Event.ID)
	require.Equal(t, "order.created", again.Event.EventType)
	require.Equal(t, `{"v":1}`, string(again.Event.Payload))
	require.Equal(t, "order-1-created", again.Event.IdempotencyKey)
	requireTime(t, at(time.Second), again.Event.CreatedAt)
	require.ElementsMatch(t, first.Deliveries, again.Deliveries)
	require.Equal(t, []string{first.Event.ID}, eventIDsOf(t, s, "c"), "a duplicate creates no event")
	require.Len(t, deliveryIDsOf(t, s, "c"), 2, "a duplicate creates no delivery")

	// The key still answers after the deliveries have moved on.
	for _, c := range claimAll(t, s, at(2*time.Minute)) {
		finish(t, s, at(2*time.Minute), c, herald.StatusDelivered)
	}
	later := ingest(t, s, at(time.Hour), store.EventIngestItem{
		ConsumerID: "c", EventType: "order.created", Payload: []byte(`{"v":1}`), IdempotencyKey: "order-1-created",
	})[0]
	require.True(t, later.Duplicate)
	require.Equal(t, first.Event.ID, later.Event.ID)
	require.ElementsMatch(t, first.Deliveries, later.Deliveries)
	requireNoneDue(t, s, at(2*time.Hour))

	// Another consumer's key space is its own.
	other := ingest(t, s, at(time.Hour), store.EventIngestItem{
		ConsumerID: "d", EventType: "order.created", Payload: []byte(`{"v":1}`), IdempotencyKey: "order-1-created",
	})[0]
	require.False(t, other.Duplicate)
	require.NotEqual(t, first.Event.ID, other.Event.ID)
	require.Equal(t, "d", other.Event.ConsumerID)
	require.Len(t, other.Deliveries, 1)

	// No key, no deduplication.
	a := ingestOne(t, s, at(time.Hour), "c", "order.created")
	b := ingestOne(t, s, at(time.Hour), "c", "order.created")
	require.False(t, a.Duplicate)
	require.False(t, b.Duplicate)
	require.NotEqual(t, a.Event.ID, b.Event.ID)
	require.Len(t, eventIDsOf(t, s, "c"), 3)
}

func testIngestBatchDuplicates(t *testing.T, s store.Store) {
	createEndpoint(t, s, newEndpoint("c"), at(0))
	earlier := ingest(t, s, at(time.Second), store.EventIngestItem{
		ConsumerID: "c", EventType: "a", Payload: []byte(`0`), IdempotencyKey: "k0",
	})[0]

	res := ingest(t, s, at(time.Minute),
		store.EventIngestItem{ConsumerID: "c", EventType: "a", Payload: []byte(`1`), IdempotencyKey: "k1"},
		store.EventIngestItem{ConsumerID: "c", EventType: "a", Payload: []byte(`2`), IdempotencyKey: "k1"},
		store.EventIngestItem{ConsumerID: "c", EventType: "a", Payload: []byte(`3`), IdempotencyKey: "k0"},
		store.EventIngestItem{ConsumerID: "c", EventType: "a", Payload: []byte(`4`)},
		store.EventIngestItem{ConsumerID: "c", EventType: "a", Payload: []byte(`5`), IdempotencyKey: "k2"},
	)
	require.False(t, res[0].Duplicate)
	require.Equal(t, "1", string(res[0].Event.Payload))
	require.Len(t, res[0].Deliveries, 1)

	require.True(t, res[1].Duplicate, "a key used earlier in the same batch")
	require.Equal(t, res[0].Event.ID, res[1].Event.ID)
	require.Equal(t, "1", string(res[1].Event.Payload))
	require.Equal(t, res[0].Deliveries, res[1].Deliveries)

	require.True(t, res[2].Duplicate, "a key used by an earlier call")
	require.Equal(t, earlier.Event.ID, res[2].Event.ID)
	require.Equal(t, "0", string(res[2].Event.Payload))
	require.Equal(t, earlier.Deliveries, res[2].Deliveries)

	require.False(t, res[3].Duplicate)
	require.False(t, res[4].Duplicate)
	require.Equal(t, "5", string(res[4].Event.Payload))

	require.Len(t, eventIDsOf(t, s, "c"), 4)
	require.Len(t, deliveryIDsOf(t, s, "c"), 4)
}

func testIngestConcurrentDuplicates(t *testing.T, s store.Store) {
	createEndpoint(t, s, newEndpoint("c"), at(0))
	createEndpoint(t, s, newEndpoint("c"), at(0))

	const n = 20
	var (
		wg      sync.WaitGroup
		start   = make(chan struct{})
		results = make([]store.EventIngestResult, n)
		errs    = make([]error, n)
	)
	for i := range n {
		wg.Go(func() {
			<-start
			res, err := s.EventIngest(t.Context(), &store.EventIngestParams{
				Events: []store.EventIngestItem{{
					ConsumerID: "c", EventType: "order.created",
					Payload: fmt.Appendf(nil, `{"i":%d}`, i), IdempotencyKey: "same",
				}},
				Now: at(time.Second),
			})
			errs[i] = err
			if err == nil && len(res) == 1 {
				results[i] = res[0]
			}
		})
	}
	close(start)
	wg.Wait()

	fresh := 0
	for i := range n {
		require.NoError(t, errs[i])
		require.NotNil(t, results[i].Event)
		if !results[i].Duplicate {
			fresh++
		}
	}
	require.Equal(t, 1, fresh, "exactly one ingest makes the event")
	for i := range n {
		require.Equal(t, results[0].Event.ID, results[i].Event.ID)
		require.Equal(t, string(results[0].Event.Payload), string(results[i].Event.Payload))
		require.ElementsMatch(t, results[0].Deliveries, results[i].Deliveries)
	}
	require.Len(t, eventIDsOf(t, s, "c"), 1)
	require.Len(t, deliveryIDsOf(t, s, "c"), 2)
	require.Len(t, results[0].Deliveries, 2)
}

func testIngestPayloadBytes(t *testing.T, s store.Store) {
	in := newEndpoint("c")
	in.MaxInFlight = 20 // one claim takes them all
	ep := createEndpoint(t, s, in, at(0))
	payloads := []string{
		`{"b":1,"a":2,"c":{"z":0,"y":[3,2,1]}}`,
		"{ \"a\" :\t[ 1 , 2 ] ,\n  \"b\":null }\n",
		`{"name":"Zoë 🚀 日本語","emoji":"👩‍👩‍👧"}`,
		`{"s":"quote \" backslash \\ slash \/ nl \n tab \t nul \u0000 e \u00e9 pair \ud83d\ude80"}`,
		`{"n":123456789012345678901234567890,"f":1.0e+300,"z":-0.0,"e":1E-7,"i":0.1000}`,
		`"just a string"`,
		`42`,
		`123456789012345678901234567890`,
		`[]`,
		`{}`,
		`null`,
		`[{"a":1},{"a":1}]`,
	}
	items := make([]store.EventIngestItem, len(payloads))
	for i, p := range payloads {
		items[i] = store.EventIngestItem{ConsumerID: "c", EventType: "order.created", Payload: []byte(p)}
	}
	res := ingest(t, s, at(time.Second), items...)

	byEvent := map[string]string{}
	for i, r := range res {
		require.Equal(t, payloads[i], string(r.Event.Payload), "ingest answer %d", i)
		ev, err := s.EventGet(t.Context(), r.Event.ID)
		require.NoError(t, err)
		require.Equal(t, payloads[i], string(ev.Payload), "event get %d", i)
		byEvent[r.Event.ID] = payloads[i]
	}

	page, err := s.EventList(t.Context(), &store.EventListParams{ConsumerID: "c"})
	require.NoError(t, err)
	require.Len(t, page.Items, len(payloads))
	for _, ev := range page.Items {
		require.Equal(t, byEvent[ev.ID], string(ev.Payload), "event list")
	}

	claimed := claim(t, s, at(time.Minute), store.MaxListLimit)
	require.Len(t, claimed, len(payloads))
	for _, c := range claimed {
		require.Equal(t, ep.ID, c.Endpoint.ID)
		require.Equal(t, byEvent[c.Event.ID], string(c.Event.Payload), "claim")
	}
}

func testIngestAtomic(t *testing.T, s store.Store) {
	createEndpoint(t, s, newEndpoint("c"), at(0))
	createEndpoint(t, s, newEndpoint("c", "order.*"), at(0))
	items := []store.EventIngestItem{
		{ConsumerID: "c", EventType: "order.created", Payload: []byte(`{"n":1}`), IdempotencyKey: "k1"},
		{ConsumerID: "c", EventType: "order.paid", Payload: []byte(`{"n":2}`), IdempotencyKey: "k2"},
		{ConsumerID: "c", EventType: "order.shipped", Payload: []byte(`{"n":3}`), IdempotencyKey: "k1"},
		{ConsumerID: "c", EventType: "invoice.paid", Payload: []byte(`{"n":4}`)},
	}

	// Cancel the call at every step it takes in turn, until it gets through.
	// Each cancelled call must leave nothing behind.
	failures := 0
	var res []store.EventIngestResult
	for n := 0; ; n++ {
		require.Less(t, n, 10000, "ingest never got through")
		ctx := newCtxCancelledAfter(t.Context(), n)
		got, err := s.EventIngest(ctx, &store.EventIngestParams{Events: items, Now: at(time.Second)})
		if err == nil {
			res = got
			break
		}
		failures++
		require.Empty(t, eventIDsOf(t, s, "c"), "cancelled at step %d: %v", n, err)
		require.Empty(t, deliveryIDsOf(t, s, "c"), "cancelled at step %d: %v", n, err)
	}
	require.Positive(t, failures, "a cancelled context fails the ingest")
	t.Logf("ingest cancelled at %d steps before it got through", failures)

	// The keys of the failed calls were not kept either.
	require.Len(t, res, 4)
	require.False(t, res[0].Duplicate)
	require.False(t, res[1].Duplicate)
	require.True(t, res[2].Duplicate)
	require.Equal(t, res[0].Event.ID, res[2].Event.ID)
	require.False(t, res[3].Duplicate)
	require.Len(t, eventIDsOf(t, s, "c"), 3)
	require.Len(t, deliveryIDsOf(t, s, "c"), 5)
}

func testEventGetUnknown(t *testing.T, s store.Store) {
	_, err := s.EventGet(t.Context(), "evt_00000000000000000000000000")
	expectNotFound(t, err)
}

func testEventList(t *testing.T, s store.Store) {
	var orders, invoices []string
	for i := range 4 {
		orders = append(orders, ingestOne(t, s, at(time.Duration(2*i)*time.Minute), "c", "order.created").Event.ID)
		invoices = append(invoices, ingestOne(t, s, at(time.Duration(2*i+1)*time.Minute), "c", "invoice.paid").Event.ID)
	}
	otherConsumer := ingestOne(t, s, at(time.Hour), "d", "order.created").Event.ID

	list := func(p store.EventListParams) []string {
		t.Helper()
		p.Limit = 2
		return collect(t, 2, func(ev *herald.Event) string { return ev.ID }, func(cursor string) (*store.Page[*herald.Event], error) {
			q := p
			q.Cursor = cursor
			return s.EventList(t.Context(), &q)
		})
	}

	require.Equal(t, []string{invoices[3], orders[3], invoices[2], orders[2], invoices[1], orders[1], invoices[0], orders[0]},
		list(store.EventListParams{ConsumerID: "c"}))
	require.Equal(t, reversed(orders), list(store.EventListParams{ConsumerID: "c", EventType: "order.created"}))
	require.Equal(t, []string{otherConsumer, orders[3], orders[2], orders[1], orders[0]},
		list(store.EventListParams{EventType: "order.created"}))
	require.Len(t, list(store.EventListParams{}), 9)

	// Since is inclusive, Until exclusive: [2m, 5m) holds orders[1] (2m),
	// invoices[1] (3m) and orders[2] (4m).
	require.Equal(t, []string{orders[2], invoices[1], orders[1]},
		list(store.EventListParams{ConsumerID: "c", Since: at(2 * time.Minute), Until: at(5 * time.Minute)}))
	require.Equal(t, []string{invoices[3], orders[3]},
		list(store.EventListParams{ConsumerID: "c", Since: at(6 * time.Minute)}))
	require.Equal(t, []string{orders[0]},
		list(store.EventListParams{ConsumerID: "c", Until: at(time.Minute)}))
	require.Empty(t, list(store.EventListParams{ConsumerID: "nobody"}))
}
