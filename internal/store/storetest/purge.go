package storetest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhooks/herald"
	"github.com/heraldhooks/herald/internal/store"
)

func purgeCases() []testCase {
	return []testCase{
		{"EndedHistoryGoesWithItsDeliveriesAndAttempts", testPurgeEndedHistory},
		{"BatchesWalkPastWhatStays", testPurgeBatches},
		{"AReplayKeepsTheEventUntilItEndsAgain", testPurgeReplay},
		{"RetentionMustBePositive", testPurgeNeedsRetention},
	}
}

// day is a day on the test clock; retention the retention the cases purge
// with (the default, 30 days).
const (
	day       = 24 * time.Hour
	retention = 30 * day
)

// purgePass runs batches of limit events at now until the pass is done
// and returns what they deleted in all, and how many batches it took.
func purgePass(t *testing.T, s store.Store, now time.Time, limit int) (store.PurgeResult, int) {
	t.Helper()
	var (
		total   store.PurgeResult
		after   store.PurgeCursor
		batches int
	)
	for {
		batches++
		require.Less(t, batches, 1000, "the pass never ended")
		res, err := s.EventPurge(t.Context(), &store.EventPurgeParams{
			Retention: retention, After: after, Limit: limit, Now: now,
		})
		require.NoError(t, err)
		require.False(t, res.Busy, "no other node purges")
		if after != (store.PurgeCursor{}) && res.Next != after {
			require.True(t, res.Next.CreatedAt.After(after.CreatedAt) ||
				(res.Next.CreatedAt.Equal(after.CreatedAt) && res.Next.EventID > after.EventID),
				"the walk moves forward: %+v after %+v", res.Next, after)
		}
		total.Events += res.Events
		total.Deliveries += res.Deliveries
		total.Attempts += res.Attempts
		after = res.Next
		if res.Done {
			return total, batches
		}
	}
}

// eventIDs lists the id of every event kept.
func eventIDs(t *testing.T, s store.Store) []string {
	t.Helper()
	return collect(t, store.MaxListLimit, func(e *herald.Event) string { return e.ID },
		func(cursor string) (*store.Page[*herald.Event], error) {
			return s.EventList(t.Context(), &store.EventListParams{Cursor: cursor, Limit: store.MaxListLimit})
		})
}

// requireEventGone requires that event id, and each of the deliveries
// named, is gone with its attempts.
func requireEventGone(t *testing.T, s store.Store, id string, deliveries ...string) {
	t.Helper()
	_, err := s.EventGet(t.Context(), id)
	expectNotFound(t, err)
	for _, d := range deliveries {
		_, err := s.DeliveryGet(t.Context(), d)
		expectNotFound(t, err)
		require.Empty(t, attempts(t, s, d), "the attempts of %s went with it", d)
	}
}

// requireEventKept requires that event id is kept, and each delivery named
// with want attempts.
func requireEventKept(t *testing.T, s store.Store, id string, deliveries map[string]int) {
	t.Helper()
	_, err := s.EventGet(t.Context(), id)
	require.NoError(t, err, "event %s is kept", id)
	for d, want := range deliveries {
		require.Equal(t, id, getDelivery(t, s, d).EventID)
		require.Len(t, attempts(t, s, d), want, "the attempts of %s are kept", d)
	}
}

