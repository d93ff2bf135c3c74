package pgstore

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/heraldhooks/herald"
	"github.com/heraldhooks/herald/internal/store"
)

// queueMismatches lists, one line each, the live deliveries missing from
// delivery_queue or differing from their row there, and the queue rows of
// deliveries that are not live (or gone).
func queueMismatches(t *testing.T, s *Store) []string {
	t.Helper()
	var out []string
	rows, err := s.pool.Query(t.Context(), `
		SELECT coalesce(d.id, q.delivery_id), d.id IS NULL, q.delivery_id IS NULL,
			(d.endpoint_id, d.consumer_id, d.seq, least(d.attempt_count, 1)::smallint,
				d.status = 'delivering', d.due_at)
			IS DISTINCT FROM (q.endpoint_id, q.consumer_id, q.seq, q.kind, q.leased, q.due_at)
		FROM (SELECT * FROM deliveries WHERE status IN ('pending', 'delivering')) AS d
		FULL JOIN delivery_queue q ON q.delivery_id = d.id`)
	require.NoError(t, err)
	var id string
	var notLive, missing, differs bool
	_, err = pgx.ForEachRow(rows, []any{&id, &notLive, &missing, &differs}, func() error {
		switch {
		case notLive:
			out = append(out, id+": queued but not live")
		case missing:
			out = append(out, id+": live but not queued")
		case differs:
			out = append(out, id+": queued differently")
		}
		return nil
	})
	require.NoError(t, err)
	return out
}

// queued counts delivery_queue's rows.
func queued(t *testing.T, s *Store) int {
	t.Helper()
	var n int
	require.NoError(t, s.pool.QueryRow(t.Context(), "SELECT count(*) FROM delivery_queue").Scan(&n))
	return n
}

// TestDeliveryQueueFollowsEveryWriter takes deliveries through each
// writer of deliveries, one at a time, and checks after each that
// delivery_queue holds exactly the live deliveries, as they are, and
// dead_deliveries exactly the dead ones.
func TestDeliveryQueueFollowsEveryWriter(t *testing.T) {
	t.Parallel()
	s := openNodes(t, 1)[0]
	ctx := t.Context()
	a := createEndpoint(t, s, "c1")
	b := createEndpoint(t, s, "c1", func(ep *herald.Endpoint) { ep.Ordering = herald.OrderingFIFO })
	now := t0.Add(time.Minute)
	check := func(step string, want int) {
		t.Helper()
		require.Empty(t, queueMismatches(t, s), step)
		require.Equal(t, want, queued(t, s), step)
		require.Empty(t, deadMismatches(t, s), step)
	}

	ingest(t, s, "c1", 4) // 4 events to 2 endpoints
	check("ingest", 8)

	claimed, err := s.DeliveryClaim(ctx, &store.DeliveryClaimParams{Limit: 8, LeaseMargin: time.Second, Now: now})
	require.NoError(t, err)
	require.Len(t, claimed, 5, "4 of the unordered endpoint, the FIFO head")
	check("claim", 8)

	byEndpoint := map[string][]*store.ClaimedDelivery{}
	for _, c := range claimed {
		byEndpoint[c.Delivery.EndpointID] = append(byEndpoint[c.Delivery.EndpointID], c)
	}
	outcome := func(c *store.ClaimedDelivery, status herald.Status) store.DeliveryOutcome {
		o := outcomeAt(c, status, now)
		if status == herald.StatusPending {
			o.RetryIn = time.Minute
		}
		return o
	}
	as := byEndpoint[a.ID]
	_, err = s.DeliveryCompleteMany(ctx, &store.DeliveryCompleteManyParams{Now: now, Outcomes: []store.DeliveryOutcome{
		outcome(as[0], herald.StatusDelivered),
		outcome(as[1], herald.StatusPending),
		outcome(as[2], herald.StatusDead),
		outcome(byEndpoint[b.ID][0], herald.StatusDelivered),
	}})
	require.NoError(t, err)
	check("outcomes: delivered, retry, dead, FIFO head delivered", 5)

	require.NoError(t, s.DeliveryRelease(ctx, &store.DeliveryReleaseParams{Now: now,
		Leases: []store.Lease{{DeliveryID: as[3].Delivery.ID, LeaseToken: as[3].LeaseToken}}}))
	check("release", 5)

	_, err = s.DeliveryCancel(ctx, &store.DeliveryCancelParams{ID: as[3].Delivery.ID, Now: now})
	require.NoError(t, err)
	check("cancel", 4)

	_, err = s.DeliveryReplay(ctx, &store.DeliveryReplayParams{ID: as[2].Delivery.ID, Now: now})
	require.NoError(t, err)
	check("replay", 5)

	_, err = s.EndpointSetEnabled(ctx, &store.EndpointSetEnabledParams{ID: b.ID, Enabled: false, Now: now})
	require.NoError(t, err)
	check("disable: the FIFO endpoint's 3 live deliveries dead", 2)

	require.NoError(t, s.EndpointDelete(ctx, &store.EndpointDeleteParams{ID: a.ID, Now: now}))
	check("delete: the other's cancelled", 0)

	_, err = s.EventPurge(ctx, &store.EventPurgeParams{Retention: time.Hour, Limit: 100, Now: now.Add(48 * time.Hour)})
	require.NoError(t, err)
	check("purge", 0)
}

