package storetest

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhooks/herald"
	"github.com/heraldhooks/herald/internal/store"
)

// Bounded redelivery (store.LeaseLossesEnd): a delivery whose lease was
// lost MaxLeaseLosses times goes dead (lease_lost) at the claim that
// finds it lost again, instead of being handed out for ever.
func leaseLostCases() []testCase {
	return []testCase{
		{"EndsDeadAfterMaxLosses", testLeaseLostEndsDead},
		{"FewerLossesClaimedAgain", testLeaseLostFewer},
		{"ReplayStartsAfresh", testLeaseLostReplay},
	}
}

// claimLosing claims at now with a limit of lost leases, and gathers the
// notifications the claim reports (DeliveryClaimParams.Notify) in notes.
func claimLosing(t *testing.T, s store.Store, now time.Time, maxLosses int, notes *notesSeen) []*store.ClaimedDelivery {
	t.Helper()
	got, err := s.DeliveryClaim(t.Context(), &store.DeliveryClaimParams{
		Limit: store.MaxListLimit, LeaseMargin: leaseMargin, Now: now,
		MaxLeaseLosses: maxLosses, Notify: notes.add,
	})
	require.NoError(t, err)
	return got
}

// notesSeen gathers notifications reported by a store.
type notesSeen struct {
	mu sync.Mutex
	ns []herald.Notification
}

func (n *notesSeen) add(x herald.Notification) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.ns = append(n.ns, x)
}

func (n *notesSeen) all() []herald.Notification {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]herald.Notification(nil), n.ns...)
}

// loseLeases lets the lease of c run out times times, each taken again by
// a claim that hands the delivery out (a redelivery), and returns the last
// claim and its lease.
func loseLeases(t *testing.T, s store.Store, c *store.ClaimedDelivery, times, maxLosses int) *store.ClaimedDelivery {
	t.Helper()
	for i := range times {
		got := claimLosing(t, s, c.LeaseExpiresAt, maxLosses, &notesSeen{})
		require.Len(t, got, 1, "lost lease %d of %d is handed out again", i+1, maxLosses)
		require.Equal(t, c.Delivery.ID, got[0].Delivery.ID)
		require.True(t, got[0].Redelivered)
		require.Equal(t, c.LeaseLosses+1, got[0].LeaseLosses, "the claim reports the losses counted")
		c = got[0]
	}
	return c
}

func testLeaseLostEndsDead(t *testing.T, s store.Store) {
	for _, tc := range []struct {
		name string
		ep   *herald.Endpoint
	}{
		{"Unordered", quietEndpoint("c")},
		{"FIFO", fifoEndpoint("f")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ep := createEndpoint(t, s, tc.ep, at(0))
			createEndpoint(t, s, subscriber(ep.ConsumerID), at(0))
			res := ingestOne(t, s, at(0), ep.ConsumerID, "order.created")
			id := res.Deliveries[0].ID
			next := ingestFor(t, s, at(0), ep)

			c := claimLosing(t, s, at(0), 3, &notesSeen{})
			if tc.ep.Ordering == herald.OrderingFIFO {
				require.Len(t, c, 1)
			} else {
				require.Len(t, c, 2)
				finish(t, s, at(time.Second), c[1], herald.StatusDelivered)
			}
			require.Equal(t, id, c[0].Delivery.ID)
			// Two leases lost: each time handed out again.
			last := loseLeases(t, s, c[0], 2, 3)

			// The third loss ends it: the claim hands nothing out.
			var notes notesSeen
			now := last.LeaseExpiresAt
			got := claimLosing(t, s, now, 3, &notes)
			for _, g := range got {
				require.NotEqual(t, id, g.Delivery.ID, "a delivery past its lost leases is not handed out")
			}
			d := requireStatus(t, s, id, herald.StatusDead)
			require.Equal(t, herald.DeadLeaseLost, d.DeadReason)
			require.Zero(t, d.AttemptCount, "lost leases spend no attempt")
			require.Empty(t, attempts(t, s, id))

			// In the dead-letter queue, with its reason.
			page, err := s.DeliveryList(t.Context(), &store.DeliveryListParams{Status: herald.StatusDead, EndpointID: ep.ID})
			require.NoError(t, err)
			require.Len(t, page.Items, 1)
			require.Equal(t, id, page.Items[0].ID)
			require.Equal(t, herald.DeadLeaseLost, page.Items[0].DeadReason)

			// herald.delivery.dead follows, reported and ingested.
			var p herald.DeliveryDeadPayload
			ev := oneEvent(t, s, ep.ConsumerID, herald.NotifyDeliveryDead, &p)
			require.Equal(t, herald.DeliveryDeadPayload{
				DeliveryID: id, EventID: res.Event.ID, EventType: "order.created",
				EndpointID: ep.ID, ConsumerID: ep.ConsumerID, DeadReason: "lease_lost",
			}, p)
			requireTime(t, now, ev.CreatedAt)
			reported := notes.all()
			require.Len(t, reported, 1)
			require.Equal(t, herald.NotifyDeliveryDead, reported[0].EventType)

			// Nothing more of it is due; a FIFO endpoint's next goes on.
			if tc.ep.Ordering == herald.OrderingFIFO {
				after := claimLosing(t, s, now, 3, &notesSeen{})
				var ids []string
				for _, g := range append(got, after...) {
					if g.Delivery.EndpointID == ep.ID {
						ids = append(ids, g.Delivery.ID)
					}
				}
				require.Equal(t, []string{next}, ids, "the FIFO head moves on")
			}
			for _, g := range claimLosing(t, s, now.Add(time.Hour), 3, &notesSeen{}) {
				require.NotEqual(t, id, g.Delivery.ID)
			}
			requireStatus(t, s, id, herald.StatusDead)
		})
	}
}

