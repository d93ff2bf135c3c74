package pgstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/heraldhooks/herald"
	"github.com/heraldhooks/herald/internal/store"
)

// rideFixture is a store whose outcome writes wait a minute for a ride,
// with deliveries of consumer c claimed.
type rideFixture struct {
	s       *Store
	trips   *roundTrips
	ep      *herald.Endpoint
	claimed []*store.ClaimedDelivery
	offered chan struct{}
}

func newRideFixture(t *testing.T, n int) *rideFixture {
	t.Helper()
	return newRideFixtureConns(t, n, 1)
}

// newRideFixtureConns is newRideFixture on a pool of conns connections.
func newRideFixtureConns(t *testing.T, n, conns int) *rideFixture {
	t.Helper()
	s, trips := openCountedConns(t, conns)
	ep := createEndpoint(t, s, "c")
	ingest(t, s, "c", n)
	claimed, err := s.DeliveryClaim(t.Context(), &store.DeliveryClaimParams{Limit: 10, LeaseMargin: time.Minute, Now: t0})
	require.NoError(t, err)
	require.Len(t, claimed, n)
	f := &rideFixture{s: s, trips: trips, ep: ep, claimed: claimed, offered: make(chan struct{}, 1)}
	s.rides.wait = time.Minute
	s.rides.offered = func() { f.offered <- struct{}{} }
	return f
}

// completeRiding writes the outcomes from another goroutine, waits until
// they are offered to an ingest, and returns what will tell how the
// write went.
func (f *rideFixture) completeRiding(t *testing.T, outcomes ...store.DeliveryOutcome) <-chan error {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		applied, err := f.s.DeliveryCompleteMany(context.Background(), &store.DeliveryCompleteManyParams{Outcomes: outcomes, Now: t0})
		if err == nil {
			for i, ok := range applied {
				if !ok {
					err = &notAppliedError{i}
				}
			}
		}
		done <- err
	}()
	select {
	case <-f.offered:
	case err := <-done:
		t.Fatalf("the outcomes were written without waiting for a ride: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("the outcomes were not offered to an ingest")
	}
	return done
}

type notAppliedError struct{ i int }

func (e *notAppliedError) Error() string { return "an outcome was not applied" }

// statuses are the statuses of the fixture's claimed deliveries.
func (f *rideFixture) statuses(t *testing.T) []herald.Status {
	t.Helper()
	var out []herald.Status
	for _, c := range f.claimed {
		d, err := f.s.DeliveryGet(t.Context(), c.Delivery.ID)
		require.NoError(t, err)
		out = append(out, d.Status)
	}
	return out
}

// sameTransaction requires the attempts of the fixture's deliveries to
// have been written by the transaction that wrote the event eventID, or
// (same false) by another one.
func (f *rideFixture) sameTransaction(t *testing.T, eventID string, same bool) {
	t.Helper()
	var eventXmin string
	require.NoError(t, f.s.pool.QueryRow(t.Context(), "SELECT xmin::text FROM events WHERE id = $1", eventID).Scan(&eventXmin))
	for _, c := range f.claimed {
		var xmin string
		require.NoError(t, f.s.pool.QueryRow(t.Context(), "SELECT xmin::text FROM attempts WHERE delivery_id = $1", c.Delivery.ID).Scan(&xmin))
		if same {
			require.Equal(t, eventXmin, xmin, "the attempt was written with the event")
		} else {
			require.NotEqual(t, eventXmin, xmin, "the attempt was written apart from the event")
		}
	}
}