// TestDeliveryQueueUnderConcurrentWriters runs ingests, claims with
// outcomes of every kind, releases, cancels, replays, disables and enables
// on two nodes at once. None may fail (a deadlock would), and
// delivery_queue must end holding exactly the live deliveries.
func TestDeliveryQueueUnderConcurrentWriters(t *testing.T) {
	t.Parallel()
	nodes := openNodes(t, 2)
	for i := range 6 {
		createEndpoint(t, nodes[0], "c1", func(ep *herald.Endpoint) {
			ep.MaxInFlight = 1000
			if i%3 == 0 {
				ep.Ordering = herald.OrderingFIFO
			}
		})
	}
	ctx := t.Context()
	now := t0.Add(time.Minute)
	const rounds = 15

	w := newWriters(ctx, nodes, rounds)
	w.run("deliver", func(ctx context.Context, node *Store, i int) error {
		claimed, err := ingestAndClaim(ctx, node, 3, 24, now)
		if err != nil {
			return err
		}
		var outcomes []store.DeliveryOutcome
		var releases []store.Lease
		for j, c := range claimed {
			switch (i + j) % 5 {
			case 1: // due again at once, so later claims take it
				outcomes = append(outcomes, outcomeAt(c, herald.StatusPending, now))
			case 2:
				outcomes = append(outcomes, outcomeAt(c, herald.StatusDead, now))
			case 3:
				releases = append(releases, store.Lease{DeliveryID: c.Delivery.ID, LeaseToken: c.LeaseToken})
			default:
				outcomes = append(outcomes, outcomeAt(c, herald.StatusDelivered, now))
			}
		}
		if _, err := node.DeliveryCompleteMany(ctx, &store.DeliveryCompleteManyParams{Outcomes: outcomes, Now: now}); err != nil {
			return err
		}
		return node.DeliveryRelease(ctx, &store.DeliveryReleaseParams{Leases: releases, Now: now})
	})
	w.run("cancel and replay", func(ctx context.Context, node *Store, i int) error {
		rows, err := node.pool.Query(ctx, `
			(SELECT id FROM deliveries WHERE status IN ('pending', 'delivering') ORDER BY random() LIMIT 1)
			UNION ALL
			(SELECT id FROM deliveries WHERE status IN ('dead', 'cancelled') ORDER BY random() LIMIT 2)`)
		if err != nil {
			return err
		}
		ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return err
		}
		for j, id := range ids {
			if j == 0 {
				_, err = node.DeliveryCancel(ctx, &store.DeliveryCancelParams{ID: id, Now: now})
			} else {
				_, err = node.DeliveryReplay(ctx, &store.DeliveryReplayParams{ID: id, Now: now})
			}
			if err != nil && !errors.Is(err, store.ErrConflict) && !errors.Is(err, store.ErrNotFound) {
				return err
			}
		}
		return nil
	})
	w.run("disable and enable", func(ctx context.Context, node *Store, i int) error {
		rows, err := node.pool.Query(ctx, `SELECT id, enabled FROM endpoints ORDER BY random() LIMIT 1`)
		if err != nil {
			return err
		}
		var id string
		var enabled bool
		if _, err := pgx.ForEachRow(rows, []any{&id, &enabled}, func() error { return nil }); err != nil {
			return err
		}
		_, err = node.EndpointSetEnabled(ctx, &store.EndpointSetEnabledParams{ID: id, Enabled: !enabled, Now: now})
		return err
	})
	w.wait(t)
	require.Empty(t, queueMismatches(t, nodes[0]))
	require.NotZero(t, queued(t, nodes[0]), "some deliveries are still live, so the check compared rows")
}

