package storetest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhooks/herald"
	"github.com/heraldhooks/herald/internal/store"
)

func replayCases() []testCase {
	return []testCase{
		{"TerminalBackToPendingWithFreshBudget", testReplayTerminal},
		{"LiveOrUnknownIsRefused", testReplayRefused},
		{"ManyByEvent", testReplayManyByEvent},
		{"ManyByEndpointStatusAndWindow", testReplayManyByEndpoint},
		{"ManyNeedsEventOrEndpoint", testReplayManyNeedsFilter},
		{"ManyDryRunOnlyCounts", testReplayManyDryRun},
		{"ManyAtARateIsPacedInCreationOrder", testReplayManyPaced},
		{"ManyPacedToTheMicrosecond", testReplayManyPacedToTheMicrosecond},
		{"ManyOfALiveStatusIsRefused", testReplayManyLiveStatusRefused},
	}
}

// deadAfter makes a delivery to ep at now and takes it through n failed
// attempts to dead (exhausted); it returns the delivery id.
func deadAfter(t *testing.T, s store.Store, ep *herald.Endpoint, now time.Time, n int) string {
	t.Helper()
	id := ingestFor(t, s, now, ep)
	for i := 1; i <= n; i++ {
		now = now.Add(time.Minute)
		c := claimOne(t, s, now, id)
		o := outcome(c, herald.StatusPending, now)
		o.RetryIn = 0
		if i == n {
			o.Status = herald.StatusDead
			o.DeadReason = herald.DeadExhausted
		}
		require.Equal(t, []bool{true}, complete(t, s, now, o))
	}
	return id
}

func testReplayTerminal(t *testing.T, s store.Store) {
	ep := createEndpoint(t, s, newEndpoint("c", "order.*"), at(0))
	dead := deadAfter(t, s, ep, at(0), 3)
	d := requireStatus(t, s, dead, herald.StatusDead)
	require.Equal(t, 3, d.AttemptCount)

	got, err := s.DeliveryReplay(t.Context(), &store.DeliveryReplayParams{ID: dead, Now: at(time.Hour)})
	require.NoError(t, err)
	require.Equal(t, dead, got.ID)
	require.Equal(t, herald.StatusPending, got.Status)
	require.Zero(t, got.AttemptCount)
	require.Empty(t, got.DeadReason)
	requireTimePtr(t, at(time.Hour), got.NextAttemptAt)
	require.Nil(t, got.DeliveredAt)
	requireTime(t, at(time.Hour), got.UpdatedAt)
	requireTime(t, at(0), got.CreatedAt)
	read := requireStatus(t, s, dead, herald.StatusPending)
	require.Zero(t, read.AttemptCount)
	require.Empty(t, read.DeadReason)
	require.Len(t, attempts(t, s, dead), 3, "the attempt log stays")

	// Due at once, with the same event.
	c := claimOne(t, s, at(time.Hour), dead)
	require.Zero(t, c.Delivery.AttemptCount)
	require.Equal(t, d.EventID, c.Event.ID)
	finish(t, s, at(time.Hour), c, herald.StatusDelivered)
	require.Len(t, attempts(t, s, dead), 4)

	// Delivered comes back too, and loses its delivered time.
	got, err = s.DeliveryReplay(t.Context(), &store.DeliveryReplayParams{ID: dead, Now: at(2 * time.Hour)})
	require.NoError(t, err)
	require.Equal(t, herald.StatusPending, got.Status)
	require.Nil(t, got.DeliveredAt)
	require.Zero(t, got.AttemptCount)

	// So does cancelled.
	cancelled := ingestFor(t, s, at(3*time.Hour), ep)
	_, err = s.DeliveryCancel(t.Context(), &store.DeliveryCancelParams{ID: cancelled, Now: at(3 * time.Hour)})
	require.NoError(t, err)
	got, err = s.DeliveryReplay(t.Context(), &store.DeliveryReplayParams{ID: cancelled, Now: at(4 * time.Hour)})
	require.NoError(t, err)
	require.Equal(t, herald.StatusPending, got.Status)
	require.Len(t, claimAll(t, s, at(4*time.Hour)), 2)
}