// TestOutcomesRideAnIngest: an outcome write of plain successes, while
// ingests arrive, waits for the next one and goes in its transaction: one
// round trip for both, the ingest's; everything each would have written
// alone is there.
func TestOutcomesRideAnIngest(t *testing.T) {
	t.Parallel()
	f := newRideFixture(t, 2)
	ctx := t.Context()
	done := f.completeRiding(t, outcomeAt(f.claimed[0], herald.StatusDelivered, t0), outcomeAt(f.claimed[1], herald.StatusDelivered, t0))

	f.trips.n.Store(0)
	res := ingest(t, f.s, "c", 1)
	require.NoError(t, <-done)
	require.EqualValues(t, 1, f.trips.n.Load(), "the ingest and the outcome write, in one round trip")
	require.Equal(t, []herald.Status{herald.StatusDelivered, herald.StatusDelivered}, f.statuses(t))
	require.Zero(t, f.s.LockConflicts(), "a ride that met no lock")
	f.sameTransaction(t, res[0].Event.ID, true)
	for _, c := range f.claimed {
		attempts, err := f.s.AttemptList(ctx, &store.AttemptListParams{DeliveryID: c.Delivery.ID})
		require.NoError(t, err)
		require.Len(t, attempts.Items, 1)
	}
	var attempts int64
	require.NoError(t, f.s.pool.QueryRow(ctx, "SELECT sum(attempts)::bigint FROM activity_minutes").Scan(&attempts))
	require.EqualValues(t, 2, attempts, "the activity of the two outcomes")
	d, err := f.s.DeliveryGet(ctx, res[0].Deliveries[0].ID)
	require.NoError(t, err)
	require.Equal(t, herald.StatusPending, d.Status, "the ingest's own delivery")
	require.Empty(t, queueMismatches(t, f.s))
	require.Equal(t, 1, queued(t, f.s), "the new delivery alone")

	// With no ingest lately, an outcome write goes at once, alone.
	f.s.rides.lastIngest.Store(0)
	got, err := f.s.DeliveryClaim(ctx, &store.DeliveryClaimParams{Limit: 10, LeaseMargin: time.Minute, Now: t0})
	require.NoError(t, err)
	require.Len(t, got, 1)
	f.trips.n.Store(0)
	applied, err := f.s.DeliveryCompleteMany(ctx, &store.DeliveryCompleteManyParams{Outcomes: []store.DeliveryOutcome{outcomeAt(got[0], herald.StatusDelivered, t0)}, Now: t0})
	require.NoError(t, err)
	require.Equal(t, []bool{true}, applied)
	require.EqualValues(t, 1, f.trips.n.Load())
	require.Empty(t, f.offered, "not offered")
}

// TestARiderThatIsNotPlainFailsNoIngest: a rider whose endpoint's health
// a success changes fails its statement, and with it the transaction;
// the ingest is written again without it and accepted, and the outcome
// goes through the breaker's path, which clears the failures.
func TestARiderThatIsNotPlainFailsNoIngest(t *testing.T) {
	t.Parallel()
	f := newRideFixture(t, 1)
	ctx := t.Context()
	_, err := f.s.pool.Exec(ctx, `UPDATE endpoints SET health = '{"consecutive_failures": 2}' WHERE id = $1`, f.ep.ID)
	require.NoError(t, err)
	done := f.completeRiding(t, outcomeAt(f.claimed[0], herald.StatusDelivered, t0))

	res := ingest(t, f.s, "c", 1)
	require.Len(t, res[0].Deliveries, 1)
	require.NoError(t, <-done)
	require.Equal(t, []herald.Status{herald.StatusDelivered}, f.statuses(t))
	f.sameTransaction(t, res[0].Event.ID, false)
	h, err := f.s.EndpointHealthGet(ctx, &store.EndpointHealthGetParams{ID: f.ep.ID, Now: t0})
	require.NoError(t, err)
	require.Zero(t, h.ConsecutiveFailures, "the success went through the breaker")
	var events int
	require.NoError(t, f.s.pool.QueryRow(ctx, "SELECT count(*) FROM events").Scan(&events))
	require.Equal(t, 2, events)
	require.Empty(t, queueMismatches(t, f.s))
}