// TestIngestQueuesItsOwnDeliveries: ingest writes the delivery queue's
// rows and the endpoint queue's marks of the deliveries it inserts itself,
// in its own statements (migration 0020): with the functions of the
// triggers on inserts into deliveries made to fail, ingest still succeeds
// and queues all it inserted, so none of them ran. An insert into
// deliveries by another writer still fires them.
func TestIngestQueuesItsOwnDeliveries(t *testing.T) {
	t.Parallel()
	s := openNodes(t, 1)[0]
	ctx := t.Context()
	createEndpoint(t, s, "c1")
	createEndpoint(t, s, "c1")
	for _, fn := range []string{"herald_delivery_queue_put", "herald_endpoint_queue_mark", "herald_endpoint_dead_count"} {
		_, err := s.pool.Exec(ctx, `CREATE OR REPLACE FUNCTION `+fn+`() RETURNS trigger
			LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'trigger % ran', TG_NAME; END $$`)
		require.NoError(t, err)
	}
	res := ingest(t, s, "c1", 3) // 3 events to 2 endpoints
	require.Empty(t, queueMismatches(t, s))
	require.Equal(t, 6, queued(t, s))
	var marked int
	require.NoError(t, s.pool.QueryRow(ctx, "SELECT count(*) FROM endpoint_queue WHERE due_at <= $1", t0).Scan(&marked))
	require.Equal(t, 2, marked, "both endpoints marked due")

	_, err := s.pool.Exec(ctx, `
		INSERT INTO deliveries (id, event_id, endpoint_id, consumer_id, event_type, status, due_at, created_at, updated_at)
		VALUES ('dl_other', $1, $2, 'c1', 'order.created', 'pending', $3, $3, $3)`,
		res[0].Event.ID, res[0].Deliveries[0].EndpointID, t0)
	require.ErrorContains(t, err, "trigger deliveries_")
}

// TestOtherWritersInsertsAreQueued: deliveries inserted by a writer other
// than ingest (a node of an earlier release, say) are queued by the
// triggers, on the connections ingest used too (its setting lasts only
// its transaction), and claimed.
func TestOtherWritersInsertsAreQueued(t *testing.T) {
	t.Parallel()
	s := openNodes(t, 1)[0]
	ctx := t.Context()
	ep := createEndpoint(t, s, "c1")
	res := ingest(t, s, "c1", 1)
	claimed, err := s.DeliveryClaim(ctx, &store.DeliveryClaimParams{Limit: 10, Now: t0})
	require.NoError(t, err)
	require.Len(t, claimed, 1)
	_, err = s.DeliveryCompleteMany(ctx, &store.DeliveryCompleteManyParams{
		Outcomes: []store.DeliveryOutcome{delivered(claimed[0])}, Now: t0})
	require.NoError(t, err)
	_, err = s.EndpointQueueTidy(ctx, &store.EndpointQueueTidyParams{Now: t0, Limit: 10})
	require.NoError(t, err)
	require.Zero(t, queued(t, s))

	for i := range 4 { // on every connection of the pool, in turn
		_, err = s.pool.Exec(ctx, `
			INSERT INTO deliveries (id, event_id, endpoint_id, consumer_id, event_type, status, due_at, created_at, updated_at)
			VALUES ($1, $2, $3, 'c1', 'order.created', 'pending', $4, $4, $4)`,
			"dl_other"+strconv.Itoa(i), res[0].Event.ID, ep.ID, t0)
		require.NoError(t, err)
	}
	require.Empty(t, queueMismatches(t, s))
	require.Equal(t, 4, queued(t, s))
	claimed, err = s.DeliveryClaim(ctx, &store.DeliveryClaimParams{Limit: 10, Now: t0.Add(time.Second)})
	require.NoError(t, err)
	require.Len(t, claimed, 4)
}

