package pgstore

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/heraldhooks/herald"
	"github.com/heraldhooks/herald/internal/store"
	"github.com/heraldhooks/herald/internal/store/storetest"
)

// setTaker makes a storetest.SlotTaker with free slots, reserving a
// second before t0, s's taker.
func setTaker(t *testing.T, s *Store, free int) *storetest.SlotTaker {
	k := storetest.NewSlotTaker(t, free, t0.Add(-time.Second))
	s.SetTaker(k)
	return k
}

// statuses counts the deliveries of ep by status.
func statuses(t *testing.T, s *Store, ep string) map[string]int {
	t.Helper()
	rows, err := s.pool.Query(t.Context(), `SELECT status, count(*) FROM deliveries WHERE endpoint_id = $1 GROUP BY status`, ep)
	require.NoError(t, err)
	out := map[string]int{}
	for rows.Next() {
		var st string
		var n int
		require.NoError(t, rows.Scan(&st, &n))
		out[st] = n
	}
	require.NoError(t, rows.Err())
	return out
}

// TestIngestLeasingKeepsTheQueueTrue: deliveries leased at ingest beside
// deliveries queued leave delivery_queue as the deliveries say, and so
// does a claim of the queued one and of the leases that ran out.
func TestIngestLeasingKeepsTheQueueTrue(t *testing.T) {
	t.Parallel()
	s := openNodes(t, 1)[0]
	createEndpoint(t, s, "c1", func(e *herald.Endpoint) { e.MaxInFlight = 2 })
	k := setTaker(t, s, 10)
	ingest(t, s, "c1", 3) // the cap's two leased, one queued
	require.Len(t, k.Taken(), 2)
	require.Empty(t, queueMismatches(t, s))

	later := k.Taken()[0].LeaseExpiresAt.Add(time.Second)
	claimed, err := s.DeliveryClaim(t.Context(), &store.DeliveryClaimParams{Limit: 10, LeaseMargin: time.Second, Now: later})
	require.NoError(t, err)
	require.Len(t, claimed, 2, "the cap's two of the three due")
	require.Empty(t, queueMismatches(t, s))
}

// TestIngestLeasesNoEndpointAnotherWriterHolds: an endpoint locked by
// another transaction (a claim deciding for it, an outcome write) gets
// its deliveries queued, and the ingest does not wait for the lock.
func TestIngestLeasesNoEndpointAnotherWriterHolds(t *testing.T) {
	t.Parallel()
	s := openNodes(t, 1)[0]
	ctx := t.Context()
	ep := createEndpoint(t, s, "c1")
	tx, err := s.pool.Begin(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { _ = tx.Rollback(ctx) })
	var id string
	require.NoError(t, tx.QueryRow(ctx, `SELECT id FROM endpoints WHERE id = $1 FOR UPDATE`, ep.ID).Scan(&id))

	k := setTaker(t, s, 10)
	wake, err := s.Subscribe(ctx)
	require.NoError(t, err)
	ingest(t, s, "c1", 2)
	require.Empty(t, k.Taken())
	require.Equal(t, map[string]int{"pending": 2}, statuses(t, s, ep.ID))
	waitWake(t, wake) // queued: the dispatchers are woken
	require.NoError(t, tx.Rollback(ctx))

	ingest(t, s, "c1", 1)
	require.Len(t, k.Taken(), 1, "the lock is gone; the two queued are due, but the cap has room for all")
	require.Empty(t, queueMismatches(t, s))
}