// testPurgeEndedHistory: with a cutoff 30 days back, events whose
// deliveries all ended before it go with their deliveries and attempts
// (delivered, dead, cancelled, and an event with no delivery); an event
// with a delivery still pending, one dead since the cutoff, or one of two
// deliveries still live stays whole. A freed idempotency key can be used
// again.
func testPurgeEndedHistory(t *testing.T, s store.Store) {
	a := createEndpoint(t, s, newEndpoint("c", "order.*"), at(0))
	m1 := createEndpoint(t, s, newEndpoint("m", "order.*"), at(0))
	m2 := createEndpoint(t, s, newEndpoint("m", "order.*"), at(0))

	// Delivered at the second attempt.
	delivered := ingestFor(t, s, at(0), a)
	c := claimOne(t, s, at(time.Minute), delivered)
	require.Equal(t, []bool{true}, complete(t, s, at(time.Minute), outcome(c, herald.StatusPending, at(time.Minute))))
	finish(t, s, at(2*time.Minute), claimOne(t, s, at(2*time.Minute), delivered), herald.StatusDelivered)
	deliveredEvent := getDelivery(t, s, delivered).EventID

	// Dead after two attempts.
	dead := deadAfter(t, s, a, at(time.Hour), 2)
	deadEvent := getDelivery(t, s, dead).EventID

	// Cancelled before any attempt.
	cancelled := ingestFor(t, s, at(2*time.Hour), a)
	_, err := s.DeliveryCancel(t.Context(), &store.DeliveryCancelParams{ID: cancelled, Now: at(3 * time.Hour)})
	require.NoError(t, err)
	cancelledEvent := getDelivery(t, s, cancelled).EventID

	// No endpoint: an event without deliveries, ended when it was made.
	lonely := ingest(t, s, at(4*time.Hour), store.EventIngestItem{
		ConsumerID: "nobody", EventType: "order.created", Payload: []byte(`{}`), IdempotencyKey: "k1",
	})[0]
	require.Empty(t, lonely.Deliveries)

	// Dead two days in: since the cutoff of a purge on day 31.
	deadRecent := deadAfter(t, s, a, at(2*day), 2)
	deadRecentEvent := getDelivery(t, s, deadRecent).EventID

	// Two deliveries: one delivered on day 0, the other still retrying.
	both := ingestOne(t, s, at(6*time.Hour), "m", "order.created")
	require.Len(t, both.Deliveries, 2)
	claimed := claimAll(t, s, at(6*time.Hour))
	require.Len(t, claimed, 2)
	var done, live string
	for _, ref := range both.Deliveries {
		if ref.EndpointID == m1.ID {
			done = ref.ID
			finish(t, s, at(6*time.Hour), claimed[ref.ID], herald.StatusDelivered)
		} else {
			require.Equal(t, m2.ID, ref.EndpointID)
			live = ref.ID
			require.Equal(t, []bool{true}, complete(t, s, at(6*time.Hour), outcome(claimed[ref.ID], herald.StatusPending, at(6*time.Hour))))
		}
	}

	// Pending since day 0, never attempted.
	pending := ingestFor(t, s, at(7*time.Hour), a)
	pendingEvent := getDelivery(t, s, pending).EventID

	// Made on day 30: after the cutoff.
	recent := ingestOne(t, s, at(30*day), "nobody", "order.created")

	before := eventIDs(t, s)
	total, _ := purgePass(t, s, at(31*day), 2)
	after := eventIDs(t, s)
	require.EqualValues(t, len(before)-len(after), total.Events, "the events counted are the events gone")
	require.EqualValues(t, 3, total.Deliveries, "delivered, dead and cancelled")
	require.EqualValues(t, 4, total.Attempts, "two of the delivered one, two of the dead one")

	requireEventGone(t, s, deliveredEvent, delivered)
	requireEventGone(t, s, deadEvent, dead)
	requireEventGone(t, s, cancelledEvent, cancelled)
	requireEventGone(t, s, lonely.Event.ID)

	requireEventKept(t, s, deadRecentEvent, map[string]int{deadRecent: 2})
	requireStatus(t, s, deadRecent, herald.StatusDead)
	requireEventKept(t, s, pendingEvent, map[string]int{pending: 0})
	requireStatus(t, s, pending, herald.StatusPending)
	requireEventKept(t, s, both.Event.ID, map[string]int{done: 1, live: 1})
	requireStatus(t, s, done, herald.StatusDelivered)
	requireStatus(t, s, live, herald.StatusPending)
	requireEventKept(t, s, recent.Event.ID, nil)

	again, _ := purgePass(t, s, at(31*day), 2)
	require.Zero(t, again.Rows(), "a second pass finds nothing more")

	// The purged event's idempotency key is free again.
	reused := ingest(t, s, at(31*day), store.EventIngestItem{
		ConsumerID: "nobody", EventType: "order.created", Payload: []byte(`{}`), IdempotencyKey: "k1",
	})[0]
	require.False(t, reused.Duplicate)
	require.NotEqual(t, lonely.Event.ID, reused.Event.ID)

	// Once the last live delivery ends and its time has passed, the event
	// that kept it goes whole.
	claimed = claimAll(t, s, at(31*day))
	require.Contains(t, claimed, live)
	finish(t, s, at(31*day), claimed[live], herald.StatusDelivered)
	total, _ = purgePass(t, s, at(61*day+time.Second), 2)
	require.EqualValues(t, 3, total.Deliveries, "both's two, and the one dead on day 2")
	requireEventGone(t, s, both.Event.ID, done, live)
	requireEventGone(t, s, deadRecentEvent, deadRecent)
}