// TestClaimQueuesItsOwnLeases: a claim updates the delivery queue's rows
// of the deliveries it leases itself, in its own statement (migration
// 0021): with the functions of the triggers on deliveries made to fail, a
// claim still leases, FIFO heads and expired leases included, and the
// queue holds what it leased; another writer's update of deliveries still
// fires them.
func TestClaimQueuesItsOwnLeases(t *testing.T) {
	t.Parallel()
	s := openNodes(t, 1)[0]
	ctx := t.Context()
	createEndpoint(t, s, "c1")
	createEndpoint(t, s, "c1", func(ep *herald.Endpoint) { ep.Ordering = herald.OrderingFIFO })
	ingest(t, s, "c1", 3) // 3 events to 2 endpoints
	for _, fn := range []string{"herald_delivery_queue_put", "herald_endpoint_queue_mark", "herald_endpoint_dead_count"} {
		_, err := s.pool.Exec(ctx, `CREATE OR REPLACE FUNCTION `+fn+`() RETURNS trigger
			LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'trigger % ran', TG_NAME; END $$`)
		require.NoError(t, err)
	}
	claimed, err := s.DeliveryClaim(ctx, &store.DeliveryClaimParams{Limit: 10, LeaseMargin: time.Second, Now: t0})
	require.NoError(t, err)
	require.Len(t, claimed, 4, "3 of the unordered endpoint, the FIFO head")
	require.Empty(t, queueMismatches(t, s))
	require.Equal(t, 6, queued(t, s))

	// The leases run out, and a later claim takes them again.
	again, err := s.DeliveryClaim(ctx, &store.DeliveryClaimParams{Limit: 10, LeaseMargin: time.Second, Now: t0.Add(time.Hour)})
	require.NoError(t, err)
	require.Len(t, again, 4)
	require.Empty(t, queueMismatches(t, s))

	_, err = s.pool.Exec(ctx, `UPDATE deliveries SET updated_at = $1 WHERE id = $2`, t0, claimed[0].Delivery.ID)
	require.ErrorContains(t, err, "trigger deliveries_")
}

// TestPlainSuccessesQueueTheirOwnEnds: an outcome write of plain successes
// deletes the delivery queue's rows of the deliveries it ends itself, in
// one round trip, without the triggers on updates of deliveries, which
// stay for every other writer (migration 0023).
func TestPlainSuccessesQueueTheirOwnEnds(t *testing.T) {
	t.Parallel()
	s := openNodes(t, 1)[0]
	ctx := t.Context()
	createEndpoint(t, s, "c1")
	ingest(t, s, "c1", 3)
	claimed, err := s.DeliveryClaim(ctx, &store.DeliveryClaimParams{Limit: 10, LeaseMargin: time.Minute, Now: t0})
	require.NoError(t, err)
	require.Len(t, claimed, 3)
	for _, fn := range []string{"herald_delivery_queue_put", "herald_endpoint_queue_mark", "herald_endpoint_dead_count"} {
		_, err := s.pool.Exec(ctx, `CREATE OR REPLACE FUNCTION `+fn+`() RETURNS trigger
			LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'trigger % ran', TG_NAME; END $$`)
		require.NoError(t, err)
	}
	applied, err := s.DeliveryCompleteMany(ctx, &store.DeliveryCompleteManyParams{Now: t0, Outcomes: []store.DeliveryOutcome{
		outcomeAt(claimed[0], herald.StatusDelivered, t0),
		outcomeAt(claimed[1], herald.StatusDelivered, t0),
	}})
	require.NoError(t, err)
	require.Equal(t, []bool{true, true}, applied)
	require.Empty(t, queueMismatches(t, s))
	require.Equal(t, 1, queued(t, s), "the third delivery, still leased")

	retry := outcomeAt(claimed[2], herald.StatusPending, t0)
	retry.RetryIn = time.Minute
	_, err = s.DeliveryCompleteMany(ctx, &store.DeliveryCompleteManyParams{Now: t0, Outcomes: []store.DeliveryOutcome{retry}})
	require.ErrorContains(t, err, "trigger deliveries_", "a retry's write, on the breaker's path, keeps its queue rows through the triggers")
}