// TestIngestLeasingLeavesNoWakeUp: an ingest that leased every delivery
// wakes no dispatcher; one that queued any does.
func TestIngestLeasingLeavesNoWakeUp(t *testing.T) {
	t.Parallel()
	s := openNodes(t, 1)[0]
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	createEndpoint(t, s, "c1")
	k := setTaker(t, s, 2)
	conn, err := pgx.ConnectConfig(ctx, s.pool.Config().ConnConfig.Copy())
	require.NoError(t, err)
	defer closeConn(conn)
	_, err = conn.Exec(ctx, "LISTEN "+pgx.Identifier{s.channel}.Sanitize())
	require.NoError(t, err)
	// wakeUps counts the wake-ups that came before a marker sent now:
	// notifications arrive in the order their transactions committed.
	wakeUps := func() int {
		_, err := s.pool.Exec(ctx, "SELECT pg_notify($1, 'marker')", s.channel)
		require.NoError(t, err)
		n := 0
		for {
			note, err := conn.WaitForNotification(ctx)
			require.NoError(t, err)
			if note.Payload == "marker" {
				return n
			}
			n++
		}
	}
	ingest(t, s, "c1", 1)
	require.Len(t, k.Taken(), 1)
	require.Zero(t, wakeUps(), "all leased: nothing to wake a node for")
	ingest(t, s, "c1", 2) // one slot was left: one leased, one queued
	require.Len(t, k.Taken(), 2)
	require.Equal(t, 1, wakeUps())
}

// TestIngestLeasesOnTheRowItLocks: what a lease depends on is checked
// again on the endpoint's row once it is locked. An endpoint disabled
// after the ingest read it (here while the ingest waits for another
// transaction's use of its idempotency key) gets nothing leased.
func TestIngestLeasesOnTheRowItLocks(t *testing.T) {
	t.Parallel()
	s := openNodes(t, 1)[0]
	ctx := t.Context()
	ep := createEndpoint(t, s, "c1")
	k := setTaker(t, s, 10)
	blocker, err := s.pool.Begin(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { _ = blocker.Rollback(ctx) })
	_, err = blocker.Exec(ctx, `INSERT INTO events (id, consumer_id, event_type, payload, idempotency_key, created_at)
		VALUES ('evt_blocker', 'c1', 'order.created', '\x7b7d', 'k1', $1)`, t0)
	require.NoError(t, err)
	var xid string
	require.NoError(t, blocker.QueryRow(ctx, `SELECT pg_current_xact_id()::text`).Scan(&xid))

	done := make(chan error, 1)
	go func() {
		_, err := s.EventIngest(ctx, &store.EventIngestParams{Now: t0, Events: []store.EventIngestItem{
			{ConsumerID: "c1", EventType: "order.created", Payload: []byte(`{}`), IdempotencyKey: "k1"}}})
		done <- err
	}()
	// The ingest has read its endpoints and waits for the key.
	require.Eventually(t, func() bool {
		var n int
		err := s.pool.QueryRow(ctx, `SELECT count(*) FROM pg_locks
			WHERE NOT granted AND locktype = 'transactionid' AND transactionid::text = $1`, xid).Scan(&n)
		return err == nil && n > 0
	}, 10*time.Second, 5*time.Millisecond)
	_, err = s.EndpointSetEnabled(ctx, &store.EndpointSetEnabledParams{ID: ep.ID, Enabled: false, Reason: "manual", Now: t0})
	require.NoError(t, err)
	require.NoError(t, blocker.Rollback(ctx))
	require.NoError(t, <-done)
	require.Empty(t, k.Taken(), "disabled after the read")
	require.NotContains(t, statuses(t, s, ep.ID), "delivering")
}

// TestIngestLeasingWakesForWorkDueBeside: an ingest that leased every
// delivery still wakes the dispatchers when an endpoint it leased to has
// other work due now: a claim that ran meanwhile found the shards the
// ingest held, and no other wake-up would come before the next poll.
func TestIngestLeasingWakesForWorkDueBeside(t *testing.T) {
	t.Parallel()
	s := openNodes(t, 1)[0]
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	ep := createEndpoint(t, s, "c1")
	ingest(t, s, "c1", 1) // no taker yet: queued, due now
	k := setTaker(t, s, 10)
	wake, err := s.Subscribe(ctx)
	require.NoError(t, err)
	ingest(t, s, "c1", 1)
	require.Len(t, k.Taken(), 1, "leased: the cap has room beside the one due")
	require.Equal(t, map[string]int{"pending": 1, "delivering": 1}, statuses(t, s, ep.ID))
	waitWake(t, wake)
}

