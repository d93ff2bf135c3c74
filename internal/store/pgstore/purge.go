package pgstore

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/heraldhooks/herald"
	"github.com/heraldhooks/herald/internal/store"
)

// purgeLockClass is the first key of the advisory lock a purge batch
// tries ("HRLP"); the second is hashtext of the schema, since advisory
// locks span the database and each schema holds a Herald of its own.
const purgeLockClass = 0x4852_4c50

// purgeLockSQL tries the purge lock for this transaction, waiting for no
// one: a node that finds it taken leaves the purge to the node holding it.
const purgeLockSQL = `SELECT pg_try_advisory_xact_lock($1, hashtext(current_schema()))`

// purgeCutoffSQL is the batch's cutoff: Now (or the database clock) less
// the retention, in microseconds.
const purgeCutoffSQL = `SELECT coalesce($1::timestamptz, now()) - $2::bigint * interval '1 microsecond'`

// purgeScanSQL looks at up to $4 events created before the cutoff $1,
// after the cursor $3 in id order, and says of each whether it can go:
// none of its deliveries is live or ended at or after the cutoff. Ids
// begin with their millisecond, so the walk is a range of events_pkey
// below $2, the first id of the cutoff's millisecond (herald.FirstID),
// and events_created_idx is not read: a later release can drop it, 95
// bytes of WAL an event (BENCHMARKS "WAL a delivery"). An event whose
// node's clock ran ahead of the database's by its id is left to a later
// pass. Each event costs a probe of deliveries_event_idx. The probe is a
// LATERAL subquery with a LIMIT, not a NOT EXISTS, so that the planner
// cannot turn it into one hash of every delivery built by a scan of the
// table.
const purgeScanSQL = `
SELECT e.id, e.created_at, k.keep IS NULL
FROM (
	SELECT id, created_at FROM events
	WHERE id < $2 AND id > $3 AND created_at < $1
	ORDER BY id
	LIMIT $4
) AS e
LEFT JOIN LATERAL (
	SELECT true AS keep FROM deliveries d
	WHERE d.event_id = e.id
		AND (d.status IN ('pending', 'delivering') OR d.updated_at >= $1)
	LIMIT 1
) AS k ON true
ORDER BY e.id`

// purgeLockDeliveriesSQL locks the deliveries of the events in $1 that
// no other transaction holds, and says of each, as it is once locked,
// whether it keeps its event (live, or ended at or after the cutoff $2): a
// replay that committed since the scan made its delivery live. A delivery
// held elsewhere (a replay under way) is skipped, and purgeCountSQL shows
// it missing: the purge waits for no one, and no one waits long for it.
const purgeLockDeliveriesSQL = `
SELECT event_id, status IN ('pending', 'delivering') OR updated_at >= $2
FROM deliveries
WHERE event_id = ANY($1::text[])
FOR UPDATE SKIP LOCKED`

// purgeCountSQL counts the deliveries of each event in $1, locked or not.
const purgeCountSQL = `
SELECT event_id, count(*) FROM deliveries
WHERE event_id = ANY($1::text[])
GROUP BY event_id`

// The deletes of a purge batch, children first: the events in $1, their
// deliveries and the attempts of those.
const (
	purgeAttemptsSQL = `DELETE FROM attempts WHERE delivery_id IN (
		SELECT id FROM deliveries WHERE event_id = ANY($1::text[]))`
	purgeDeliveriesSQL = `DELETE FROM deliveries WHERE event_id = ANY($1::text[])`
	purgeEventsSQL     = `DELETE FROM events WHERE id = ANY($1::text[])`
)

// purgeLockEndpointsSQL locks the endpoints of the dead deliveries of the
// events in $1, in id order.
const purgeLockEndpointsSQL = `
SELECT 1 FROM endpoints
WHERE id IN (SELECT endpoint_id FROM deliveries WHERE event_id = ANY($1::text[]) AND status = 'dead')
ORDER BY id
FOR KEY SHARE`

