package sqlitestore

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"

	"github.com/heraldhooks/herald/internal/store"
)

// purgeScanQuery looks at up to ?4 events created before the cutoff ?1,
// after the cursor (?2, ?3) in (created_at, id) order, and says of each
// whether it can go: none of its deliveries is live or ended at or after
// the cutoff. The walk is a range of events_created_id; each event costs a
// probe of deliveries_event.
const purgeScanQuery = `
SELECT e.id, e.created_at,
	NOT EXISTS (
		SELECT 1 FROM deliveries d INDEXED BY deliveries_event
		WHERE d.event_id = e.id
			AND (d.status IN ` + liveStatuses + ` OR d.updated_at >= ?1))
FROM events e INDEXED BY events_created_id
WHERE e.created_at < ?1 AND (e.created_at, e.id) > (?2, ?3)
ORDER BY e.created_at, e.id
LIMIT CAST(?4 AS INTEGER)`

// The deletes of a purge batch, children first (the foreign keys are
// enforced), each given the ids of the events that go as a JSON array;
// the listings' entries of the rows first, while the rows say their
// owners, and those of the queues (a second's worth; an event ended
// before the cutoff is seldom still there).
const (
	purgeGoingDeliveries = `SELECT d.id, d.endpoint_id, d.consumer_id FROM deliveries d INDEXED BY deliveries_event
		WHERE d.event_id IN (SELECT value FROM json_each(?))`
	purgeEndpointDeliveriesQuery = `DELETE FROM endpoint_deliveries WHERE (owner, item) IN (
		SELECT endpoint_id, id FROM (` + purgeGoingDeliveries + `))`
	purgeConsumerDeliveriesQuery = `DELETE FROM consumer_deliveries WHERE (owner, item) IN (
		SELECT consumer_id, id FROM (` + purgeGoingDeliveries + `))`
	purgeQueuedDeliveriesQuery = `DELETE FROM unlisted_deliveries WHERE item IN (SELECT id FROM (` + purgeGoingDeliveries + `))`
	purgeListedEventsQuery     = `DELETE FROM consumer_events WHERE (owner, item) IN (
		SELECT consumer_id, id FROM events WHERE id IN (SELECT value FROM json_each(?)))`
	purgeQueuedEventsQuery = `DELETE FROM unlisted_events WHERE item IN (SELECT value FROM json_each(?))`
	purgeAttemptsQuery     = `DELETE FROM attempts WHERE delivery_id IN (SELECT id FROM (` + purgeGoingDeliveries + `))`
	purgeDeliveriesQuery   = `DELETE FROM deliveries WHERE event_id IN (SELECT value FROM json_each(?))`
	purgeEventsQuery       = `DELETE FROM events WHERE id IN (SELECT value FROM json_each(?))`
)

// EventPurge deletes one batch of ended history (store.Store.EventPurge).
// SQLite has one node and one writer, so the batch looks and deletes in
// one write transaction, and nothing can revive a delivery in between.
func (s *Store) EventPurge(ctx context.Context, p *store.EventPurgeParams) (store.PurgeResult, error) {
	if p.Retention <= 0 {
		return store.PurgeResult{}, fmt.Errorf("purge events: retention %s is not positive", p.Retention)
	}
	cutoff := micros(now(p.Now).Add(-p.Retention))
	limit := store.PurgeLimit(p.Limit)
	res := store.PurgeResult{Next: p.After}
	err := s.write(ctx, func(tx *sql.Tx) error {
		res = store.PurgeResult{Next: p.After}
		rows, err := tx.QueryContext(ctx, purgeScanQuery, cutoff, micros(p.After.CreatedAt), p.After.EventID, limit)
		if err != nil {
			return err
		}
		defer rows.Close()
		var gone []string
		seen := 0
		for rows.Next() {
			var (
				id        string
				createdAt int64
				ended     bool
			)
			if err := rows.Scan(&id, &createdAt, &ended); err != nil {
				return err
			}
			seen++
			res.Next = store.PurgeCursor{CreatedAt: fromMicros(createdAt), EventID: id}
			if ended {
				gone = append(gone, id)
			}
		}
		if err := rows.Err(); err != nil {
			return err
		}
		res.Done = seen < limit
		if len(gone) == 0 {
			return nil
		}
		ids, err := json.Marshal(gone)
		if err != nil {
			return err
		}
		for _, del := range []struct {
			query string
			n     *int64 // nil: not counted
		}{
			{purgeEndpointDeliveriesQuery, nil},
			{purgeConsumerDeliveriesQuery, nil},
			{purgeQueuedDeliveriesQuery, nil},
			{purgeListedEventsQuery, nil},
			{purgeQueuedEventsQuery, nil},
			{purgeAttemptsQuery, &res.Attempts},
			{purgeDeliveriesQuery, &res.Deliveries},
			{purgeEventsQuery, &res.Events},
		} {
			r, err := tx.ExecContext(ctx, del.query, string(ids))
			if err != nil {
				return err
			}
			if del.n == nil {
				continue
			}
			if *del.n, err = r.RowsAffected(); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return store.PurgeResult{}, fmt.Errorf("purge events: %w", err)
	}
	return res, nil
}