// TestIngestsLeaseSideBySide: two ingests leasing to one endpoint at once
// both lease, each in a shard of the endpoint's cap of its own
// (migration 0024), where one row lock per endpoint let only one of them.
// The shard a lease took is on its queue row, and the shards' rooms hold
// the cap: with the cap's other shards held, an ingest leases nothing.
func TestIngestsLeaseSideBySide(t *testing.T) {
	t.Parallel()
	s := openNodes(t, 1)[0]
	ctx := t.Context()
	ep := createEndpoint(t, s, "c1", func(e *herald.Endpoint) { e.MaxInFlight = 8 })
	k := setTaker(t, s, 10)
	ingest(t, s, "c1", 1) // read once, so that the next ones lease from memory
	require.Len(t, k.Taken(), 1)

	// Another ingest under way, holding what its ingestLeasingSQL took.
	other, err := s.pool.Begin(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { _ = other.Rollback(ctx) })
	var held string
	require.NoError(t, other.QueryRow(ctx, `SELECT set_config('herald.leasing', '', true)`).Scan(&held))
	_, err = other.Exec(ctx, ingestLeasingSQL, []string{ep.ID}, []string{ep.ID}, []time.Time{ep.UpdatedAt}, t0, []int32{8}, []int32{1})
	require.NoError(t, err)
	require.NoError(t, other.QueryRow(ctx, `SELECT current_setting('herald.leasing')`).Scan(&held))
	require.Regexp(t, `^`+ep.ID+`:\d:[12]$`, held, "one shard, its room (of two, less the first lease if it took that shard)")

	ingest(t, s, "c1", 1)
	require.Len(t, k.Taken(), 2, "leased beside the other ingest")
	var shard int
	require.NoError(t, s.pool.QueryRow(ctx, `SELECT shard FROM delivery_queue WHERE delivery_id = $1`,
		k.Taken()[1].Delivery.ID).Scan(&shard))
	require.NotEqual(t, held[len(held)-3:len(held)-2], fmt.Sprint(shard), "in a shard the other does not hold")

	// The other three shards held too: nothing is leased, all is queued.
	_, err = other.Exec(ctx, `SELECT herald_take_shards($1, 8, $2, 8)`, ep.ID, t0)
	require.NoError(t, err)
	ingest(t, s, "c1", 1)
	require.Len(t, k.Taken(), 2, "no shard free")
	require.Equal(t, 1, statuses(t, s, ep.ID)["pending"])
	require.Empty(t, queueMismatches(t, s))
}

// TestShardsHoldTheCapAfterItShrinks: deliveries leased under a larger
// cap count under a smaller one, whichever shard they took: no claim
// leases past the new cap, and once they ended, the new cap is used
// whole.
func TestShardsHoldTheCapAfterItShrinks(t *testing.T) {
	t.Parallel()
	s := openNodes(t, 1)[0]
	ctx := t.Context()
	ep := createEndpoint(t, s, "c1", func(e *herald.Endpoint) { e.MaxInFlight = 12 })
	ingest(t, s, "c1", 20)
	first := claimAt(t, s, 12, t0)
	require.Len(t, first, 12)
	shards := map[int]int{}
	var kept, ends []store.DeliveryOutcome
	for _, c := range first {
		var shard int
		require.NoError(t, s.pool.QueryRow(ctx, `SELECT shard FROM delivery_queue WHERE delivery_id = $1`, c.Delivery.ID).Scan(&shard))
		shards[shard]++
		if shard == 3 && len(kept) < 2 {
			kept = append(kept, delivered(c))
		} else {
			ends = append(ends, delivered(c))
		}
	}
	require.Equal(t, map[int]int{0: 3, 1: 3, 2: 3, 3: 3}, shards, "the cap of 12 over four shards")

	ep.MaxInFlight = 3 // three shards of one; shard 3 falls to shard 0
	_, err := s.EndpointUpdate(ctx, &store.EndpointUpdateParams{Endpoint: ep, Now: t0})
	require.NoError(t, err)
	require.Empty(t, claimAt(t, s, 10, t0), "12 in flight, the cap 3")
	completeAt(t, s, t0, ends...)
	// Two in flight, both in shard 0's count, which is over its part:
	// shards 1 and 2 each have a part of one free, but the cap has room
	// for one only, whatever share a take is dealt.
	require.Equal(t, 0, takeDirect(t, s, ep.ID, 5, 3), "2 in flight, the cap 3, shard 0 over its part")
	completeAt(t, s, t0, kept...)
	require.Len(t, claimAt(t, s, 10, t0), 3, "the new cap, whole, once the old leases ended")
	require.Empty(t, claimAt(t, s, 10, t0))
}

