package storetest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhooks/herald"
	"github.com/heraldhooks/herald/internal/store"
)

// testReplayManyPacedToTheMicrosecond: a paced replay's due times are
// store.ReplayDelay's, to the microsecond, at a rate whose gaps are no
// whole number of microseconds (3 a second: 0, 333333 µs, 666666 µs, 1 s).
func testReplayManyPacedToTheMicrosecond(t *testing.T, s store.Store) {
	ep := createEndpoint(t, s, newEndpoint("c", "order.*"), at(0))
	var ids []string
	for i := range 4 {
		ids = append(ids, deadAfter(t, s, ep, at(time.Duration(i)*time.Hour), 1))
	}
	now := at(10 * time.Hour)
	n, err := s.DeliveryReplayMany(t.Context(), &store.DeliveryReplayManyParams{EndpointID: ep.ID, Rate: 3, Now: now})
	require.NoError(t, err)
	require.Equal(t, 4, n)
	require.Equal(t, 666666*time.Microsecond, store.ReplayDelay(2, 3))
	for i, id := range ids {
		d := requireStatus(t, s, id, herald.StatusPending)
		requireTimePtr(t, now.Add(store.ReplayDelay(i, 3)), d.NextAttemptAt, "delivery %d", i)
	}
}

// testReplayManyLiveStatusRefused: asking to replay deliveries of a
// status that is not terminal is refused, as an error, and touches
// nothing.
func testReplayManyLiveStatusRefused(t *testing.T, s store.Store) {
	ep := createEndpoint(t, s, newEndpoint("c", "order.*"), at(0))
	dead := deadAfter(t, s, ep, at(0), 1)
	live := ingestFor(t, s, at(time.Minute), ep)
	for _, status := range []herald.Status{herald.StatusPending, herald.StatusDelivering, "later"} {
		for _, dry := range []bool{false, true} {
			_, err := s.DeliveryReplayMany(t.Context(), &store.DeliveryReplayManyParams{
				EndpointID: ep.ID, Status: status, DryRun: dry, Now: at(time.Hour)})
			require.Error(t, err, "status %s", status)
		}
	}
	requireStatus(t, s, dead, herald.StatusDead)
	requireStatus(t, s, live, herald.StatusPending)
}