// testLeaseLostFewer: the default limit (herald.DefaultMaxLeaseLosses)
// applies when none is given, and a delivery lost fewer times is claimed
// again each time; a lease handed back or a retry written is no loss,
// and keeps the count the claims report (ClaimedDelivery.LeaseLosses: a
// dispatcher's suspects).
func testLeaseLostFewer(t *testing.T, s store.Store) {
	ep := createEndpoint(t, s, quietEndpoint("c"), at(0))
	id := ingestFor(t, s, at(0), ep)
	c := claimOne(t, s, at(0), id)
	require.Zero(t, c.LeaseLosses)
	c = loseLeases(t, s, c, herald.DefaultMaxLeaseLosses-1, 0)

	// Handed back, then a retry written: neither counts.
	now := c.LeaseExpiresAt.Add(-time.Second)
	require.NoError(t, s.DeliveryRelease(t.Context(), &store.DeliveryReleaseParams{
		Leases: []store.Lease{{DeliveryID: id, LeaseToken: c.LeaseToken}}, Now: now,
	}))
	c = claimOne(t, s, now, id)
	require.False(t, c.Redelivered)
	require.Equal(t, herald.DefaultMaxLeaseLosses-1, c.LeaseLosses, "a hand-back keeps the count")
	fail(t, s, now, c, 0)
	c = claimOne(t, s, now, id)
	require.False(t, c.Redelivered)
	require.Equal(t, herald.DefaultMaxLeaseLosses-1, c.LeaseLosses)
	require.Equal(t, herald.StatusDelivering, requireStatus(t, s, id, herald.StatusDelivering).Status)

	// The fifth loss ends it.
	require.Empty(t, claimLosing(t, s, c.LeaseExpiresAt, 0, &notesSeen{}))
	require.Equal(t, herald.DeadLeaseLost, requireStatus(t, s, id, herald.StatusDead).DeadReason)
}

// testLeaseLostReplay: a replay of a delivery gone dead for its lost
// leases gives it a fresh count: it may lose them all again.
func testLeaseLostReplay(t *testing.T, s store.Store) {
	ep := createEndpoint(t, s, quietEndpoint("c"), at(0))
	id := ingestFor(t, s, at(0), ep)
	c := claimOne(t, s, at(0), id)
	c = loseLeases(t, s, c, 1, 2)
	require.Empty(t, claimLosing(t, s, c.LeaseExpiresAt, 2, &notesSeen{}))
	requireStatus(t, s, id, herald.StatusDead)

	now := c.LeaseExpiresAt.Add(time.Minute)
	d, err := s.DeliveryReplay(t.Context(), &store.DeliveryReplayParams{ID: id, Now: now})
	require.NoError(t, err)
	require.Equal(t, herald.StatusPending, d.Status)
	require.Empty(t, d.DeadReason)

	c = claimOne(t, s, now, id)
	require.False(t, c.Redelivered)
	require.Zero(t, c.LeaseLosses, "a replay starts the count afresh")
	c = loseLeases(t, s, c, 1, 2) // without the replay's fresh count, this would end it
	finish(t, s, c.LeaseExpiresAt.Add(-time.Second), c, herald.StatusDelivered)
	requireStatus(t, s, id, herald.StatusDelivered)
}
