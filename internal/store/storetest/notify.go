package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhooks/herald"
	"github.com/heraldhooks/herald/internal/breaker"
	"github.com/heraldhooks/herald/internal/store"
)

func notifyCases() []testCase {
	return []testCase{
		{"ConsecutiveFailuresDisableAndNotifyTheConsumer", testAutoDisableConsecutive},
		{"NoSuccessForADayAcrossTenFailuresDisables", testAutoDisableDay},
		{"NoSuccessForTheEndpointsOwnPeriodDisables", testAutoDisableOwnPeriod},
		{"FailingOncePerStreakThenRecovered", testNotifyFailingRecovered},
		{"DeadDeliveryNotifies", testNotifyDead},
		{"GoneDisablesAndNotifies", testNotifyGone},
		{"NotificationOutcomesEmitNothing", testNotifyNoLoop},
		{"OneDisableOneNotificationHoweverOutcomesArrive", testNotifyDisableOnce},
		{"ConcurrentOutcomesDisableOnce", testNotifyDisableOnceConcurrent},
		{"OneOutcomeNotifiesInOneOrder", testNotifyOrder},
		{"RecoveredTimesAreUTC", testNotifyRecoveredUTC},
	}
}

// subscriber is an endpoint of consumer that receives Herald's notifications.
func subscriber(consumer string) *herald.Endpoint {
	return newEndpoint(consumer, "herald.*")
}

// eventsOfType lists consumer's events of eventType, oldest first.
func eventsOfType(t *testing.T, s store.Store, consumer, eventType string) []*herald.Event {
	t.Helper()
	page, err := s.EventList(t.Context(), &store.EventListParams{ConsumerID: consumer, EventType: eventType, Limit: store.MaxListLimit})
	require.NoError(t, err)
	require.Empty(t, page.NextCursor)
	evs := slices.Clone(page.Items)
	slices.Reverse(evs)
	return evs
}

// notifications lists consumer's events of Herald's own types.
func notifications(t *testing.T, s store.Store, consumer string) []*herald.Event {
	t.Helper()
	page, err := s.EventList(t.Context(), &store.EventListParams{ConsumerID: consumer, Limit: store.MaxListLimit})
	require.NoError(t, err)
	var out []*herald.Event
	for _, ev := range page.Items {
		if strings.HasPrefix(ev.EventType, herald.NotifyPrefix) {
			out = append(out, ev)
		}
	}
	return out
}

// oneEvent requires exactly one event of eventType for consumer and
// decodes its payload into payload.
func oneEvent(t *testing.T, s store.Store, consumer, eventType string, payload any) *herald.Event {
	t.Helper()
	evs := eventsOfType(t, s, consumer, eventType)
	require.Len(t, evs, 1, "%s events of %s", eventType, consumer)
	require.NoError(t, json.Unmarshal(evs[0].Payload, payload), "payload %s", evs[0].Payload)
	return evs[0]
}

// requireDeliveredTo requires that event id has exactly one delivery, to
// endpoint ep, pending.
func requireDeliveredTo(t *testing.T, s store.Store, id string, ep *herald.Endpoint) {
	t.Helper()
	page, err := s.DeliveryList(t.Context(), &store.DeliveryListParams{EventID: id})
	require.NoError(t, err)
	require.Len(t, page.Items, 1, "deliveries of %s", id)
	require.Equal(t, ep.ID, page.Items[0].EndpointID)
	require.Equal(t, herald.StatusPending, page.Items[0].Status)
}

// getEndpoint reads endpoint id.
func getEndpoint(t *testing.T, s store.Store, id string) *herald.Endpoint {
	t.Helper()
	ep, err := s.EndpointGet(t.Context(), id)
	require.NoError(t, err)
	return ep
}

