package pgstore

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/heraldhooks/herald/internal/logkey"
	"github.com/heraldhooks/herald/internal/store"
)

// queueLockClass is the first key of the advisory locks that order the
// endpoint queue's writers (shared, taken by the trigger of migration
// 0007) and its tidy (exclusive, tried): "HRLQ". The second key is
// hashtext(schema || ':' || endpoint id), or hashtext(schema) for a
// statement past 32 endpoints: advisory locks span the database, and each
// schema holds a Herald of its own.
const queueLockClass = 1213353041

// tidyPickSQL draws up to $2 endpoints marked due at $1 and keeps those
// whose lock it takes at once: no writer of theirs is between reading the
// mark and committing. A statement of its own, so that the next one reads
// the deliveries as they are once the locks are held.
const tidyPickSQL = `
SELECT s.endpoint_id
FROM (
	SELECT endpoint_id FROM endpoint_queue
	WHERE due_at <= coalesce($1::timestamptz, now())
	ORDER BY random()
	LIMIT $2
) AS s
WHERE pg_try_advisory_xact_lock(1213353041, hashtext(current_schema() || ':' || s.endpoint_id))`

// tidyMoveSQL moves the marks of the endpoints in $1 to their earliest live
// due time (two probes of delivery_queue's claim index, new deliveries and
// retries), or deletes them when nothing is live, and says how many it
// changed.
const tidyMoveSQL = `
WITH nxt AS (
	SELECT u.id, least(
		(SELECT d.due_at FROM delivery_queue d
			WHERE d.endpoint_id = u.id AND d.kind = 0
			ORDER BY d.due_at LIMIT 1),
		(SELECT d.due_at FROM delivery_queue d
			WHERE d.endpoint_id = u.id AND d.kind = 1
			ORDER BY d.due_at LIMIT 1)) AS due_at
	FROM unnest($1::text[]) AS u(id)
), gone AS (
	DELETE FROM endpoint_queue q USING nxt
	WHERE q.endpoint_id = nxt.id AND nxt.due_at IS NULL
	RETURNING 1
), moved AS (
	UPDATE endpoint_queue q SET due_at = nxt.due_at
	FROM nxt
	WHERE q.endpoint_id = nxt.id AND nxt.due_at > q.due_at
	RETURNING 1
)
SELECT (SELECT count(*) FROM gone) + (SELECT count(*) FROM moved)`

// EndpointQueueTidy implements store.Store. It runs only when no writer
// of more than 32 endpoints at once is under way (they share one lock) and
// no other node is tidying, and then only on the endpoints no writer
// holds: it never waits for a lock, and only a writer that arrives while
// it runs waits for it, for one short transaction.
func (s *Store) EndpointQueueTidy(ctx context.Context, p *store.EndpointQueueTidyParams) (int, error) {
	if p.Limit <= 0 {
		return 0, nil
	}
	var n int64
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		var all bool
		if err := tx.QueryRow(ctx, "SELECT pg_try_advisory_xact_lock($1, hashtext(current_schema()))",
			queueLockClass).Scan(&all); err != nil {
			return err
		}
		if !all {
			return nil
		}
		rows, err := tx.Query(ctx, tidyPickSQL, nowArg(p.Now), p.Limit)
		if err != nil {
			return err
		}
		ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil || len(ids) == 0 {
			return err
		}
		return tx.QueryRow(ctx, tidyMoveSQL, ids).Scan(&n)
	})
	if err != nil {
		return 0, fmt.Errorf("tidy endpoint queue: %w", err)
	}
	s.vacuumQueue(ctx)
	return int(n), nil
}

// queueVacuumEvery is how often at most a node vacuums the queues.
const queueVacuumEvery = 5 * time.Second

