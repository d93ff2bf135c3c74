package storetest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhooks/herald"
	"github.com/heraldhooks/herald/internal/store"
)

func deliveryCases() []testCase {
	return []testCase{
		{"GetUnknownIsNotFound", testDeliveryGetUnknown},
		{"ListFilters", testDeliveryListFilters},
		{"ListPaginatesNewestFirst", testDeliveryListPages},
		{"CancelLiveOnly", testDeliveryCancel},
	}
}

func testDeliveryGetUnknown(t *testing.T, s store.Store) {
	_, err := s.DeliveryGet(t.Context(), "dlv_00000000000000000000000000")
	expectNotFound(t, err)
}

// listDeliveries walks every page of deliveries matching p, two at a time.
func listDeliveries(t *testing.T, s store.Store, p store.DeliveryListParams) []string {
	t.Helper()
	p.Limit = 2
	return collect(t, 2, func(d *herald.Delivery) string { return d.ID }, func(cursor string) (*store.Page[*herald.Delivery], error) {
		q := p
		q.Cursor = cursor
		return s.DeliveryList(t.Context(), &q)
	})
}

func testDeliveryListFilters(t *testing.T, s store.Store) {
	a1 := createEndpoint(t, s, newEndpoint("a"), at(0))
	a2 := createEndpoint(t, s, newEndpoint("a", "order.*"), at(0))
	b1 := createEndpoint(t, s, newEndpoint("b", "order.*"), at(0))

	ev1 := ingestOne(t, s, at(1*time.Second), "a", "order.created") // a1, a2
	ev2 := ingestOne(t, s, at(2*time.Second), "a", "invoice.paid")  // a1
	ev3 := ingestOne(t, s, at(3*time.Second), "b", "order.created") // b1
	ref := func(res store.EventIngestResult, ep *herald.Endpoint) string {
		for _, d := range res.Deliveries {
			if d.EndpointID == ep.ID {
				return d.ID
			}
		}
		require.FailNow(t, "no delivery")
		return ""
	}
	e1a1, e1a2, e2a1, e3b1 := ref(ev1, a1), ref(ev1, a2), ref(ev2, a1), ref(ev3, b1)

	leases := claimAll(t, s, at(4*time.Second))
	finish(t, s, at(5*time.Second), leases[e1a1], herald.StatusDelivered)
	finish(t, s, at(5*time.Second), leases[e3b1], herald.StatusDead)
	require.NoError(t, s.DeliveryRelease(t.Context(), &store.DeliveryReleaseParams{
		Leases: []store.Lease{{DeliveryID: e2a1, LeaseToken: leases[e2a1].LeaseToken}}, Now: at(5 * time.Second),
	}))
	// e1a2 stays delivering.

	cases := []struct {
		name string
		p    store.DeliveryListParams
		want []string
	}{
		{"all", store.DeliveryListParams{}, []string{e3b1, e2a1, e1a1, e1a2}},
		{"consumer", store.DeliveryListParams{ConsumerID: "a"}, []string{e2a1, e1a1, e1a2}},
		{"endpoint", store.DeliveryListParams{EndpointID: a1.ID}, []string{e2a1, e1a1}},
		{"event", store.DeliveryListParams{EventID: ev1.Event.ID}, []string{e1a1, e1a2}},
		{"pending", store.DeliveryListParams{Status: herald.StatusPending}, []string{e2a1}},
		{"delivering", store.DeliveryListParams{Status: herald.StatusDelivering}, []string{e1a2}},
		{"delivered", store.DeliveryListParams{Status: herald.StatusDelivered}, []string{e1a1}},
		{"dead", store.DeliveryListParams{Status: herald.StatusDead}, []string{e3b1}},
		{"cancelled", store.DeliveryListParams{Status: herald.StatusCancelled}, nil},
		{"status and endpoint", store.DeliveryListParams{Status: herald.StatusDelivered, EndpointID: a1.ID}, []string{e1a1}},
		{"status and consumer", store.DeliveryListParams{Status: herald.StatusDead, ConsumerID: "a"}, nil},
		{"consumer and event", store.DeliveryListParams{ConsumerID: "b", EventID: ev1.Event.ID}, nil},
		{"event type", store.DeliveryListParams{EventType: "order.created"}, []string{e3b1, e1a1, e1a2}},
		{"event type and consumer", store.DeliveryListParams{EventType: "order.created", ConsumerID: "a"}, []string{e1a1, e1a2}},
		{"event type is exact", store.DeliveryListParams{EventType: "order.*"}, nil},
		{"unknown endpoint", store.DeliveryListParams{EndpointID: "ep_00000000000000000000000000"}, nil},
	}
	for _, tc := range cases {
		got := listDeliveries(t, s, tc.p)
		// Deliveries of one event share a creation time, so their order
		// among themselves is free; across events it is newest first.
		if len(tc.want) == 0 {
			require.Empty(t, got, tc.name)
			continue
		}
		require.ElementsMatch(t, tc.want, got, tc.name)
	}
	all := listDeliveries(t, s, store.DeliveryListParams{})
	require.Equal(t, e3b1, all[0])
	require.Equal(t, e2a1, all[1])

	page, err := s.DeliveryList(t.Context(), &store.DeliveryListParams{EventID: ev1.Event.ID})
	require.NoError(t, err)
	for _, d := range page.Items {
		require.Equal(t, ev1.Event.ID, d.EventID)
		require.Equal(t, "a", d.ConsumerID)
		require.Equal(t, "order.created", d.EventType)
		if d.ID == e1a1 {
			require.Equal(t, herald.StatusDelivered, d.Status)
			require.Equal(t, 1, d.AttemptCount)
			require.Equal(t, 200, d.LastStatusCode)
			requireTimePtr(t, at(5*time.Second), d.DeliveredAt)
		}
	}
}