func testAutoDisableConsecutive(t *testing.T, s store.Store) {
	in := quietEndpoint("c")
	in.AutoDisableAfterFailures = 3
	ep := createEndpoint(t, s, in, at(0))
	sub := createEndpoint(t, s, subscriber("c"), at(0))
	createEndpoint(t, s, subscriber("c2"), at(0))
	ids := ingestN(t, s, at(0), ep, 4)
	leases := claimAll(t, s, at(0))
	require.Len(t, leases, 4)
	waiting := ingestFor(t, s, at(time.Second), ep)

	for i, id := range ids[:3] {
		fail(t, s, at(time.Duration(i+1)*time.Second), leases[id], time.Minute)
		require.Equal(t, i < 2, getEndpoint(t, s, ep.ID).Enabled, "after %d failures", i+1)
	}
	read := getEndpoint(t, s, ep.ID)
	require.Equal(t, breaker.DisabledAutomatically, read.DisabledReason)
	for _, id := range append(ids, waiting) {
		d := requireStatus(t, s, id, herald.StatusDead)
		require.Equal(t, herald.DeadEndpointDisabled, d.DeadReason, "delivery %s", id)
	}
	require.Equal(t, []bool{false}, complete(t, s, at(4*time.Second), outcome(leases[ids[3]], herald.StatusDelivered, at(4*time.Second))),
		"the attempt in flight finds its lease gone")

	var p herald.EndpointDisabledPayload
	ev := oneEvent(t, s, "c", herald.NotifyEndpointDisabled, &p)
	require.Equal(t, ep.ID, p.EndpointID)
	require.Equal(t, "c", p.ConsumerID)
	require.Equal(t, ep.URL, p.URL)
	require.Equal(t, breaker.DisabledAutomatically, p.Reason)
	requireTime(t, at(3*time.Second), p.DisabledAt)
	requireDeliveredTo(t, s, ev.ID, sub)
	require.Empty(t, notifications(t, s, "c2"), "another consumer hears nothing")
	require.Len(t, eventsOfType(t, s, "c", herald.NotifyEndpointFailing), 1, "the third failure")

	// The subscriber's deliveries flow like any other.
	claimed := claimAll(t, s, at(5*time.Second))
	require.Len(t, claimed, 2)
	for _, c := range claimed {
		require.Equal(t, sub.ID, c.Endpoint.ID)
	}
}

// failRepeatedly fails delivery id n times, the first at start and each
// next one step later, or when the breaker lets a probe go if that is
// later. check runs after each failure with its number and time.
func failRepeatedly(t *testing.T, s store.Store, ep *herald.Endpoint, id string, n int, start time.Time, step time.Duration, check func(i int, now time.Time)) {
	t.Helper()
	now := start
	for i := 1; i <= n; i++ {
		if h := healthOf(t, s, ep.ID, now); h.ProbeAt != nil && h.ProbeAt.After(now) {
			now = *h.ProbeAt
		}
		fail(t, s, now, claimOne(t, s, now, id), 0)
		check(i, now)
		now = now.Add(step)
	}
}

func testAutoDisableDay(t *testing.T, s store.Store) {
	ep := createEndpoint(t, s, quietEndpoint("c"), at(0))
	id := ingestFor(t, s, at(0), ep)
	// Ten failures over 25 hours.
	failRepeatedly(t, s, ep, id, 10, at(0), 25*time.Hour/9, func(i int, now time.Time) {
		read := getEndpoint(t, s, ep.ID)
		if i < 10 {
			require.True(t, read.Enabled, "after %d failures in %s", i, now.Sub(Base))
			return
		}
		require.Equal(t, at(25*time.Hour), now)
		require.False(t, read.Enabled)
		require.Equal(t, breaker.DisabledAutomatically, read.DisabledReason)
	})
	require.Equal(t, herald.DeadEndpointDisabled, requireStatus(t, s, id, herald.StatusDead).DeadReason)
	var p herald.EndpointDisabledPayload
	oneEvent(t, s, "c", herald.NotifyEndpointDisabled, &p)
	require.Equal(t, breaker.DisabledAutomatically, p.Reason)
}

func testAutoDisableOwnPeriod(t *testing.T, s store.Store) {
	in := quietEndpoint("c1")
	in.AutoDisableAfter = 2 * time.Hour
	short := createEndpoint(t, s, in, at(0))
	long := createEndpoint(t, s, quietEndpoint("c2"), at(0))
	for _, ep := range []*herald.Endpoint{short, long} {
		id := ingestFor(t, s, at(0), ep)
		var last time.Time
		failRepeatedly(t, s, ep, id, 10, at(0), 15*time.Minute, func(i int, now time.Time) {
			last = now
			if i < 10 {
				require.True(t, getEndpoint(t, s, ep.ID).Enabled, "after %d failures", i)
			}
		})
		require.Greater(t, last.Sub(Base), 2*time.Hour)
		require.Less(t, last.Sub(Base), 24*time.Hour)
	}
	require.False(t, getEndpoint(t, s, short.ID).Enabled, "ten failures and no success for two hours")
	require.True(t, getEndpoint(t, s, long.ID).Enabled, "the default is a day")
}