// takeDirect runs takeSQL alone for one endpoint, with its share and cap,
// and rolls it back; it returns how many it leased.
func takeDirect(t *testing.T, s *Store, endpointID string, share, cap int32) int {
	t.Helper()
	taken := 0
	tx, err := s.pool.Begin(t.Context())
	require.NoError(t, err)
	defer func() { require.NoError(t, tx.Rollback(t.Context())) }()
	_, err = tx.Exec(t.Context(), claimQueuesSQL)
	require.NoError(t, err)
	rows, err := tx.Query(t.Context(), takeSQL, t0, []string{endpointID}, []int32{share}, []int64{1e6}, []string{}, []int64{}, []int32{cap})
	require.NoError(t, err)
	for rows.Next() {
		taken++
	}
	require.NoError(t, rows.Err())
	return taken
}

// TestIngestTakesNoShardItCouldNotUse: where the endpoint's new
// deliveries already due fill the room under its cap, an ingest takes no
// shard (it could lease nothing, and would keep the claim that comes for
// them from their room); where they leave room, it takes shards enough
// for them and its own.
func TestIngestTakesNoShardItCouldNotUse(t *testing.T) {
	t.Parallel()
	s := openNodes(t, 1)[0]
	ctx := t.Context()
	ep := createEndpoint(t, s, "c1", func(e *herald.Endpoint) { e.MaxInFlight = 4 })
	ingest(t, s, "c1", 4) // no taker: queued, due
	held := func() (string, int) {
		t.Helper()
		tx, err := s.pool.Begin(ctx)
		require.NoError(t, err)
		defer func() { require.NoError(t, tx.Rollback(ctx)) }()
		_, err = tx.Exec(ctx, ingestLeasingSQL, []string{ep.ID}, []string{ep.ID}, []time.Time{ep.UpdatedAt}, t0, []int32{4}, []int32{1})
		require.NoError(t, err)
		var leasing string
		var shards int
		require.NoError(t, tx.QueryRow(ctx, `SELECT current_setting('herald.leasing'), (
			SELECT count(*) FROM pg_locks
			WHERE locktype = 'advisory' AND classid = 1213353043 AND pid = pg_backend_pid())`).Scan(&leasing, &shards))
		return leasing, shards
	}
	leasing, shards := held()
	require.Empty(t, leasing, "four due, the cap four: nothing to lease")
	require.Zero(t, shards, "and no shard held")

	claimAt(t, s, 1, t0) // one leased, three due: the cap has no room either
	leasing, shards = held()
	require.Empty(t, leasing)
	require.Zero(t, shards)

	ep.MaxInFlight = 8 // shards of two: room for the three due and one more takes two
	_, err := s.EndpointUpdate(ctx, &store.EndpointUpdateParams{Endpoint: ep, Now: t0})
	require.NoError(t, err)
	got, err := s.EndpointGet(ctx, ep.ID)
	require.NoError(t, err)
	ep = got
	tx, err := s.pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { require.NoError(t, tx.Rollback(ctx)) }()
	_, err = tx.Exec(ctx, ingestLeasingSQL, []string{ep.ID}, []string{ep.ID}, []time.Time{ep.UpdatedAt}, t0, []int32{8}, []int32{1})
	require.NoError(t, err)
	require.NoError(t, tx.QueryRow(ctx, `SELECT current_setting('herald.leasing')`).Scan(&leasing))
	room := 0
	for _, part := range strings.Split(leasing, ",") {
		var id string
		var shard, r int
		_, err := fmt.Sscanf(strings.ReplaceAll(part, ":", " "), "%s %d %d", &id, &shard, &r)
		require.NoError(t, err)
		room += r
	}
	require.GreaterOrEqual(t, room, 4, "room for the three due and its own: %s", leasing)
}

