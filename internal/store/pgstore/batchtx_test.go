package pgstore

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhooks/herald"
	"github.com/heraldhooks/herald/internal/store"
)

// refuseAttemptAtCommitSQL makes the COMMIT of any transaction fail that
// records an attempt whose error is "refused at commit".
var refuseAttemptAtCommitSQL = refuseAtCommit("attempts", "NEW.error = 'refused at commit'")

// TestClaimAndOutcomeRoundTrips: the claim and the outcome write send
// their BEGIN with their first statements and their COMMIT with their
// last (batchTx): a claim that finds nothing costs two round trips, one
// that leases three (the candidates; the take, with the in-flight count;
// the COMMIT), an outcome write two, and one of plain successes one. A write that fails, in a statement
// or at its COMMIT, is answered an error, applies nothing, and leaves the
// connection fit for the next call.
func TestClaimAndOutcomeRoundTrips(t *testing.T) {
	t.Parallel()
	s, trips := openCounted(t)
	ctx := t.Context()
	createEndpoint(t, s, "c")
	_, err := s.pool.Exec(ctx, refuseAttemptAtCommitSQL)
	require.NoError(t, err)
	now := t0.Add(time.Second)
	claim := func() ([]*store.ClaimedDelivery, int64) {
		t.Helper()
		trips.n.Store(0)
		got, err := s.DeliveryClaim(ctx, &store.DeliveryClaimParams{Limit: 10, LeaseMargin: time.Minute, Now: now})
		require.NoError(t, err)
		return got, trips.n.Load()
	}
	complete := func(o store.DeliveryOutcome) ([]bool, int64, error) {
		t.Helper()
		trips.n.Store(0)
		applied, err := s.DeliveryCompleteMany(ctx, &store.DeliveryCompleteManyParams{Outcomes: []store.DeliveryOutcome{o}, Now: now})
		return applied, trips.n.Load(), err
	}
	// The first calls on the connection prepare the statements.
	claim()
	ingest(t, s, "c", 1)
	warm, _ := claim()
	require.Len(t, warm, 1)
	_, _, err = complete(outcomeAt(warm[0], herald.StatusDelivered, now))
	require.NoError(t, err)
	conns := s.pool.Stat().NewConnsCount()

	got, n := claim()
	require.Empty(t, got)
	require.EqualValues(t, 2, n, "BEGIN and the candidates; COMMIT")

	ingest(t, s, "c", 1)
	got, n = claim()
	require.Len(t, got, 1)
	require.EqualValues(t, 3, n, "BEGIN and the candidates; the take, with the in-flight count; COMMIT")

	bad := outcomeAt(got[0], herald.StatusPending, now)
	bad.Attempt.Error = "HTTP 503 \x00"
	_, n, err = complete(bad)
	require.Error(t, err, "text cannot hold a NUL")
	require.EqualValues(t, 2, n, "the first batch, and the ROLLBACK")

	refused := outcomeAt(got[0], herald.StatusPending, now)
	refused.Attempt.Error = "refused at commit"
	_, n, err = complete(refused)
	require.ErrorContains(t, err, "refused at commit")
	require.EqualValues(t, 2, n, "the failed COMMIT ends the transaction")
	attempts, err := s.AttemptList(ctx, &store.AttemptListParams{DeliveryID: got[0].Delivery.ID})
	require.NoError(t, err)
	require.Empty(t, attempts.Items, "nothing of the failed writes")

	applied, n, err := complete(outcomeAt(got[0], herald.StatusDelivered, now))
	require.NoError(t, err)
	require.Equal(t, []bool{true}, applied, "the lease is still held")
	require.EqualValues(t, 1, n, "a plain success: BEGIN, the health, the outcome, the activity and COMMIT")
	d, err := s.DeliveryGet(ctx, got[0].Delivery.ID)
	require.NoError(t, err)
	require.Equal(t, herald.StatusDelivered, d.Status)
	require.Equal(t, conns, s.pool.Stat().NewConnsCount(), "the one connection went back to the pool clean each time")
}

// TestIngestGroupRoundTrips: a group of calls costs the round trips of a
// lone call: one, BEGIN, events, deliveries, wake-up and COMMIT, once
// their consumers' endpoints are remembered (queueBehind's first call
// read them).
func TestIngestGroupRoundTrips(t *testing.T) {
	t.Parallel()
	s, trips := openCounted(t)
	g := setupGroupsOn(t, s)
	ctx := t.Context()
	_, calls := g.queueBehind(t, event("a"), event("b"), event("c"))
	trips.n.Store(0)
	g.letGo()
	for _, ch := range calls {
		a := recv(t, ch)
		require.NoError(t, a.err)
		require.Len(t, a.res[0].Deliveries, 1)
	}
	require.EqualValues(t, 1, trips.n.Load(), "BEGIN, events, deliveries, wake-up and COMMIT")
	page, err := s.EventList(ctx, &store.EventListParams{ConsumerID: "c"})
	require.NoError(t, err)
	require.Len(t, page.Items, 4, "committed")
}