func testNotifyFailingRecovered(t *testing.T, s store.Store) {
	ep := createEndpoint(t, s, quietEndpoint("c"), at(0))
	sub := createEndpoint(t, s, subscriber("c"), at(0))
	ids := ingestN(t, s, at(0), ep, 5)
	leases := claimAll(t, s, at(0))

	for i, id := range ids[:2] {
		fail(t, s, at(time.Duration(i+1)*time.Second), leases[id], time.Hour)
	}
	require.Empty(t, notifications(t, s, "c"), "two failures are no streak yet")
	fail(t, s, at(3*time.Second), leases[ids[2]], time.Hour)

	var failing herald.EndpointFailingPayload
	ev := oneEvent(t, s, "c", herald.NotifyEndpointFailing, &failing)
	requireTime(t, at(time.Second), failing.FailingSince)
	failing.FailingSince = time.Time{}
	require.Equal(t, herald.EndpointFailingPayload{
		EndpointID:          ep.ID,
		ConsumerID:          "c",
		URL:                 ep.URL,
		ConsecutiveFailures: 3,
		LastStatusCode:      503,
		LastError:           "HTTP 503",
	}, failing)
	requireDeliveredTo(t, s, ev.ID, sub)

	fail(t, s, at(4*time.Second), leases[ids[3]], time.Hour)
	require.Len(t, eventsOfType(t, s, "c", herald.NotifyEndpointFailing), 1, "once per streak")

	finish(t, s, at(5*time.Second), leases[ids[4]], herald.StatusDelivered)
	var recovered herald.EndpointRecoveredPayload
	ev = oneEvent(t, s, "c", herald.NotifyEndpointRecovered, &recovered)
	requireTime(t, at(time.Second), recovered.FailingSince)
	requireTime(t, at(5*time.Second), recovered.RecoveredAt)
	require.Equal(t, ep.ID, recovered.EndpointID)
	require.Equal(t, "c", recovered.ConsumerID)
	require.Equal(t, ep.URL, recovered.URL)
	require.Equal(t, 4, recovered.FailedAttempts)
	requireDeliveredTo(t, s, ev.ID, sub)

	// A success after a short streak is no recovery; a new long streak
	// is a new failing notice.
	more := ingestN(t, s, at(time.Minute), ep, 5)
	leases = claimAll(t, s, at(time.Minute))
	fail(t, s, at(time.Minute), leases[more[0]], time.Hour)
	finish(t, s, at(time.Minute), leases[more[1]], herald.StatusDelivered)
	for _, id := range more[2:] {
		fail(t, s, at(2*time.Minute), leases[id], time.Hour)
	}
	require.Len(t, eventsOfType(t, s, "c", herald.NotifyEndpointRecovered), 1)
	require.Len(t, eventsOfType(t, s, "c", herald.NotifyEndpointFailing), 2)
}

func testNotifyDead(t *testing.T, s store.Store) {
	ep := createEndpoint(t, s, quietEndpoint("c"), at(0))
	sub := createEndpoint(t, s, subscriber("c"), at(0))
	res := ingestOne(t, s, at(0), "c", "order.created")
	require.Len(t, res.Deliveries, 1)
	id := res.Deliveries[0].ID
	fail(t, s, at(time.Second), claimOne(t, s, at(time.Second), id), 0)
	c := claimOne(t, s, at(2*time.Second), id)
	o := outcome(c, herald.StatusDead, at(2*time.Second))
	o.DeadReason = herald.DeadExhausted
	o.Attempt.StatusCode = 0
	o.Attempt.Error = "dial tcp: connection refused"
	require.Equal(t, []bool{true}, complete(t, s, at(3*time.Second), o))

	var p herald.DeliveryDeadPayload
	ev := oneEvent(t, s, "c", herald.NotifyDeliveryDead, &p)
	require.Equal(t, herald.DeliveryDeadPayload{
		DeliveryID:   id,
		EventID:      res.Event.ID,
		EventType:    "order.created",
		EndpointID:   ep.ID,
		ConsumerID:   "c",
		DeadReason:   string(herald.DeadExhausted),
		AttemptCount: 2,
		LastError:    "dial tcp: connection refused",
	}, p)
	require.Contains(t, string(ev.Payload), `"dead_reason":"exhausted"`)
	requireTime(t, at(3*time.Second), ev.CreatedAt)
	requireDeliveredTo(t, s, ev.ID, sub)
	require.Len(t, notifications(t, s, "c"), 1, "two failures: no failing notice")
}

