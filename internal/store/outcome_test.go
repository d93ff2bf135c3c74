package store_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhooks/herald"
	"github.com/heraldhooks/herald/internal/breaker"
	"github.com/heraldhooks/herald/internal/store"
)

func TestObserveOutcome(t *testing.T) {
	t.Parallel()
	zone := time.FixedZone("UTC+9", 9*60*60)
	now := time.Date(2026, 1, 2, 12, 0, 0, 0, zone)
	since := now.Add(-time.Hour)
	streak := func(n int, notified bool, since *time.Time) herald.EndpointHealth {
		h := herald.NewEndpointHealth()
		h.ConsecutiveFailures, h.FailingNotified, h.FailingSince = n, notified, since
		return h
	}
	failed := store.DeliveryOutcome{Lease: store.Lease{DeliveryID: "dlv_1"}, Status: herald.StatusPending,
		Attempt: herald.Attempt{StatusCode: 503, Error: "HTTP 503"}}
	dead := failed
	dead.Status, dead.DeadReason = herald.StatusDead, herald.DeadExhausted
	gone := dead
	gone.Attempt.StatusCode, gone.DeadReason, gone.DisableEndpoint = 410, herald.DeadGone, "gone"
	delivered := store.DeliveryOutcome{Lease: store.Lease{DeliveryID: "dlv_1"}, Status: herald.StatusDelivered,
		Attempt: herald.Attempt{StatusCode: 200}}
	event := store.DeliveryFacts{EventID: "evt_1", EventType: "order.created", ConsumerID: "c", AttemptCount: 3}
	notice := event
	notice.EventType = herald.NotifyDeliveryDead

	for _, tc := range []struct {
		name    string
		health  herald.EndpointHealth
		enabled bool
		o       store.DeliveryOutcome
		d       store.DeliveryFacts
		types   []string
		disable string
	}{
		{"FirstFailureNothing", herald.NewEndpointHealth(), true, failed, event, nil, ""},
		{"ThirdFailureFailing", streak(2, false, &since), true, failed, event,
			[]string{herald.NotifyEndpointFailing}, ""},
		{"NoFailingSinceDoesNotPanic", streak(2, false, nil), true, failed, event,
			[]string{herald.NotifyEndpointFailing}, ""},
		{"RecoveredAfterANotifiedStreak", streak(4, true, &since), true, delivered, event,
			[]string{herald.NotifyEndpointRecovered}, ""},
		{"NotifiedStreakWithoutFailingSinceIsNoRecovery", streak(4, true, nil), true, delivered, event, nil, ""},
		{"FailingThenDeadThenDisabled", streak(99, false, &since), true, dead, event,
			[]string{herald.NotifyEndpointFailing, herald.NotifyDeliveryDead, herald.NotifyEndpointDisabled},
			breaker.DisabledAutomatically},
		{"GoneDeadThenDisabled", herald.NewEndpointHealth(), true, gone, event,
			[]string{herald.NotifyDeliveryDead, herald.NotifyEndpointDisabled}, "gone"},
		{"DisabledAlreadyIsNotDisabledAgain", herald.NewEndpointHealth(), false, gone, event,
			[]string{herald.NotifyDeliveryDead}, ""},
		{"NotificationsEmitNothingButStillDisable", streak(99, false, &since), true, dead, notice, nil,
			breaker.DisabledAutomatically},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ep := &herald.Endpoint{ID: "ep_1", ConsumerID: "c", URL: "https://example.com/hooks",
				Enabled: tc.enabled, Health: tc.health}
			fx := store.ObserveOutcome(breaker.Default(), ep, &tc.o, tc.d, breaker.Window{}, now)
			types := []string(nil)
			for _, n := range fx.Notifications {
				types = append(types, n.EventType)
				var fields map[string]any
				require.NoError(t, json.Unmarshal(n.Payload, &fields))
				for _, k := range []string{"failing_since", "recovered_at", "disabled_at"} {
					if v, ok := fields[k]; ok {
						s, _ := v.(string)
						require.Regexp(t, `Z$`, s, "%s of %s is UTC", k, n.EventType)
					}
				}
			}
			require.Equal(t, tc.types, types)
			require.Equal(t, tc.disable, fx.Disable)
			require.Equal(t, tc.health, ep.Health, "the endpoint is not changed")
		})
	}
}

// TestObserveOutcomeTellsTheConsumerNoAddress: the herald.* notifications
// go to the endpoint's consumer, so a refused destination's error reads
// as herald.DestinationNotAllowed in them; other errors are kept.
func TestObserveOutcomeTellsTheConsumerNoAddress(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 2, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct{ recorded, notified string }{
		{herald.RefusedDestinationError("10.20.30.40"), herald.DestinationNotAllowed},
		{herald.RefusedDestinationError("fd12:3456::1"), herald.DestinationNotAllowed},
		{"HTTP 503", "HTTP 503"},
		{"destination host unreachable", "destination host unreachable"},
	} {
		h := herald.NewEndpointHealth()
		h.ConsecutiveFailures, h.FailingSince = 99, &now
		ep := &herald.Endpoint{ID: "ep_1", ConsumerID: "c", URL: "https://example.com/hooks", Enabled: true, Health: h}
		o := store.DeliveryOutcome{Lease: store.Lease{DeliveryID: "dlv_1"}, Status: herald.StatusDead,
			DeadReason: herald.DeadExhausted, Attempt: herald.Attempt{Error: tc.recorded}}
		fx := store.ObserveOutcome(breaker.Default(), ep, &o, store.DeliveryFacts{EventID: "evt_1", EventType: "order.created", ConsumerID: "c"}, breaker.Window{}, now)
		var seen int
		for _, n := range fx.Notifications {
			var fields map[string]any
			require.NoError(t, json.Unmarshal(n.Payload, &fields))
			if v, ok := fields["last_error"]; ok {
				require.Equal(t, tc.notified, v, "%s of %q", n.EventType, tc.recorded)
				seen++
			}
		}
		require.Equal(t, 2, seen, "failing and dead both carry the last error")
	}
}

func TestOutcomeBatchStopsAtTheDisable(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 2, 12, 0, 0, 0, time.UTC)
	ep := &herald.Endpoint{ID: "ep_1", ConsumerID: "c", Enabled: true, AutoDisableAfterFailures: 2,
		Health: herald.NewEndpointHealth()}
	other := &herald.Endpoint{ID: "ep_2", ConsumerID: "c", Enabled: true, Health: herald.NewEndpointHealth()}
	failed := store.DeliveryOutcome{Status: herald.StatusPending, Attempt: herald.Attempt{StatusCode: 503}}
	facts := store.DeliveryFacts{EventType: "order.created", ConsumerID: "c"}
	b := store.NewOutcomeBatch(breaker.Default(), now)
	for _, e := range []*herald.Endpoint{ep, other, ep, ep} {
		if b.Observes(e.ID) {
			b.Observe(e, &failed, facts, breaker.Window{})
		}
	}
	require.Equal(t, []*herald.Endpoint{ep, other}, b.Changed)
	require.Equal(t, 2, ep.Health.ConsecutiveFailures, "the outcome after the disable is not observed")
	require.Equal(t, []store.EndpointDisable{{ID: "ep_1", Reason: breaker.DisabledAutomatically}}, b.Disable)
	require.False(t, b.Observes(ep.ID))
	require.True(t, b.Observes(other.ID))
	require.Len(t, b.Notifications, 1)
	require.Equal(t, herald.NotifyEndpointDisabled, b.Notifications[0].EventType)
}
