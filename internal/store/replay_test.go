package store_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhooks/herald"
	"github.com/heraldhooks/herald/internal/store"
)

func TestReplayDelay(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		i    int
		rate float64
		want time.Duration
	}{
		{0, 3, 0},
		{1, 3, 333333 * time.Microsecond},
		{2, 3, 666666 * time.Microsecond},
		{3, 3, time.Second},
		{5, 4, 1250 * time.Millisecond},
		{7, 0, 0},
	} {
		require.Equal(t, tc.want, store.ReplayDelay(tc.i, tc.rate), "delivery %d at %g/s", tc.i, tc.rate)
	}
}

func TestCheckReplay(t *testing.T) {
	t.Parallel()
	for _, s := range []herald.Status{herald.StatusDelivered, herald.StatusDead, herald.StatusCancelled} {
		require.NoError(t, store.CheckReplay(s, true), "%s", s)
		require.ErrorIs(t, store.CheckReplay(s, false), store.ErrConflict, "%s, endpoint disabled", s)
	}
	for _, s := range []herald.Status{herald.StatusPending, herald.StatusDelivering} {
		require.ErrorIs(t, store.CheckReplay(s, true), store.ErrConflict, "%s", s)
	}
	for _, p := range []store.DeliveryReplayManyParams{
		{Status: herald.StatusDead},
		{EndpointID: "ep_1", Status: herald.StatusPending},
		{EventID: "evt_1", Rate: -1},
	} {
		require.Error(t, store.CheckReplayMany(&p), "%+v", p)
	}
	require.NoError(t, store.CheckReplayMany(&store.DeliveryReplayManyParams{EndpointID: "ep_1", Status: herald.StatusDead, Rate: 2}))
}