func testNotifyGone(t *testing.T, s store.Store) {
	ep := createEndpoint(t, s, quietEndpoint("c"), at(0))
	sub := createEndpoint(t, s, subscriber("c"), at(0))
	id := ingestFor(t, s, at(0), ep)
	// Every operator event, but notifications are opt-in: none reach it.
	createEndpoint(t, s, newEndpoint("c", "*"), at(0))
	o := outcome(claimOne(t, s, at(0), id), herald.StatusDead, at(time.Second))
	o.Attempt.StatusCode = 410
	o.Attempt.Error = "HTTP 410"
	o.DeadReason = herald.DeadGone
	o.DisableEndpoint = "gone"
	require.Equal(t, []bool{true}, complete(t, s, at(time.Second), o))

	var dead herald.DeliveryDeadPayload
	ev := oneEvent(t, s, "c", herald.NotifyDeliveryDead, &dead)
	require.Equal(t, "gone", dead.DeadReason)
	require.Equal(t, 410, dead.LastStatusCode)
	requireDeliveredTo(t, s, ev.ID, sub)
	var disabled herald.EndpointDisabledPayload
	ev = oneEvent(t, s, "c", herald.NotifyEndpointDisabled, &disabled)
	require.Equal(t, "gone", disabled.Reason)
	require.Equal(t, ep.ID, disabled.EndpointID)
	requireDeliveredTo(t, s, ev.ID, sub)
	require.Len(t, notifications(t, s, "c"), 2)
}

func testNotifyNoLoop(t *testing.T, s store.Store) {
	ep := createEndpoint(t, s, quietEndpoint("c"), at(0))
	in := subscriber("c")
	in.AutoDisableAfterFailures = 4
	sub := createEndpoint(t, s, in, at(0))
	ingestN(t, s, at(0), ep, 2)
	for _, c := range claimAll(t, s, at(0)) {
		finish(t, s, at(time.Second), c, herald.StatusDead)
	}
	before := notifications(t, s, "c")
	require.Len(t, before, 2, "two herald.delivery.dead")

	// The subscriber fails every notification: its health follows, it is
	// disabled at its fourth failure, and none of it is notified.
	leases := claimN(t, s, at(2*time.Second), 10, 2)
	for _, c := range leases {
		require.Equal(t, sub.ID, c.Endpoint.ID)
		fail(t, s, at(2*time.Second), c, 0)
	}
	leases = claimN(t, s, at(3*time.Second), 10, 2)
	fail(t, s, at(3*time.Second), leases[0], 0) // the third: no failing notice
	finish(t, s, at(3*time.Second), leases[1], herald.StatusDead)

	read := getEndpoint(t, s, sub.ID)
	require.False(t, read.Enabled)
	require.Equal(t, breaker.DisabledAutomatically, read.DisabledReason)
	require.Equal(t, 4, healthOf(t, s, sub.ID, at(3*time.Second)).ConsecutiveFailures)
	require.Len(t, notifications(t, s, "c"), len(before), "no failing, dead or disabled notice about notifications")
}

