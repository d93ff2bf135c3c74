package pgstore

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/heraldhooks/herald"
	"github.com/heraldhooks/herald/internal/store"
)

// plainFixture is an endpoint with three deliveries claimed, and a way to
// write one outcome.
type plainFixture struct {
	s       *Store
	ep      *herald.Endpoint
	claimed []*store.ClaimedDelivery
}

func newPlainFixture(t *testing.T) *plainFixture {
	t.Helper()
	s := openNodes(t, 1)[0]
	ep := createEndpoint(t, s, "c1")
	ingest(t, s, "c1", 3)
	claimed, err := s.DeliveryClaim(t.Context(), &store.DeliveryClaimParams{Limit: 10, LeaseMargin: time.Minute, Now: t0})
	require.NoError(t, err)
	require.Len(t, claimed, 3)
	return &plainFixture{s: s, ep: ep, claimed: claimed}
}

func (f *plainFixture) complete(ctx context.Context, i int, status herald.Status, now time.Time) ([]bool, error) {
	o := outcomeAt(f.claimed[i], status, now)
	if status == herald.StatusPending {
		o.RetryIn = time.Hour
	}
	return f.s.DeliveryCompleteMany(ctx, &store.DeliveryCompleteManyParams{Outcomes: []store.DeliveryOutcome{o}, Now: now})
}

// hold locks the endpoint's row in mode from another transaction, which
// the test ends; it returns the transaction and its backend's pid.
func (f *plainFixture) hold(t *testing.T, mode string) (pgx.Tx, int) {
	t.Helper()
	ctx := t.Context()
	tx, err := f.s.pool.Begin(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { _ = tx.Rollback(ctx) })
	var id string
	require.NoError(t, tx.QueryRow(ctx, `SELECT id FROM endpoints WHERE id = $1 `+mode, f.ep.ID).Scan(&id))
	var pid int
	require.NoError(t, tx.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pid))
	return tx, pid
}

// blockedBy reports whether a backend waits for pid.
func (f *plainFixture) blockedBy(t *testing.T, pid int) func() bool {
	return func() bool {
		var n int
		err := f.s.pool.QueryRow(t.Context(), `SELECT count(*) FROM pg_stat_activity
			WHERE $1 = ANY(pg_blocking_pids(pid))`, pid).Scan(&n)
		return err == nil && n > 0
	}
}

// completeBehind writes outcome i from another goroutine, requires it to
// wait for the backend pid (why names the wait), ends pid's transaction
// with end, and requires the outcome to be applied.
func (f *plainFixture) completeBehind(t *testing.T, pid int, end func(context.Context) error, why string, i int, status herald.Status, now time.Time) {
	t.Helper()
	ctx := t.Context()
	type completion struct {
		applied []bool
		err     error
	}
	done := make(chan completion, 1)
	go func() {
		got, err := f.complete(ctx, i, status, now)
		done <- completion{got, err}
	}()
	require.Eventually(t, f.blockedBy(t, pid), 10*time.Second, 5*time.Millisecond, why)
	require.NoError(t, end(ctx))
	c := <-done
	require.NoError(t, c.err)
	require.Equal(t, []bool{true}, c.applied)
}

// health is the endpoint's health at now, with a last success.
func (f *plainFixture) health(t *testing.T, now time.Time) *herald.EndpointHealth {
	t.Helper()
	h, err := f.s.EndpointHealthGet(t.Context(), &store.EndpointHealthGetParams{ID: f.ep.ID, Now: now})
	require.NoError(t, err)
	require.NotNil(t, h.LastSuccessAt)
	return h
}

// TestPlainSuccessesDoNotWaitForLeasing: a success that changes nothing of
// its endpoint's health but a recent last success neither writes the
// endpoint nor waits for an ingest leasing to it (FOR NO KEY UPDATE); a
// failure goes through the breaker on the locked row, and waits.
func TestPlainSuccessesDoNotWaitForLeasing(t *testing.T) {
	t.Parallel()
	f := newPlainFixture(t)
	ctx := t.Context()
	_, err := f.complete(ctx, 0, herald.StatusDelivered, t0)
	require.NoError(t, err)

	holder, pid := f.hold(t, "FOR NO KEY UPDATE")
	soon, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	got, err := f.complete(soon, 1, herald.StatusDelivered, t0.Add(store.LastSuccessPrecision/2))
	require.NoError(t, err, "a plain success waits for no ingest leasing to its endpoint")
	require.Equal(t, []bool{true}, got)

	f.completeBehind(t, pid, holder.Rollback, "a failure waits for the endpoint",
		2, herald.StatusPending, t0.Add(store.LastSuccessPrecision/2))

	h := f.health(t, t0.Add(time.Second))
	require.Equal(t, 1, h.ConsecutiveFailures)
	require.True(t, h.LastSuccessAt.Equal(t0), "the last success kept: %s", h.LastSuccessAt)
}

// TestPlainSuccessReadsTheHealthAFailureLeft: a plain success that meets
// the endpoint locked by a writer deciding its health (the breaker's path,
// FOR UPDATE) waits for it, and reads the health that writer left: a
// failure counted, so the success goes through the breaker and ends the
// streak rather than pass for plain on what it read before.
func TestPlainSuccessReadsTheHealthAFailureLeft(t *testing.T) {
	t.Parallel()
	f := newPlainFixture(t)
	ctx := t.Context()
	_, err := f.complete(ctx, 0, herald.StatusDelivered, t0)
	require.NoError(t, err)

	holder, pid := f.hold(t, "FOR UPDATE")
	failing := herald.EndpointHealth{BreakerState: herald.BreakerClosed, ConsecutiveFailures: 1,
		FailingSince: &t0, LastFailureAt: &t0, RateFactor: 1}
	doc, until := encodeHealth(failing)
	_, err = holder.Exec(ctx, `UPDATE endpoints SET health = $2, blocked_until = $3 WHERE id = $1`, f.ep.ID, string(doc), until)
	require.NoError(t, err)

	at := t0.Add(store.LastSuccessPrecision / 2)
	f.completeBehind(t, pid, holder.Commit, "the success waits for the endpoint", 1, herald.StatusDelivered, at)

	h := f.health(t, at)
	require.Zero(t, h.ConsecutiveFailures, "the success after the failure ends the streak")
	require.Nil(t, h.FailingSince)
	require.True(t, h.LastSuccessAt.Equal(at), "the last success: %s", h.LastSuccessAt)
}

// TestDisablingWaitsForPlainSuccesses: disabling an endpoint waits for an
// outcome write that holds it FOR KEY SHARE (as plainSuccessSQL does while
// the outcomes write its deliveries), so the two never lock the same
// deliveries in turn.
func TestDisablingWaitsForPlainSuccesses(t *testing.T) {
	t.Parallel()
	f := newPlainFixture(t)
	ctx := t.Context()
	holder, pid := f.hold(t, "FOR KEY SHARE")
	done := make(chan error, 1)
	go func() {
		_, err := f.s.EndpointSetEnabled(ctx, &store.EndpointSetEnabledParams{ID: f.ep.ID, Enabled: false, Reason: "manual", Now: t0})
		done <- err
	}()
	require.Eventually(t, f.blockedBy(t, pid), 10*time.Second, 5*time.Millisecond, "disabling waits")
	require.NoError(t, holder.Rollback(ctx))
	require.NoError(t, <-done)
	require.Equal(t, map[string]int{"dead": 3}, statuses(t, f.s, f.ep.ID))
}
