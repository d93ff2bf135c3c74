package pgstore

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhooks/herald"
	"github.com/heraldhooks/herald/internal/store"
)

// TestPlainSuccessesDoNotWaitForTheirEndpoint: a success that changes
// nothing of its endpoint's health but a recent last success neither locks
// nor writes the endpoint, so it does not queue behind another writer
// holding it (a claim, an ingest leasing to it, an operator's change); a
// failure goes through the breaker on the locked row, and waits.
func TestPlainSuccessesDoNotWaitForTheirEndpoint(t *testing.T) {
	t.Parallel()
	s := openNodes(t, 1)[0]
	ctx := t.Context()
	ep := createEndpoint(t, s, "c1")
	ingest(t, s, "c1", 3)
	claimed, err := s.DeliveryClaim(ctx, &store.DeliveryClaimParams{Limit: 10, LeaseMargin: time.Minute, Now: t0})
	require.NoError(t, err)
	require.Len(t, claimed, 3)
	complete := func(ctx context.Context, c *store.ClaimedDelivery, status herald.Status, now time.Time) error {
		o := outcomeAt(c, status, now)
		if status == herald.StatusPending {
			o.RetryIn = time.Hour
		}
		got, err := s.DeliveryCompleteMany(ctx, &store.DeliveryCompleteManyParams{Outcomes: []store.DeliveryOutcome{o}, Now: now})
		if err == nil {
			require.Equal(t, []bool{true}, got)
		}
		return err
	}
	require.NoError(t, complete(ctx, claimed[0], herald.StatusDelivered, t0))

	holder, err := s.pool.Begin(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { _ = holder.Rollback(ctx) })
	var id string
	require.NoError(t, holder.QueryRow(ctx, `SELECT id FROM endpoints WHERE id = $1 FOR UPDATE`, ep.ID).Scan(&id))
	var holderPID int
	require.NoError(t, holder.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&holderPID))

	soon, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	require.NoError(t, complete(soon, claimed[1], herald.StatusDelivered, t0.Add(store.LastSuccessPrecision/2)),
		"a plain success waits for no lock on its endpoint")

	done := make(chan error, 1)
	go func() { done <- complete(ctx, claimed[2], herald.StatusPending, t0.Add(store.LastSuccessPrecision/2)) }()
	require.Eventually(t, func() bool {
		var n int
		err := s.pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE $1 = ANY(pg_blocking_pids(pid))`, holderPID).Scan(&n)
		return err == nil && n > 0
	}, 10*time.Second, 5*time.Millisecond, "a failure waits for the endpoint")
	require.NoError(t, holder.Rollback(ctx))
	require.NoError(t, <-done)

	h, err := s.EndpointHealthGet(ctx, &store.EndpointHealthParams{ID: ep.ID, Now: t0.Add(time.Second)})
	require.NoError(t, err)
	require.Equal(t, 1, h.ConsecutiveFailures)
	require.NotNil(t, h.LastSuccessAt)
	require.True(t, h.LastSuccessAt.Equal(t0), "the last success kept: %s", h.LastSuccessAt)
}