// lockEnded locks the deliveries of the candidate events and returns the
// events that can still go: every delivery of theirs is locked by this
// transaction, and ended before the cutoff as it is now.
func lockEnded(ctx context.Context, tx pgx.Tx, candidates []string, cutoff time.Time) ([]string, error) {
	type tally struct {
		locked, total int64
		keep          bool
	}
	byEvent := make(map[string]*tally, len(candidates))
	for _, id := range candidates {
		byEvent[id] = &tally{}
	}
	rows, err := tx.Query(ctx, purgeLockDeliveriesSQL, candidates, cutoff)
	if err != nil {
		return nil, fmt.Errorf("lock deliveries: %w", err)
	}
	var (
		eventID string
		keep    bool
	)
	_, err = pgx.ForEachRow(rows, []any{&eventID, &keep}, func() error {
		if t := byEvent[eventID]; t != nil {
			t.locked++
			t.keep = t.keep || keep
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("lock deliveries: %w", err)
	}
	// A statement of its own, so it counts the deliveries as they are now.
	rows, err = tx.Query(ctx, purgeCountSQL, candidates)
	if err != nil {
		return nil, fmt.Errorf("count deliveries: %w", err)
	}
	var n int64
	_, err = pgx.ForEachRow(rows, []any{&eventID, &n}, func() error {
		if t := byEvent[eventID]; t != nil {
			t.total = n
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("count deliveries: %w", err)
	}
	var gone []string
	for _, id := range candidates {
		if t := byEvent[id]; !t.keep && t.locked == t.total {
			gone = append(gone, id)
		}
	}
	return gone, nil
}

// EventPurge deletes one batch of ended history (store.Store.EventPurge)
// in one transaction: it tries the purge lock (Busy when another node
// holds it), looks at the batch's events, locks the deliveries of those
// that can go without waiting for any, checks them again under the lock,
// and deletes attempts, deliveries and events.
func (s *Store) EventPurge(ctx context.Context, p *store.EventPurgeParams) (store.PurgeResult, error) {
	if p.Retention <= 0 {
		return store.PurgeResult{}, fmt.Errorf("purge events: retention %s is not positive", p.Retention)
	}
	limit := store.PurgeLimit(p.Limit)
	var res store.PurgeResult
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		res = store.PurgeResult{Next: p.After}
		var locked bool
		if err := tx.QueryRow(ctx, purgeLockSQL, int32(purgeLockClass)).Scan(&locked); err != nil {
			return fmt.Errorf("take lock: %w", err)
		}
		if !locked {
			res.Busy = true
			return nil
		}
		var cutoff time.Time
		if err := tx.QueryRow(ctx, purgeCutoffSQL, nowArg(p.Now), p.Retention.Microseconds()).Scan(&cutoff); err != nil {
			return fmt.Errorf("cutoff: %w", err)
		}
		// The zero cursor's id is "", before any event.
		rows, err := tx.Query(ctx, purgeScanSQL, cutoff, herald.FirstID(herald.PrefixEvent, cutoff), p.After.EventID, limit)
		if err != nil {
			return fmt.Errorf("scan: %w", err)
		}
		var candidates []string
		seen := 0
		for rows.Next() {
			var (
				id        string
				createdAt time.Time
				ended     bool
			)
			if err := rows.Scan(&id, &createdAt, &ended); err != nil {
				rows.Close()
				return fmt.Errorf("scan: %w", err)
			}
			seen++
			res.Next = store.PurgeCursor{CreatedAt: createdAt.UTC(), EventID: id}
			if ended {
				candidates = append(candidates, id)
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return fmt.Errorf("scan: %w", err)
		}
		res.Done = seen < limit
		if len(candidates) == 0 {
			return nil
		}
		// The dead deliveries' endpoints are locked first, as every writer
		// of dead deliveries locks them: the delete takes from their
		// counts in endpoint_dead (0015_endpoint_sorts.sql). FOR KEY SHARE
		// waits only for an outcome batch (FOR UPDATE), never for ingest
		// (FOR KEY SHARE) or claims (FOR NO KEY UPDATE).
		if _, err := tx.Exec(ctx, purgeLockEndpointsSQL, candidates); err != nil {
			return fmt.Errorf("lock endpoints: %w", err)
		}
		gone, err := lockEnded(ctx, tx, candidates, cutoff)
		if err != nil {
			return err
		}
		if len(gone) == 0 {
			return nil
		}
		for _, del := range []struct {
			what, sql string
			n         *int64
		}{
			{"attempts", purgeAttemptsSQL, &res.Attempts},
			{"deliveries", purgeDeliveriesSQL, &res.Deliveries},
			{"events", purgeEventsSQL, &res.Events},
		} {
			tag, err := tx.Exec(ctx, del.sql, gone)
			if err != nil {
				return fmt.Errorf("delete %s: %w", del.what, err)
			}
			*del.n = tag.RowsAffected()
		}
		return nil
	})
	if err != nil {
		return store.PurgeResult{}, fmt.Errorf("purge events: %w", err)
	}
	return res, nil
}