// testPurgeBatches: a pass looks at Limit events a batch and walks on past
// those that stay, events made in the same microsecond included, until it
// has looked at every event made before the cutoff.
func testPurgeBatches(t *testing.T, s store.Store) {
	a := createEndpoint(t, s, newEndpoint("c", "order.*"), at(0))
	var gone, kept []string
	for i := range 3 {
		// One that stays (a pending delivery) before each that goes.
		res := ingestOne(t, s, at(time.Duration(i)*time.Minute), "c", "order.created")
		require.Len(t, res.Deliveries, 1)
		require.Equal(t, a.ID, res.Deliveries[0].EndpointID)
		kept = append(kept, res.Event.ID)
		gone = append(gone, ingestOne(t, s, at(time.Duration(i)*time.Minute+time.Second), "nobody", "order.created").Event.ID)
	}
	// Three in one call: the same created_at.
	item := store.EventIngestItem{ConsumerID: "nobody", EventType: "order.created", Payload: []byte(`{}`)}
	for _, r := range ingest(t, s, at(time.Hour), item, item, item) {
		gone = append(gone, r.Event.ID)
	}

	total, batches := purgePass(t, s, at(31*day), 1)
	require.EqualValues(t, len(gone), total.Events)
	require.Zero(t, total.Deliveries)
	require.GreaterOrEqual(t, batches, len(gone)+len(kept), "one event looked at per batch")
	for _, id := range gone {
		requireEventGone(t, s, id)
	}
	for _, id := range kept {
		requireEventKept(t, s, id, nil)
	}

	// A batch that looks at fewer events than its limit ends the pass.
	res, err := s.EventPurge(t.Context(), &store.EventPurgeParams{Retention: retention, Limit: 100, Now: at(31 * day)})
	require.NoError(t, err)
	require.True(t, res.Done)
	require.Zero(t, res.Rows())
	require.Equal(t, kept[len(kept)-1], res.Next.EventID, "the last event looked at")
	requireTime(t, at(2*time.Minute), res.Next.CreatedAt)

	// Nothing made before the cutoff: the pass is done at once.
	res, err = s.EventPurge(t.Context(), &store.EventPurgeParams{Retention: retention, Now: at(time.Hour)})
	require.NoError(t, err)
	require.True(t, res.Done)
	require.Zero(t, res.Rows())
	require.Equal(t, store.PurgeCursor{}, res.Next)
}

// testPurgeReplay: a dead delivery stays in the dead-letter queue until
// its time has passed; replayed, it keeps its event while it is live, and
// for the retention after it ends again.
func testPurgeReplay(t *testing.T, s store.Store) {
	a := createEndpoint(t, s, newEndpoint("c", "order.*"), at(0))
	dead := deadAfter(t, s, a, at(0), 1)
	event := getDelivery(t, s, dead).EventID

	total, _ := purgePass(t, s, at(29*day), 10)
	require.Zero(t, total.Deliveries, "dead for 29 days: still in the dead-letter queue")

	_, err := s.DeliveryReplay(t.Context(), &store.DeliveryReplayParams{ID: dead, Now: at(29 * day)})
	require.NoError(t, err)
	total, _ = purgePass(t, s, at(31*day), 10)
	require.Zero(t, total.Deliveries, "a replayed delivery is live")
	requireEventKept(t, s, event, map[string]int{dead: 1})

	finish(t, s, at(31*day), claimOne(t, s, at(31*day), dead), herald.StatusDelivered)
	total, _ = purgePass(t, s, at(60*day), 10)
	require.Zero(t, total.Deliveries, "ended on day 31: kept until day 61")
	requireEventKept(t, s, event, map[string]int{dead: 2})

	total, _ = purgePass(t, s, at(61*day+time.Second), 10)
	require.EqualValues(t, 1, total.Deliveries)
	require.EqualValues(t, 2, total.Attempts)
	requireEventGone(t, s, event, dead)

	_, err = s.DeliveryReplay(t.Context(), &store.DeliveryReplayParams{ID: dead, Now: at(62 * day)})
	expectNotFound(t, err)
}

// testPurgeNeedsRetention: a retention of 0 (keep everything) never
// reaches the store; a purge without one is refused.
func testPurgeNeedsRetention(t *testing.T, s store.Store) {
	ingestOne(t, s, at(0), "nobody", "order.created")
	for _, r := range []time.Duration{0, -time.Hour} {
		_, err := s.EventPurge(t.Context(), &store.EventPurgeParams{Retention: r, Now: at(31 * day)})
		require.Error(t, err)
	}
	require.Len(t, eventIDs(t, s), 1)
}