func testReplayRefused(t *testing.T, s store.Store) {
	ep := createEndpoint(t, s, newEndpoint("c", "order.*"), at(0))
	doomed := createEndpoint(t, s, newEndpoint("c2", "order.*"), at(0))
	dead := deadAfter(t, s, doomed, at(0), 1)
	pending := ingestFor(t, s, at(time.Hour), ep)
	delivering := ingestFor(t, s, at(time.Hour), ep)
	leases := claimAll(t, s, at(time.Hour))
	require.Len(t, leases, 2)
	require.NoError(t, s.DeliveryRelease(t.Context(), &store.DeliveryReleaseParams{
		Leases: []store.Lease{{DeliveryID: pending, LeaseToken: leases[pending].LeaseToken}}, Now: at(time.Hour),
	}))

	for _, id := range []string{pending, delivering} {
		_, err := s.DeliveryReplay(t.Context(), &store.DeliveryReplayParams{ID: id, Now: at(2 * time.Hour)})
		expectConflict(t, err)
	}
	requireStatus(t, s, pending, herald.StatusPending)
	requireStatus(t, s, delivering, herald.StatusDelivering)
	require.Equal(t, []bool{true}, complete(t, s, at(time.Hour), outcome(leases[delivering], herald.StatusDelivered, at(time.Hour))),
		"a refused replay leaves the lease alone")

	_, err := s.DeliveryReplay(t.Context(), &store.DeliveryReplayParams{ID: "dlv_00000000000000000000000000", Now: at(2 * time.Hour)})
	expectNotFound(t, err)

	// A dead delivery of a disabled endpoint stays dead.
	disableEndpoint(t, s, doomed.ID, at(2*time.Hour))
	_, err = s.DeliveryReplay(t.Context(), &store.DeliveryReplayParams{ID: dead, Now: at(3 * time.Hour)})
	expectConflict(t, err)
	requireStatus(t, s, dead, herald.StatusDead)
}

func testReplayManyByEvent(t *testing.T, s store.Store) {
	e1 := createEndpoint(t, s, newEndpoint("c", "order.*"), at(0))
	e2 := createEndpoint(t, s, newEndpoint("c", "order.*"), at(0))
	e3 := createEndpoint(t, s, newEndpoint("c", "order.*"), at(0))
	e4 := createEndpoint(t, s, newEndpoint("c", "order.*"), at(0))
	res := ingestOne(t, s, at(0), "c", "order.created")
	unrelated := ingestOne(t, s, at(0), "c", "order.created")
	byEp := map[string]string{}
	for _, ref := range res.Deliveries {
		byEp[ref.EndpointID] = ref.ID
	}
	leases := claimAll(t, s, at(time.Second))
	require.Len(t, leases, 8)
	finish(t, s, at(2*time.Second), leases[byEp[e1.ID]], herald.StatusDelivered)
	finish(t, s, at(2*time.Second), leases[byEp[e2.ID]], herald.StatusDead)
	finish(t, s, at(2*time.Second), leases[byEp[e3.ID]], herald.StatusPending)
	finish(t, s, at(2*time.Second), leases[byEp[e4.ID]], herald.StatusDead)
	for _, ref := range unrelated.Deliveries {
		finish(t, s, at(2*time.Second), leases[ref.ID], herald.StatusDead)
	}
	disableEndpoint(t, s, e4.ID, at(3*time.Second))

	// Only the dead ones first.
	n, err := s.DeliveryReplayMany(t.Context(), &store.DeliveryReplayManyParams{EventID: res.Event.ID, Status: herald.StatusDead, Now: at(time.Minute)})
	require.NoError(t, err)
	require.Equal(t, 1, n, "the dead delivery of the disabled endpoint stays")
	d := requireStatus(t, s, byEp[e2.ID], herald.StatusPending)
	require.Zero(t, d.AttemptCount)
	requireTimePtr(t, at(time.Minute), d.NextAttemptAt)
	requireStatus(t, s, byEp[e1.ID], herald.StatusDelivered)
	requireStatus(t, s, byEp[e4.ID], herald.StatusDead)

	// Then every terminal one.
	n, err = s.DeliveryReplayMany(t.Context(), &store.DeliveryReplayManyParams{EventID: res.Event.ID, Now: at(2 * time.Minute)})
	require.NoError(t, err)
	require.Equal(t, 1, n)
	d = requireStatus(t, s, byEp[e1.ID], herald.StatusPending)
	require.Nil(t, d.DeliveredAt)
	requireTimePtr(t, at(32*time.Second), requireStatus(t, s, byEp[e3.ID], herald.StatusPending).NextAttemptAt,
		"a live delivery is left as it was")
	for _, ref := range unrelated.Deliveries {
		requireStatus(t, s, ref.ID, herald.StatusDead)
	}
}