// testNotifyDisableOnce: several outcomes of one endpoint that would each
// disable it, in one batch and in batches written one after the other,
// disable it once and emit one herald.endpoint.disabled. The outcomes
// after the disable change no health: their deliveries died with it.
func testNotifyDisableOnce(t *testing.T, s store.Store) {
	in := quietEndpoint("c")
	in.AutoDisableAfterFailures = 2
	ep := createEndpoint(t, s, in, at(0))
	createEndpoint(t, s, subscriber("c"), at(0))
	ids := ingestN(t, s, at(0), ep, 6)
	leases := claimAll(t, s, at(0))
	require.Len(t, leases, 6)

	fail(t, s, at(time.Second), leases[ids[0]], time.Minute)
	require.True(t, getEndpoint(t, s, ep.ID).Enabled, "one failure of two")

	// One batch: the first failure reaches the threshold, the second
	// would go past it, and a 410 would disable the endpoint on its own.
	gone := outcome(leases[ids[3]], herald.StatusDead, at(2*time.Second))
	gone.Attempt.StatusCode = 410
	gone.Attempt.Error = "HTTP 410"
	gone.DeadReason = herald.DeadGone
	gone.DisableEndpoint = string(herald.DeadGone)
	require.Equal(t, []bool{true, true, true}, complete(t, s, at(2*time.Second),
		outcome(leases[ids[1]], herald.StatusPending, at(2*time.Second)),
		outcome(leases[ids[2]], herald.StatusPending, at(2*time.Second)),
		gone))
	read := getEndpoint(t, s, ep.ID)
	require.False(t, read.Enabled)
	require.Equal(t, breaker.DisabledAutomatically, read.DisabledReason, "the first outcome to disable it says why")

	// Batches written after it, each of which would disable it again.
	gone = outcome(leases[ids[5]], herald.StatusDead, at(3*time.Second))
	gone.Attempt.StatusCode = 410
	gone.DeadReason = herald.DeadGone
	gone.DisableEndpoint = string(herald.DeadGone)
	require.Equal(t, []bool{false}, complete(t, s, at(3*time.Second), outcome(leases[ids[4]], herald.StatusPending, at(3*time.Second))),
		"its delivery died with the disable")
	require.Equal(t, []bool{false}, complete(t, s, at(4*time.Second), gone), "its delivery died with the disable")

	require.Equal(t, 2, healthOf(t, s, ep.ID, at(4*time.Second)).ConsecutiveFailures,
		"only the outcomes up to the disable count")
	require.Equal(t, breaker.DisabledAutomatically, getEndpoint(t, s, ep.ID).DisabledReason)
	var p herald.EndpointDisabledPayload
	oneEvent(t, s, "c", herald.NotifyEndpointDisabled, &p)
	require.Equal(t, ep.ID, p.EndpointID)
	require.Equal(t, breaker.DisabledAutomatically, p.Reason)
	requireTime(t, at(2*time.Second), p.DisabledAt)
}

// testNotifyDisableOnceConcurrent: outcomes written at the same time by
// several writers (nodes), each of which would disable the endpoint, make
// one disable and one herald.endpoint.disabled, whatever their order: the
// first to be written disables it and the others find their deliveries
// dead.
func testNotifyDisableOnceConcurrent(t *testing.T, s store.Store) {
	in := quietEndpoint("c")
	in.AutoDisableAfterFailures = 1
	ep := createEndpoint(t, s, in, at(0))
	createEndpoint(t, s, subscriber("c"), at(0))
	const writers = 8
	ids := ingestN(t, s, at(0), ep, writers)
	leases := claimAll(t, s, at(0))
	require.Len(t, leases, writers)

	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		applied int
		errs    []error
		start   = make(chan struct{})
	)
	for i, id := range ids {
		wg.Go(func() {
			o := outcome(leases[id], herald.StatusPending, at(time.Second))
			if i%2 == 1 { // a 410 disables the endpoint too
				o.Status = herald.StatusDead
				o.Attempt.StatusCode = 410
				o.DeadReason = herald.DeadGone
				o.DisableEndpoint = string(herald.DeadGone)
			}
			<-start
			got, err := s.DeliveryCompleteMany(t.Context(), &store.DeliveryCompleteManyParams{
				Outcomes: []store.DeliveryOutcome{o}, Now: at(time.Second)})
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil:
				errs = append(errs, fmt.Errorf("complete %s: %w", o.DeliveryID, err))
			case len(got) != 1:
				errs = append(errs, fmt.Errorf("complete %s: %d answers", o.DeliveryID, len(got)))
			case got[0]:
				applied++
			}
		})
	}
	close(start)
	wg.Wait()
	require.NoError(t, errors.Join(errs...))

	require.Equal(t, 1, applied, "the first outcome disables the endpoint; the others' deliveries died with it")
	require.False(t, getEndpoint(t, s, ep.ID).Enabled)
	require.Len(t, eventsOfType(t, s, "c", herald.NotifyEndpointDisabled), 1)
	require.Equal(t, 1, healthOf(t, s, ep.ID, at(time.Second)).ConsecutiveFailures)
}
