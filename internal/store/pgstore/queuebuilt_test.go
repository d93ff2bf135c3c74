package pgstore

import (
	"context"
	"errors"
	"math"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/heraldhooks/herald"
	"github.com/heraldhooks/herald/internal/store"
)

// emptyQueue does to the delivery queue what PostgreSQL does to an
// unlogged table recovering from a crash or promoting a standby
// (migrations 0032, 0033): it empties it, and delivery_queue_built with it. The
// node's own check (queueReady) is held off until check is called.
func emptyQueue(t *testing.T, s *Store) (check func()) {
	t.Helper()
	s.queueCheckedAt.Store(math.MaxInt64)
	_, err := s.pool.Exec(t.Context(), "TRUNCATE delivery_queue, delivery_queue_built")
	require.NoError(t, err)
	return func() { s.queueCheckedAt.Store(0) }
}

// TestQueueEmptiedByACrashIsMadeAgain: until a node makes the emptied
// delivery queue again, nothing is leased (a claim would have counted no
// leases against a cap whose leased deliveries the queue lost, and taken
// a FIFO head written after the crash ahead of one written before), and
// deleting an endpoint still cancels every live delivery of it. The next
// claim makes it again, as the deliveries say, and goes on from it.
func TestQueueEmptiedByACrashIsMadeAgain(t *testing.T) {
	t.Parallel()
	s := openNodes(t, 1)[0]
	ctx := t.Context()
	now := t0.Add(time.Minute)
	capped := createEndpoint(t, s, "c1", func(e *herald.Endpoint) { e.MaxInFlight = 2 })
	ingest(t, s, "c1", 4)
	require.Len(t, claimAt(t, s, 10, now), 2, "the cap")
	fifo := createEndpoint(t, s, "c2", func(e *herald.Endpoint) { e.Ordering = herald.OrderingFIFO })
	head := ingest(t, s, "c2", 1)[0]
	gone := createEndpoint(t, s, "c3")
	ingest(t, s, "c3", 2)

	check := emptyQueue(t, s)
	ingest(t, s, "c1", 1) // written after the crash: queued
	ingest(t, s, "c2", 1)
	require.Equal(t, 2, queued(t, s))
	require.Empty(t, claimAt(t, s, 10, now), "nothing leased before the queue is made again")
	sampled, err := s.DepthSample(ctx, &store.DepthSampleParams{Now: now})
	require.NoError(t, err)
	require.False(t, sampled, "no depth sample of a partial queue")
	require.NoError(t, s.EndpointDelete(ctx, &store.EndpointDeleteParams{ID: gone.ID, Now: now}))
	require.Equal(t, map[string]int{"cancelled": 2}, statuses(t, s, gone.ID))

	check()
	claimed := claimAt(t, s, 10, now)
	sampled, err = s.DepthSample(ctx, &store.DepthSampleParams{Now: now})
	require.NoError(t, err)
	require.True(t, sampled, "the minute's sample, once the queue is whole")
	require.Len(t, claimed, 1, "the capped endpoint's two leases counted again; the FIFO head")
	require.Equal(t, fifo.ID, claimed[0].Delivery.EndpointID)
	require.Equal(t, head.Deliveries[0].ID, claimed[0].Delivery.ID, "the head written before the crash")
	require.Empty(t, queueMismatches(t, s))
	require.Equal(t, 7, queued(t, s), "capped: 2 leased, 3 due; FIFO: 2")
	require.Equal(t, map[string]int{"delivering": 2, "pending": 3}, statuses(t, s, capped.ID))

	var refilled int64
	var again bool
	require.NoError(t, s.pool.QueryRow(ctx, "SELECT herald_delivery_queue_refill()").Scan(&refilled))
	require.NoError(t, s.pool.QueryRow(ctx, "SELECT herald_delivery_queue_ready()").Scan(&again))
	require.Zero(t, refilled, "built: nothing to do")
	require.False(t, again)
}

