package sqlitestore

import (
	"database/sql"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhooks/herald"
	"github.com/heraldhooks/herald/internal/store"
	"github.com/heraldhooks/herald/internal/store/storetest"
)

// leasingEndpoint creates an endpoint of consumer c for order.* events
// with an in-flight cap, for the leasing tests.
func leasingEndpoint(t testing.TB, s *Store, c string, maxInFlight int) *herald.Endpoint {
	t.Helper()
	ep, err := s.EndpointCreate(t.Context(), &store.EndpointCreateParams{Endpoint: &herald.Endpoint{
		ConsumerID: c, URL: "https://example.com/h", EventTypes: []string{"order.*"}, Enabled: true,
		Secret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", Timeout: time.Second, SignatureScheme: herald.SchemeStandard,
		MaxInFlight: maxInFlight,
	}, Now: storetest.Base})
	require.NoError(t, err)
	return ep
}

// writeOutcome writes o under c's lease at storetest.Base and requires
// that it applied.
func writeOutcome(t *testing.T, s *Store, c *store.ClaimedDelivery, o store.DeliveryOutcome) {
	t.Helper()
	o.Lease = store.Lease{DeliveryID: c.Delivery.ID, LeaseToken: c.LeaseToken}
	applied, err := s.DeliveryCompleteMany(t.Context(), &store.DeliveryCompleteManyParams{Now: storetest.Base, Outcomes: []store.DeliveryOutcome{o}})
	require.NoError(t, err)
	require.Equal(t, []bool{true}, applied)
}

// leasingItems are n events of eventType for consumer c.
func leasingItems(c, eventType string, n int) []store.EventIngestItem {
	items := make([]store.EventIngestItem, n)
	for i := range items {
		items[i] = store.EventIngestItem{ConsumerID: c, EventType: eventType, Payload: fmt.Appendf(nil, `{"n":%d}`, i)}
	}
	return items
}

// TestIngestLeasingLeavesNoWakeUp: an ingest that leased every delivery
// wakes no dispatcher; one that queued any does. The group notifies
// before its calls return, so the channel says at once.
func TestIngestLeasingLeavesNoWakeUp(t *testing.T) {
	t.Parallel()
	s := openInternal(t)
	leasingEndpoint(t, s, "c", 10)
	k := storetest.NewSlotTaker(t, 2, storetest.Base.Add(-time.Second))
	s.SetTaker(k)
	wake, err := s.Subscribe(t.Context())
	require.NoError(t, err)
	woken := func() bool {
		select {
		case <-wake:
			return true
		default:
			return false
		}
	}
	ingest := func(n int) {
		_, err := s.EventIngest(t.Context(), &store.EventIngestParams{Events: leasingItems("c", "order.created", n), Now: storetest.Base})
		require.NoError(t, err)
	}

	ingest(1)
	require.Len(t, k.Taken(), 1)
	require.False(t, woken(), "all leased: nothing to wake a node for")

	ingest(2) // one slot left: one leased, one queued
	require.Len(t, k.Taken(), 2)
	require.True(t, woken())
}

// TestIngestGroupGivesBackAFailedCallsLeases: in a group, a call that
// fails hands nothing over and gives back what it leased, its slots and
// its places under the endpoint's cap, which a call after it leases; the
// calls beside it hand theirs over. A trigger makes the call fail, after
// it leased, as any failed statement of it would (a full disk).
func TestIngestGroupGivesBackAFailedCallsLeases(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		// free is the taker's slots, maxInFlight the endpoint's cap, and
		// last the events of the call after the failed one.
		free, maxInFlight, last int
	}{
		{"Slots", 3, 10, 2}, // the failed call's slot is the last call's second
		{"Room", 10, 2, 1},  // the failed call's place under the cap is the last call's
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := openInternal(t)
			ctx := t.Context()
			refuseEvents(t, s, "order.refused")
			ep := leasingEndpoint(t, s, "c", tc.maxInFlight)
			st, err := s.prepared(ctx)
			require.NoError(t, err)
			k := storetest.NewSlotTaker(t, tc.free, storetest.Base.Add(-time.Second))
			s.SetTaker(k)

			call := func(items ...store.EventIngestItem) *ingestCall {
				return &ingestCall{ctx: ctx, items: items, t: storetest.Base}
			}
			before := call(leasingItems("c", "order.created", 1)...)
			failed := call(append(leasingItems("c", "order.created", 1), leasingItems("c", "order.refused", 1)...)...)
			after := call(leasingItems("c", "order.created", tc.last)...)
			s.writeGroup(st, []*ingestCall{before, failed, after}, nil)

			require.ErrorContains(t, failed.err, "refused by the test")
			require.Nil(t, failed.results)
			var want []string
			for _, c := range []*ingestCall{before, after} {
				require.NoError(t, c.err)
				for _, res := range c.results {
					require.Len(t, res.Deliveries, 1)
					want = append(want, res.Deliveries[0].ID)
				}
			}
			var got []string
			for _, c := range k.Taken() {
				got = append(got, c.Delivery.ID)
			}
			require.Equal(t, want, got, "the calls beside hand theirs over, the failed call nothing")

			page, err := s.DeliveryList(ctx, &store.DeliveryListParams{EndpointID: ep.ID})
			require.NoError(t, err)
			require.Len(t, page.Items, len(want), "the failed call's deliveries rolled back")
			for _, d := range page.Items {
				require.Equal(t, herald.StatusDelivering, d.Status, d.ID)
			}
		})
	}
}