func testReplayManyByEndpoint(t *testing.T, s store.Store) {
	ep := createEndpoint(t, s, newEndpoint("c", "order.*"), at(0))
	other := createEndpoint(t, s, newEndpoint("c2", "order.*"), at(0))
	var dead []string
	for i := range 4 {
		dead = append(dead, deadAfter(t, s, ep, at(time.Duration(i)*time.Hour), 1))
	}
	delivered := ingestFor(t, s, at(90*time.Minute), ep)
	finish(t, s, at(91*time.Minute), claimOne(t, s, at(91*time.Minute), delivered), herald.StatusDelivered)
	otherDead := deadAfter(t, s, other, at(90*time.Minute), 1)

	// [1h, 3h) holds dead[1], dead[2] and the delivered one.
	n, err := s.DeliveryReplayMany(t.Context(), &store.DeliveryReplayManyParams{
		EndpointID: ep.ID, Status: herald.StatusDead, Since: at(time.Hour), Until: at(3 * time.Hour), Now: at(10 * time.Hour),
	})
	require.NoError(t, err)
	require.Equal(t, 2, n)
	requireStatus(t, s, dead[0], herald.StatusDead)
	requireStatus(t, s, dead[1], herald.StatusPending)
	requireStatus(t, s, dead[2], herald.StatusPending)
	requireStatus(t, s, dead[3], herald.StatusDead)
	requireStatus(t, s, delivered, herald.StatusDelivered)
	requireStatus(t, s, otherDead, herald.StatusDead)

	claimed := claimAll(t, s, at(10*time.Hour))
	require.Len(t, claimed, 2)
	require.Contains(t, claimed, dead[1])
	require.Contains(t, claimed, dead[2])

	// Without bounds, everything terminal of the endpoint.
	n, err = s.DeliveryReplayMany(t.Context(), &store.DeliveryReplayManyParams{EndpointID: ep.ID, Now: at(11 * time.Hour)})
	require.NoError(t, err)
	require.Equal(t, 3, n, "dead[0], dead[3] and the delivered one")
	requireStatus(t, s, dead[1], herald.StatusDelivering)
	requireStatus(t, s, otherDead, herald.StatusDead)

	// A disabled endpoint has nothing to replay.
	disableEndpoint(t, s, other.ID, at(12*time.Hour))
	n, err = s.DeliveryReplayMany(t.Context(), &store.DeliveryReplayManyParams{EndpointID: other.ID, Now: at(13 * time.Hour)})
	require.NoError(t, err)
	require.Zero(t, n)
}

func testReplayManyNeedsFilter(t *testing.T, s store.Store) {
	ep := createEndpoint(t, s, newEndpoint("c", "order.*"), at(0))
	dead := deadAfter(t, s, ep, at(0), 1)
	_, err := s.DeliveryReplayMany(t.Context(), &store.DeliveryReplayManyParams{Status: herald.StatusDead, Now: at(time.Hour)})
	require.Error(t, err)
	requireStatus(t, s, dead, herald.StatusDead)
}

func testReplayManyDryRun(t *testing.T, s store.Store) {
	ep := createEndpoint(t, s, newEndpoint("c", "order.*"), at(0))
	var dead []string
	for i := range 3 {
		dead = append(dead, deadAfter(t, s, ep, at(time.Duration(i)*time.Hour), 1))
	}
	live := ingestFor(t, s, at(5*time.Hour), ep)

	for _, tc := range []struct {
		p    store.DeliveryReplayManyParams
		want int
	}{
		{store.DeliveryReplayManyParams{EndpointID: ep.ID}, 3},
		{store.DeliveryReplayManyParams{EndpointID: ep.ID, Status: herald.StatusDead}, 3},
		{store.DeliveryReplayManyParams{EndpointID: ep.ID, Status: herald.StatusDelivered}, 0},
		{store.DeliveryReplayManyParams{EndpointID: ep.ID, Since: at(time.Hour)}, 2},
		{store.DeliveryReplayManyParams{EventID: getDelivery(t, s, dead[0]).EventID}, 1},
	} {
		p := tc.p
		p.DryRun = true
		p.Now = at(10 * time.Hour)
		n, err := s.DeliveryReplayMany(t.Context(), &p)
		require.NoError(t, err)
		require.Equal(t, tc.want, n, "%+v", tc.p)
	}
	for _, id := range dead {
		requireStatus(t, s, id, herald.StatusDead)
	}
	claimOne(t, s, at(10*time.Hour), live)

	n, err := s.DeliveryReplayMany(t.Context(), &store.DeliveryReplayManyParams{EndpointID: ep.ID, Now: at(11 * time.Hour)})
	require.NoError(t, err)
	require.Equal(t, 3, n, "the real replay does what the dry run said")
}

func testReplayManyPaced(t *testing.T, s store.Store) {
	ep := createEndpoint(t, s, newEndpoint("c", "order.*"), at(0))
	// Three made together (ingest order decides), two later; delivered
	// or dead, every terminal one comes back.
	ids := ingestN(t, s, at(0), ep, 3)
	for _, c := range claimAll(t, s, at(0)) {
		finish(t, s, at(time.Second), c, herald.StatusDelivered)
	}
	ids = append(ids, deadAfter(t, s, ep, at(time.Hour), 1), deadAfter(t, s, ep, at(2*time.Hour), 1))

	now := at(10 * time.Hour)
	n, err := s.DeliveryReplayMany(t.Context(), &store.DeliveryReplayManyParams{EndpointID: ep.ID, Rate: 4, Now: now})
	require.NoError(t, err)
	require.Equal(t, 5, n)
	for i, id := range ids {
		d := requireStatus(t, s, id, herald.StatusPending)
		requireTimePtr(t, now.Add(time.Duration(i)*250*time.Millisecond), d.NextAttemptAt, "delivery %d", i)
		require.Zero(t, d.AttemptCount)
	}
	claimOne(t, s, now, ids[0])
	claimOne(t, s, now.Add(250*time.Millisecond), ids[1])
	requireNoneDue(t, s, now.Add(500*time.Millisecond-time.Microsecond))
	require.Len(t, claimAll(t, s, now.Add(time.Second)), 3)
}