// TestARiderOfAFailedIngestGoesAlone: an ingest whose transaction fails
// (its COMMIT refused) fails as it would alone, and the outcome write it
// carried, not kept with it, is written on its own.
func TestARiderOfAFailedIngestGoesAlone(t *testing.T) {
	t.Parallel()
	f := newRideFixture(t, 1)
	ctx := t.Context()
	_, err := f.s.pool.Exec(ctx, refuseAtCommit("events", "NEW.event_type = 'refused.at.commit'"))
	require.NoError(t, err)
	done := f.completeRiding(t, outcomeAt(f.claimed[0], herald.StatusDelivered, t0))

	_, err = f.s.EventIngest(ctx, &store.EventIngestParams{Now: t0, Events: []store.EventIngestItem{
		{ConsumerID: "c", EventType: "refused.at.commit", Payload: []byte(`{}`)},
	}})
	require.ErrorContains(t, err, "refused at commit")
	require.NoError(t, <-done)
	require.Equal(t, []herald.Status{herald.StatusDelivered}, f.statuses(t))
	var events int
	require.NoError(t, f.s.pool.QueryRow(ctx, "SELECT count(*) FROM events").Scan(&events))
	require.Equal(t, 1, events, "the refused event is not kept")
	require.Empty(t, queueMismatches(t, f.s))
}

// TestARiderTakesNoLockItWouldWaitFor: a rider whose endpoint another
// writer holds FOR UPDATE (a claim, the breaker's path, disabling) does
// not hold the ingest back: the ingest is accepted while the lock is
// held, and the outcomes, written alone, wait for it.
func TestARiderTakesNoLockItWouldWaitFor(t *testing.T) {
	t.Parallel()
	// Two connections: the ingest written again and the outcomes written
	// alone, which wait for the lock, each take one.
	f := newRideFixtureConns(t, 1, 2)
	ctx := t.Context()
	// A connection of its own for the holder.
	holder, err := pgx.ConnectConfig(ctx, f.s.pool.Config().ConnConfig.Copy())
	require.NoError(t, err)
	t.Cleanup(func() { _ = holder.Close(context.Background()) })
	tx, err := holder.Begin(ctx)
	require.NoError(t, err)
	var id string
	require.NoError(t, tx.QueryRow(ctx, `SELECT id FROM endpoints WHERE id = $1 FOR UPDATE`, f.ep.ID).Scan(&id))
	done := f.completeRiding(t, outcomeAt(f.claimed[0], herald.StatusDelivered, t0))

	accepted := make(chan error, 1)
	go func() {
		_, err := f.s.EventIngest(context.Background(), &store.EventIngestParams{Now: t0, Events: []store.EventIngestItem{
			{ConsumerID: "c", EventType: "order.created", Payload: []byte(`{}`)},
		}})
		accepted <- err
	}()
	select {
	case err := <-accepted:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("the ingest waited for the endpoint's lock")
	}
	select {
	case err := <-done:
		t.Fatalf("the outcomes were written while the endpoint was held: %v", err)
	case <-time.After(100 * time.Millisecond):
	}
	require.NoError(t, tx.Rollback(ctx))
	require.NoError(t, <-done)
	require.Equal(t, []herald.Status{herald.StatusDelivered}, f.statuses(t))
	require.Equal(t, int64(1), f.s.LockConflicts(), "the rider met the lock once, and went alone")
}

