package store_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhooks/herald"
	"github.com/heraldhooks/herald/internal/ratelimit"
	"github.com/heraldhooks/herald/internal/store"
)

func TestClaimAllowance(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 2, 12, 0, 0, 0, time.UTC)
	later, earlier := now.Add(time.Minute), now.Add(-time.Minute)
	open := func(probeAt time.Time) herald.EndpointHealth {
		h := herald.NewEndpointHealth()
		h.BreakerState, h.ProbeAt = herald.BreakerOpen, &probeAt
		return h
	}
	for _, tc := range []struct {
		name     string
		health   herald.EndpointHealth
		inFlight int
		n        int
		probe    bool
	}{
		{"ClosedTakesUpToTheCap", herald.NewEndpointHealth(), 0, 4, false},
		{"ClosedTakesWhatTheCapLeaves", herald.NewEndpointHealth(), 3, 1, false},
		{"OpenBlocks", open(later), 0, 0, false},
		{"OpenPastItsProbeTimeSendsOneProbe", open(earlier), 0, 1, true},
		{"AProbeStillNeedsRoomUnderTheCap", open(earlier), 4, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ep := &herald.Endpoint{ID: "ep_1", Enabled: true, MaxInFlight: 4, Health: tc.health}
			n, probe := store.ClaimAllowance(ep, ratelimit.Bucket{}, tc.inFlight, now)
			require.Equal(t, tc.n, n)
			require.Equal(t, tc.probe, probe)
		})
	}
}

func TestAfterClaim(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 2, 12, 0, 0, 0, time.UTC)
	lease := now.Add(time.Minute)
	plain := &herald.Endpoint{ID: "ep_1", Health: herald.NewEndpointHealth()}
	require.True(t, store.AfterClaim(plain, ratelimit.Bucket{}, 3, false, lease, now).Empty())
	require.True(t, store.AfterClaim(plain, ratelimit.Bucket{}, 0, true, lease, now).Empty(), "nothing taken")

	w := store.AfterClaim(plain, ratelimit.Bucket{}, 1, true, lease, now)
	require.Nil(t, w.Bucket)
	require.NotNil(t, w.Health)
	require.Equal(t, herald.BreakerHalfOpen, w.Health.BreakerState)
	require.Equal(t, &lease, w.Health.ProbeAt)

	limited := &herald.Endpoint{ID: "ep_2", RateLimit: &herald.RateLimit{PerSecond: 10}, Health: herald.NewEndpointHealth()}
	w = store.AfterClaim(limited, ratelimit.Bucket{}, 3, false, lease, now)
	require.Nil(t, w.Health)
	require.NotNil(t, w.Bucket)
	require.Equal(t, now, w.Bucket.At)
}

func TestLeaseLossesEnd(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name          string
		losses, limit int
		end           bool
	}{
		{"FewerThanTheLimitGoesOn", 2, 3, false},
		{"TheLimitEnds", 3, 3, true},
		{"PastTheLimitEnds", 4, 3, true},
		{"NoLimitMeansTheDefault", herald.DefaultMaxLeaseLosses - 1, 0, false},
		{"TheDefaultEnds", herald.DefaultMaxLeaseLosses, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tc.end, store.LeaseLossesEnd(tc.losses, tc.limit))
		})
	}
}

func TestLeaseLostNotification(t *testing.T) {
	t.Parallel()
	d := &herald.Delivery{ID: "dlv_1", EndpointID: "ep_1", ConsumerID: "c", AttemptCount: 2,
		LastStatusCode: 503, LastError: "HTTP 503"}
	n, ok := store.LeaseLostNotification(d, &herald.Event{ID: "evt_1", EventType: "order.created"})
	require.True(t, ok)
	require.Equal(t, herald.NotifyDeliveryDead, n.EventType)
	require.Equal(t, "c", n.ConsumerID)
	require.JSONEq(t, `{"delivery_id":"dlv_1","event_id":"evt_1","event_type":"order.created",
		"endpoint_id":"ep_1","consumer_id":"c","dead_reason":"lease_lost","attempt_count":2,
		"last_status_code":503,"last_error":"HTTP 503"}`, string(n.Payload))

	_, ok = store.LeaseLostNotification(d, &herald.Event{ID: "evt_2", EventType: herald.NotifyDeliveryDead})
	require.False(t, ok, "a notification's delivery emits none, so nothing loops")
}