// TestIngestLeaseRunsOutNoEarlierThanTheTakers: the taker counts a lease
// from its reservation, which the group's lead makes after the call read
// its time (the call waits for its group meanwhile); the lease written
// then counts from the reservation, to the microsecond above, so that no
// claim takes the delivery while the taker may still attempt it.
func TestIngestLeaseRunsOutNoEarlierThanTheTakers(t *testing.T) {
	t.Parallel()
	s := openInternal(t)
	ctx := t.Context()
	ep := leasingEndpoint(t, s, "c", 10)
	from := storetest.Base.Add(time.Second + 500*time.Nanosecond)
	k := storetest.NewSlotTaker(t, 2, from)
	s.SetTaker(k)
	_, err := s.EventIngest(ctx, &store.EventIngestParams{Events: leasingItems("c", "order.created", 1), Now: storetest.Base})
	require.NoError(t, err)
	require.Len(t, k.Taken(), 1)

	r := k.Reserve(0) // for its lease margin
	k.Take(r, nil)
	lease := (&store.DeliveryClaimParams{LeaseMargin: r.LeaseMargin}).LeaseFor(ep)
	takers := from.Add(lease)
	got := k.Taken()[0].LeaseExpiresAt
	require.False(t, got.Before(takers), "the lease runs out at %s, before the taker's %s", got, takers)
	require.Equal(t, from.Truncate(time.Microsecond).Add(time.Microsecond+lease), got)
	claimed, err := s.DeliveryClaim(ctx, &store.DeliveryClaimParams{Limit: 10, LeaseMargin: time.Second, Now: takers})
	require.NoError(t, err)
	require.Empty(t, claimed, "the lease holds when the taker's runs out")
	claimed, err = s.DeliveryClaim(ctx, &store.DeliveryClaimParams{Limit: 10, LeaseMargin: time.Second, Now: got})
	require.NoError(t, err)
	require.Len(t, claimed, 1, "and runs out then")
}

// TestNotificationsKeepTheDeliveryCounter: the deliveries of the
// notifications an outcome write emits take their seq from the counter
// and write it back, so that later deliveries follow them in ingest
// order and no two share a seq.
func TestNotificationsKeepTheDeliveryCounter(t *testing.T) {
	t.Parallel()
	s := openInternal(t)
	ctx := t.Context()
	leasingEndpoint(t, s, "c", 10)
	sub, err := s.EndpointCreate(ctx, &store.EndpointCreateParams{Endpoint: &herald.Endpoint{
		ConsumerID: "c", URL: "https://example.com/n", EventTypes: []string{"herald.*"}, Enabled: true,
		Secret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", Timeout: time.Second, SignatureScheme: herald.SchemeStandard,
	}, Now: storetest.Base})
	require.NoError(t, err)
	_, err = s.EventIngest(ctx, &store.EventIngestParams{Events: leasingItems("c", "order.created", 1), Now: storetest.Base})
	require.NoError(t, err)
	claimed, err := s.DeliveryClaim(ctx, &store.DeliveryClaimParams{Limit: 10, LeaseMargin: time.Second, Now: storetest.Base})
	require.NoError(t, err)
	require.Len(t, claimed, 1)
	c := claimed[0]
	writeOutcome(t, s, c, store.DeliveryOutcome{Status: herald.StatusDead, DeadReason: herald.DeadExhausted,
		Attempt: herald.Attempt{Number: 1, AttemptedAt: storetest.Base, StatusCode: 500, Error: "HTTP 500"}})
	_, err = s.EventIngest(ctx, &store.EventIngestParams{Events: leasingItems("c", "order.created", 1), Now: storetest.Base})
	require.NoError(t, err)

	var notified, total, distinct, maxSeq, counter int64
	require.NoError(t, s.writer.QueryRowContext(ctx, `SELECT count(*) FROM deliveries WHERE endpoint_id = ?`, sub.ID).Scan(&notified))
	require.Equal(t, int64(1), notified, "the dead delivery's notification")
	require.NoError(t, s.writer.QueryRowContext(ctx, `SELECT count(*), count(DISTINCT seq), max(seq) FROM deliveries`).Scan(&total, &distinct, &maxSeq))
	require.NoError(t, s.writer.QueryRowContext(ctx, `SELECT value FROM sequences WHERE name = 'delivery_seq'`).Scan(&counter))
	require.Equal(t, total, distinct, "no two deliveries share a seq")
	require.Equal(t, maxSeq, counter, "the counter is where the last delivery left it")
}

