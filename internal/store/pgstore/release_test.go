package pgstore

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhooks/herald"
	"github.com/heraldhooks/herald/internal/store"
)

// TestReleaseAndDisableDoNotDeadlock: a disable of an endpoint holds it
// FOR UPDATE and then sends its live deliveries dead one after another; a
// release of two of them waits for the endpoint before it touches either,
// so the disable goes on to the other one and both end well. A release
// that locked its deliveries first would hold the one the disable had not
// reached while waiting for the other, and PostgreSQL would end one of the
// two as a deadlock.
func TestReleaseAndDisableDoNotDeadlock(t *testing.T) {
	t.Parallel()
	s := openFresh(t)
	ctx := t.Context()
	ep := createEndpoint(t, s, "c1", func(ep *herald.Endpoint) { ep.MaxInFlight = 10 })
	ingest(t, s, "c1", 2)
	claimed, err := s.DeliveryClaim(ctx, &store.DeliveryClaimParams{Limit: 2, LeaseMargin: time.Second, Now: t0})
	require.NoError(t, err)
	require.Len(t, claimed, 2)
	first, second := claimed[0].Delivery.ID, claimed[1].Delivery.ID

	// A disable under way: the endpoint and the second delivery held (a
	// release takes the rows in the order it finds them, the first first).
	disable, err := s.pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = disable.Rollback(ctx) }()
	var pid int
	require.NoError(t, disable.QueryRow(ctx, `SELECT pg_backend_pid() FROM endpoints WHERE id = $1 FOR UPDATE`, ep.ID).Scan(&pid))
	_, err = disable.Exec(ctx, `UPDATE deliveries SET updated_at = updated_at WHERE id = $1`, second)
	require.NoError(t, err)

	released := make(chan error, 1)
	go func() {
		released <- s.DeliveryRelease(ctx, &store.DeliveryReleaseParams{Now: t0, Leases: []store.Lease{
			{DeliveryID: first, LeaseToken: claimed[0].LeaseToken},
			{DeliveryID: second, LeaseToken: claimed[1].LeaseToken},
		}})
	}()
	require.Eventually(t, func() bool {
		var waiting int
		require.NoError(t, s.pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid))`, pid).Scan(&waiting))
		return waiting > 0
	}, 10*time.Second, 5*time.Millisecond, "the release waits for the disable")

	// The disable goes on to the first delivery, and commits.
	_, err = disable.Exec(ctx, `UPDATE deliveries SET updated_at = updated_at WHERE id = $1`, first)
	require.NoError(t, err, "the release holds no delivery while it waits")
	require.NoError(t, disable.Commit(ctx))
	require.NoError(t, <-released)
	for _, id := range []string{first, second} {
		d, err := s.DeliveryGet(ctx, id)
		require.NoError(t, err)
		require.Equal(t, herald.StatusPending, d.Status, "released once the disable was done")
	}
}