// TestQueueMadeAgainUnderWriters empties the delivery queue and its built
// row again and again, and makes it again while two nodes ingest,
// claim and write outcomes of every kind. No writer fails (a deadlock
// with the rebuild's locks would), and the queue ends holding exactly the
// live deliveries.
func TestQueueMadeAgainUnderWriters(t *testing.T) {
	t.Parallel()
	nodes := openNodes(t, 2)
	for range 4 {
		createEndpoint(t, nodes[0], "c1", func(ep *herald.Endpoint) { ep.MaxInFlight = 1000 })
	}
	createEndpoint(t, nodes[0], "c1", func(ep *herald.Endpoint) { ep.Ordering = herald.OrderingFIFO })
	now := t0.Add(time.Minute)
	const rounds = 12
	var rebuilt atomic.Int64

	w := newWriters(t.Context(), nodes, rounds)
	w.run("deliver", func(ctx context.Context, node *Store, i int) error {
		claimed, err := ingestAndClaim(ctx, node, 3, 20, now)
		if err != nil {
			return err
		}
		var outcomes []store.DeliveryOutcome
		for j, c := range claimed {
			status := []herald.Status{herald.StatusDelivered, herald.StatusPending, herald.StatusDead}[(i+j)%3]
			outcomes = append(outcomes, outcomeAt(c, status, now))
		}
		_, err = node.DeliveryCompleteMany(ctx, &store.DeliveryCompleteManyParams{Outcomes: outcomes, Now: now})
		return err
	})
	w.run("crash and make again", func(ctx context.Context, node *Store, i int) error {
		// Both at once, as a crash empties them. TRUNCATE waits for every
		// writer of either table, and one that holds the queue and then
		// reads the built row would deadlock with it: such a round is left
		// out (a crash takes no lock).
		err := pgx.BeginFunc(ctx, node.pool, func(tx pgx.Tx) error {
			_, err := tx.Exec(ctx, "SET LOCAL lock_timeout = '200ms'; TRUNCATE delivery_queue_built, delivery_queue")
			return err
		})
		if pgErr := (*pgconn.PgError)(nil); errors.As(err, &pgErr) && pgErr.Code == "55P03" {
			return nil
		}
		if err != nil {
			return err
		}
		var ready bool
		if _, err := node.pool.Exec(ctx, "SELECT herald_delivery_queue_refill()"); err != nil {
			return err
		}
		if err := node.pool.QueryRow(ctx, "SELECT herald_delivery_queue_ready()").Scan(&ready); err != nil {
			return err
		}
		if ready {
			rebuilt.Add(1)
		}
		return nil
	})
	w.wait(t)
	require.Positive(t, rebuilt.Load())
	require.Empty(t, queueMismatches(t, nodes[0]))
	require.NotZero(t, queued(t, nodes[0]), "some deliveries are still live, so the check compared rows")
}

// TestQueueMadeAgainMendsTheRefill: rows the refill put back for
// deliveries that a writer then ended or changed, before the refill
// committed (made here by writing deliveries past their triggers), are
// mended by herald_delivery_queue_ready under the writers' lock.
func TestQueueMadeAgainMendsTheRefill(t *testing.T) {
	t.Parallel()
	s := openNodes(t, 1)[0]
	ctx := t.Context()
	createEndpoint(t, s, "c1")
	res := ingest(t, s, "c1", 3)
	emptyQueue(t, s)
	var refilled int64
	require.NoError(t, s.pool.QueryRow(ctx, "SELECT herald_delivery_queue_refill()").Scan(&refilled))
	require.EqualValues(t, 3, refilled)
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `SET LOCAL session_replication_role = replica;
			UPDATE deliveries SET status = 'delivered', due_at = NULL WHERE id = '`+res[0].Deliveries[0].ID+`';
			UPDATE deliveries SET status = 'pending', attempt_count = 1, due_at = due_at + interval '1 minute'
				WHERE id = '`+res[1].Deliveries[0].ID+`'`)
		return err
	})
	require.NoError(t, err)
	require.Len(t, queueMismatches(t, s), 2, "one queued but not live, one queued differently")

	var ready bool
	require.NoError(t, s.pool.QueryRow(ctx, "SELECT herald_delivery_queue_ready()").Scan(&ready))
	require.True(t, ready)
	require.Empty(t, queueMismatches(t, s))
	require.Equal(t, 2, queued(t, s))
}