// TestCachedEndpointsFollowEveryChange: the endpoints a leasing ingest
// keeps (endpointcache.go) are dropped by every change of an endpoint's
// row: its settings through the store, its state written by another
// process, its health moved by outcomes. Each ingest below would go to
// the kept endpoint as it was.
func TestCachedEndpointsFollowEveryChange(t *testing.T) {
	t.Parallel()
	s := openInternal(t)
	ctx := t.Context()
	ep := leasingEndpoint(t, s, "c", 10)
	k := storetest.NewSlotTaker(t, 100, storetest.Base.Add(-time.Second))
	s.SetTaker(k)
	ingestOne := func() store.EventIngestResult {
		t.Helper()
		res, err := s.EventIngest(ctx, &store.EventIngestParams{Events: leasingItems("c", "order.created", 1), Now: storetest.Base})
		require.NoError(t, err)
		return res[0]
	}
	require.Len(t, ingestOne().Deliveries, 1)
	require.Len(t, k.Taken(), 1, "leased, and the consumer's endpoints kept")

	// An endpoint added, then deleted.
	added := leasingEndpoint(t, s, "c", 10)
	require.Len(t, ingestOne().Deliveries, 2, "the endpoint added")
	require.NoError(t, s.EndpointDelete(ctx, &store.EndpointDeleteParams{ID: added.ID, Now: storetest.Base}))
	require.Len(t, ingestOne().Deliveries, 1, "the endpoint deleted")

	// A filter changed through the store.
	upd := *ep
	upd.EventTypes = []string{"invoice.*"}
	_, err := s.EndpointUpdate(ctx, &store.EndpointUpdateParams{Endpoint: &upd, Now: storetest.Base})
	require.NoError(t, err)
	require.Empty(t, ingestOne().Deliveries, "the new filter")
	upd.EventTypes = []string{"order.*"}
	_, err = s.EndpointUpdate(ctx, &store.EndpointUpdateParams{Endpoint: &upd, Now: storetest.Base})
	require.NoError(t, err)
	require.Len(t, ingestOne().Deliveries, 1)

	// Disabled by another process (here another connection's statement).
	var path string
	require.NoError(t, s.reader.QueryRowContext(ctx, `SELECT file FROM pragma_database_list WHERE name = 'main'`).Scan(&path))
	other, err := sql.Open("sqlite", path+"?_pragma=busy_timeout(10000)")
	require.NoError(t, err)
	t.Cleanup(func() { _ = other.Close() })
	_, err = other.ExecContext(ctx, `UPDATE endpoints SET enabled = 0 WHERE id = ?`, ep.ID)
	require.NoError(t, err)
	require.Empty(t, ingestOne().Deliveries, "disabled elsewhere")
	_, err = other.ExecContext(ctx, `UPDATE endpoints SET enabled = 1 WHERE id = ?`, ep.ID)
	require.NoError(t, err)

	// The breaker opened by five failed outcomes: queued, not leased.
	for range 5 {
		require.Len(t, ingestOne().Deliveries, 1)
	}
	leased := k.Taken()
	require.Len(t, leased, 10)
	for _, c := range leased[5:] {
		writeOutcome(t, s, c, store.DeliveryOutcome{Status: herald.StatusPending, RetryIn: time.Hour,
			Attempt: herald.Attempt{Number: 1, AttemptedAt: storetest.Base, StatusCode: 503, Error: "HTTP 503"}})
	}
	h, err := s.EndpointHealthGet(ctx, &store.EndpointHealthGetParams{ID: ep.ID, Now: storetest.Base})
	require.NoError(t, err)
	require.Equal(t, herald.BreakerOpen, h.BreakerState)
	d := ingestOne().Deliveries
	require.Len(t, d, 1)
	require.Len(t, k.Taken(), 10, "not leased to an endpoint whose breaker is open")
	got, err := s.DeliveryGet(ctx, d[0].ID)
	require.NoError(t, err)
	require.Equal(t, herald.StatusPending, got.Status)
}