// TestARiderPassesAClaim: a claim under way (its candidates locked, as
// candidatesSQL locks them) holds its endpoints in a mode the rider does
// not meet: the outcomes ride the ingest, no lock conflict is counted,
// and the last success, which would wait for the claim, is left to a
// later success instead.
func TestARiderPassesAClaim(t *testing.T) {
	t.Parallel()
	f := newRideFixture(t, 2)
	ctx := t.Context()
	// Another delivery due, so that the claim's candidates take the
	// endpoint.
	ingest(t, f.s, "c", 1)
	holder, err := pgx.ConnectConfig(ctx, f.s.pool.Config().ConnConfig.Copy())
	require.NoError(t, err)
	t.Cleanup(func() { _ = holder.Close(context.Background()) })
	tx, err := holder.Begin(ctx)
	require.NoError(t, err)
	rows, err := tx.Query(ctx, candidatesSQL, t0, 10, herald.DefaultMaxInFlight, []string{})
	require.NoError(t, err)
	n := 0
	for rows.Next() {
		n++
	}
	require.NoError(t, rows.Err())
	require.Equal(t, 1, n, "the claim holds the endpoint")

	done := f.completeRiding(t, outcomeAt(f.claimed[0], herald.StatusDelivered, t0))
	res := ingest(t, f.s, "c", 1)
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("the rider waited for the claim")
	}
	require.Zero(t, f.s.LockConflicts(), "a claim is no lock the rider meets")
	var eventXmin, attemptXmin string
	require.NoError(t, f.s.pool.QueryRow(ctx, "SELECT xmin::text FROM events WHERE id = $1", res[0].Event.ID).Scan(&eventXmin))
	require.NoError(t, f.s.pool.QueryRow(ctx, "SELECT xmin::text FROM attempts WHERE delivery_id = $1", f.claimed[0].Delivery.ID).Scan(&attemptXmin))
	require.Equal(t, eventXmin, attemptXmin, "the outcome rode the ingest")
	got, err := f.s.EndpointGet(ctx, f.ep.ID)
	require.NoError(t, err)
	require.Nil(t, got.Health.LastSuccessAt, "the last success is not written under a claim")
	require.NoError(t, tx.Rollback(ctx))

	done = f.completeRiding(t, outcomeAt(f.claimed[1], herald.StatusDelivered, t0))
	ingest(t, f.s, "c", 1)
	require.NoError(t, <-done)
	got, err = f.s.EndpointGet(ctx, f.ep.ID)
	require.NoError(t, err)
	require.NotNil(t, got.Health.LastSuccessAt, "a later success writes it")
}

// TestARiderRidesAgainWhenEndpointsChanged: an ingest from remembered
// endpoints that changed meanwhile is written again, reading them, and
// carries its rider again, queued afresh (a pgx batch's statements are
// sent once).
func TestARiderRidesAgainWhenEndpointsChanged(t *testing.T) {
	t.Parallel()
	f := newRideFixture(t, 1)
	ctx := t.Context()
	done := f.completeRiding(t, outcomeAt(f.claimed[0], herald.StatusDelivered, t0))
	_, err := f.s.pool.Exec(ctx, `UPDATE endpoints SET description = 'changed' WHERE id = $1`, f.ep.ID)
	require.NoError(t, err)

	res := ingest(t, f.s, "c", 1)
	require.NoError(t, <-done)
	require.Equal(t, []herald.Status{herald.StatusDelivered}, f.statuses(t))
	f.sameTransaction(t, res[0].Event.ID, true)
	require.Empty(t, queueMismatches(t, f.s))
}

// TestNotCommitted: an ingest that failed with a rider on board is
// written again only when its transaction surely did not commit.
func TestNotCommitted(t *testing.T) {
	t.Parallel()
	pgErr := func(code string) error { return &pgconn.PgError{Code: code} }
	for _, c := range []struct {
		err  error
		want bool
	}{
		{nil, false},
		{pgErr("HE002"), true},
		{fmt.Errorf("begin: %w", pgErr("55P03")), true},
		{errCalls{pgErr("23505")}, true},
		{errCommit{pgErr("23514")}, true},
		{errCommit{pgx.ErrTxCommitRollback}, true},
		{errEndpointsChanged, true},
		{errCommit{io.ErrUnexpectedEOF}, false},
		{errCommit{pgErr("57P01")}, false},
		{errCommit{pgErr("08006")}, false},
		{pgErr("XX000"), false},
		{errAfterCommit{pgErr("23505")}, false},
		{context.Canceled, false},
		{errors.New("write failed"), false},
	} {
		require.Equal(t, c.want, notCommitted(c.err), "%v", c.err)
	}
	require.NoError(t, riderFate(errAfterCommit{io.ErrUnexpectedEOF}), "committed: the rider was written")
	require.Error(t, riderFate(errCommit{io.ErrUnexpectedEOF}))
}