func testDeliveryListPages(t *testing.T, s store.Store) {
	ep := createEndpoint(t, s, newEndpoint("c"), at(0))
	var ids []string
	for i := range 7 {
		ids = append(ids, ingestFor(t, s, at(time.Duration(i)*time.Second), ep))
	}
	for _, limit := range []int{1, 3, 7, 100} {
		got := collect(t, limit, func(d *herald.Delivery) string { return d.ID }, func(cursor string) (*store.Page[*herald.Delivery], error) {
			return s.DeliveryList(t.Context(), &store.DeliveryListParams{EndpointID: ep.ID, Cursor: cursor, Limit: limit})
		})
		require.Equal(t, reversed(ids), got, "limit %d", limit)
	}
	page, err := s.DeliveryList(t.Context(), &store.DeliveryListParams{ConsumerID: "c"})
	require.NoError(t, err)
	require.Len(t, page.Items, 7, "a limit of 0 means the default")
	require.Empty(t, page.NextCursor)
}

func testDeliveryCancel(t *testing.T, s store.Store) {
	ep := createEndpoint(t, s, newEndpoint("c"), at(0))
	pending := ingestFor(t, s, at(0), ep)
	delivered := ingestFor(t, s, at(0), ep)
	leases := claimAll(t, s, at(0))
	finish(t, s, at(time.Second), leases[delivered], herald.StatusDelivered)
	require.Equal(t, []bool{true}, complete(t, s, at(time.Second), outcome(leases[pending], herald.StatusPending, at(time.Second))))

	got, err := s.DeliveryCancel(t.Context(), &store.DeliveryCancelParams{ID: pending, Now: at(time.Minute)})
	require.NoError(t, err)
	require.Equal(t, pending, got.ID)
	require.Equal(t, herald.StatusCancelled, got.Status)
	require.Nil(t, got.NextAttemptAt)
	require.Equal(t, 1, got.AttemptCount)
	requireTime(t, at(time.Minute), got.UpdatedAt)
	read := requireStatus(t, s, pending, herald.StatusCancelled)
	require.Nil(t, read.NextAttemptAt)
	requireNoneDue(t, s, at(time.Hour))

	_, err = s.DeliveryCancel(t.Context(), &store.DeliveryCancelParams{ID: pending, Now: at(time.Hour)})
	expectConflict(t, err)
	_, err = s.DeliveryCancel(t.Context(), &store.DeliveryCancelParams{ID: delivered, Now: at(time.Hour)})
	expectConflict(t, err)
	requireStatus(t, s, delivered, herald.StatusDelivered)
	_, err = s.DeliveryCancel(t.Context(), &store.DeliveryCancelParams{ID: "dlv_00000000000000000000000000", Now: at(time.Hour)})
	expectNotFound(t, err)

	dead := ingestFor(t, s, at(2*time.Hour), ep)
	finish(t, s, at(2*time.Hour), claimOne(t, s, at(2*time.Hour), dead), herald.StatusDead)
	_, err = s.DeliveryCancel(t.Context(), &store.DeliveryCancelParams{ID: dead, Now: at(3 * time.Hour)})
	expectConflict(t, err)
	requireStatus(t, s, dead, herald.StatusDead)
}