// TestAWaitingWriterIsNotOvertakenByIngests: a writer of an endpoint's
// state (here disabling) waiting for a leasing ingest under way waits for
// that one only: an ingest that comes while it waits leaves the endpoint
// out (its gate, gate.go), where its row lock, which conflicts with no
// holder, would have been granted, and the writer kept waiting as long as
// ingests overlapped.
func TestAWaitingWriterIsNotOvertakenByIngests(t *testing.T) {
	t.Parallel()
	s := openNodes(t, 1)[0]
	ctx := t.Context()
	ep := createEndpoint(t, s, "c1", func(e *herald.Endpoint) { e.MaxInFlight = 8 })
	lease := func() (pgx.Tx, string) {
		t.Helper()
		tx, err := s.pool.Begin(ctx)
		require.NoError(t, err)
		t.Cleanup(func() { _ = tx.Rollback(context.Background()) })
		_, err = tx.Exec(ctx, ingestLeasingSQL, []string{ep.ID}, []string{ep.ID}, []time.Time{ep.UpdatedAt}, t0, []int32{8}, []int32{1})
		require.NoError(t, err)
		var leasing string
		require.NoError(t, tx.QueryRow(ctx, `SELECT current_setting('herald.leasing')`).Scan(&leasing))
		return tx, leasing
	}
	first, leasing := lease()
	require.NotEmpty(t, leasing, "the first ingest leases")

	disabled := make(chan error, 1)
	go func() {
		_, err := s.EndpointSetEnabled(context.Background(), &store.EndpointSetEnabledParams{ID: ep.ID, Enabled: false, Reason: "manual", Now: t0})
		disabled <- err
	}()
	require.Eventually(t, func() bool {
		return gateWaiters(t, s, ep.ID) == 1
	}, 10*time.Second, 5*time.Millisecond, "the disable waits for the first ingest")

	second, leasing := lease()
	require.Empty(t, leasing, "an ingest that comes while the writer waits leaves the endpoint out")
	require.NoError(t, first.Rollback(ctx))
	select {
	case err := <-disabled:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("the disable waited for an ingest that came after it")
	}
	require.NoError(t, second.Rollback(ctx))
}

// TestAChangeOfSettingsWaitsForALeasingIngest: an ingest leasing on the
// cap it read is done before a change of the cap commits: a claim after
// the change counts what the ingest leased under the old cap.
func TestAChangeOfSettingsWaitsForALeasingIngest(t *testing.T) {
	t.Parallel()
	s := openNodes(t, 1)[0]
	ctx := t.Context()
	ep := createEndpoint(t, s, "c1", func(e *herald.Endpoint) { e.MaxInFlight = 8 })
	tx, err := s.pool.Begin(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { _ = tx.Rollback(context.Background()) })
	_, err = tx.Exec(ctx, ingestLeasingSQL, []string{ep.ID}, []string{ep.ID}, []time.Time{ep.UpdatedAt}, t0, []int32{8}, []int32{1})
	require.NoError(t, err)

	updated := make(chan error, 1)
	changed := *ep
	changed.MaxInFlight = 2
	go func() {
		_, err := s.EndpointUpdate(context.Background(), &store.EndpointUpdateParams{Endpoint: &changed, Now: t0})
		updated <- err
	}()
	require.Eventually(t, func() bool {
		return gateWaiters(t, s, ep.ID) == 1
	}, 10*time.Second, 5*time.Millisecond, "the change waits for the ingest")
	select {
	case err := <-updated:
		t.Fatalf("the change did not wait for the ingest: %v", err)
	default:
	}
	require.NoError(t, tx.Rollback(ctx))
	require.NoError(t, <-updated)
}

// gateWaiters counts the sessions waiting for an endpoint's gate (gate.go).
// pg_locks is the whole cluster's: tests running beside this one wait on
// gates of their own, so the count is of this endpoint's key only.
func gateWaiters(t *testing.T, s *Store, endpointID string) int {
	t.Helper()
	var n int
	require.NoError(t, s.pool.QueryRow(t.Context(), `
		SELECT count(*) FROM pg_locks
		WHERE NOT granted AND locktype = 'advisory' AND classid = $1
		  AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
		  AND objid::int8 = hashtext(current_schema() || ':' || $2::text)::int8 & 4294967295`,
		gateClass, endpointID).Scan(&n))
	return n
}