// vacuumQueue vacuums the endpoint queue and the delivery queue, at most
// every queueVacuumEvery on this node. Every mark a writer lowers or a
// tidy moves leaves a dead row version, and so does every claim and
// outcome in the delivery queue, and claims walk both tables' indexes all
// the time: they are kept lean here rather than left to autovacuum, which
// may be off or, with its default thresholds, minutes late for tables this
// small and busy. They hold a row per endpoint with live work and a row per
// live delivery, so a vacuum costs little, however long the history.
// SKIP_LOCKED: a node never waits for another's vacuum. A caught-up node
// vacuums from its tidy; one working through a backlog, from its full
// claims (vacuumQueueBehind).
func (s *Store) vacuumQueue(ctx context.Context) {
	if s.vacuumDue() {
		s.runQueueVacuum(ctx)
	}
}

// vacuumQueueBehind is vacuumQueue without waiting for it: the vacuum,
// when due, runs in the background (until Close).
func (s *Store) vacuumQueueBehind() {
	if !s.vacuumDue() {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	s.subs.Add(1)
	go func() {
		defer s.subs.Done()
		s.runQueueVacuum(s.closing)
	}()
}

// vacuumDue says whether this node's vacuum of the queues is due, and if
// so marks it done now: one caller at a time gets true.
func (s *Store) vacuumDue() bool {
	now := time.Now().UnixNano()
	last := s.vacuumedAt.Load()
	return now-last >= int64(queueVacuumEvery) && s.vacuumedAt.CompareAndSwap(last, now)
}

// runQueueVacuum vacuums both queue tables; failing costs nothing but the
// dead rows, so it is only logged.
func (s *Store) runQueueVacuum(ctx context.Context) {
	if _, err := s.pool.Exec(ctx, "VACUUM (SKIP_LOCKED) endpoint_queue, delivery_queue"); err != nil && ctx.Err() == nil {
		s.logger.Warn("vacuum the queues", logkey.Error, err)
	}
}

// queueBuiltSQL says whether the delivery queue holds every live
// delivery: false from the moment PostgreSQL empties it on crash recovery
// or a promotion until a node has made it again (migrations 0032, 0033).
// Statements that decide on the queue (a FIFO head, a depth sample, the
// way to an endpoint's live deliveries) test it; herald_take_shards does
// the same in SQL.
const queueBuiltSQL = "EXISTS (SELECT 1 FROM delivery_queue_built WHERE built)"

// queueCheckEvery is how often at most a node checks that the delivery
// queue is built (queueReady).
const queueCheckEvery = time.Second

// queueReady makes the delivery queue again when PostgreSQL emptied it,
// recovering from a crash or promoting a standby (migrations 0032 and
// 0033), at most every queueCheckEvery on this node: a probe of a one-row
// table, and, on a node that finds it empty, a refill and a mend
// (migration 0032). Until then nothing
// is leased, so a failure costs only time: it is logged, and the next
// claim tries again.
func (s *Store) queueReady(ctx context.Context) {
	now := time.Now().UnixNano()
	last := s.queueCheckedAt.Load()
	if now-last < int64(queueCheckEvery) || !s.queueCheckedAt.CompareAndSwap(last, now) {
		return
	}
	var built bool
	err := s.pool.QueryRow(ctx, "SELECT "+queueBuiltSQL).Scan(&built)
	if err == nil && built {
		return
	}
	start := time.Now()
	var (
		n     int64
		ready bool
	)
	if err == nil {
		// The refill reads the history: no statement timeout. The mend
		// waits for writers under way: a lock timeout, so that new
		// writers do not queue behind one that runs long.
		err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, "SELECT set_config('statement_timeout', '0', true)"); err != nil {
				return err
			}
			return tx.QueryRow(ctx, "SELECT herald_delivery_queue_refill()").Scan(&n)
		})
	}
	if err == nil {
		err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, "SELECT set_config('lock_timeout', '5s', true)"); err != nil {
				return err
			}
			return tx.QueryRow(ctx, "SELECT herald_delivery_queue_ready()").Scan(&ready)
		})
	}
	if err != nil {
		if ctx.Err() == nil {
			s.logger.Warn("make the delivery queue again", logkey.Error, err)
		}
		return
	}
	if ready {
		s.logger.Warn("the delivery queue was empty after PostgreSQL recovered from a crash "+
			"or promoted a standby: made again from the live deliveries",
			"deliveries", n, "took", time.Since(start).Round(time.Millisecond))
	}
}
