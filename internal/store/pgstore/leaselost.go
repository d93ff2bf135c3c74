package pgstore

import (
	"context"
	"fmt"
	"time"

	"github.com/heraldhooks/herald"
	"github.com/heraldhooks/herald/internal/store"
)

// endLeaseLostSQL ends dead (lease_lost) the deliveries $1 a claim has
// just leased under the tokens $2 (still its own: the claim holds their
// rows) but may not hand out (store.LeaseLossesEnd). It runs with
// herald.claim_queues off (claimQueuesOffSQL), so that the triggers on
// updates of deliveries drop their delivery queue rows and count them
// dead, as they do for any other writer that ends a delivery.
const endLeaseLostSQL = `
UPDATE deliveries d SET status = 'dead', dead_reason = 'lease_lost', due_at = NULL,
	updated_at = coalesce($3::timestamptz, now())
FROM unnest($1::text[], $2::bigint[]) AS l(id, token)
WHERE d.id = l.id AND d.status = 'delivering' AND d.lease_token = l.token
RETURNING d.id`

// claimQueuesOffSQL gives the delivery queue back to the triggers for the
// rest of a claim's transaction (claimQueuesSQL turned it on).
const claimQueuesOffSQL = "SELECT set_config('herald.claim_queues', 'off', true)"

// splitLeaseLost parts what a claim leased into the deliveries it hands
// out and those whose lost leases reached limit (store.LeaseLossesEnd),
// which it ends instead. Those no longer count as started to their
// endpoints (cands), whose token buckets and probes are written back
// afterwards. In the common case (no lease lost) it allocates nothing.
func splitLeaseLost(all []claimed, limit int, cands []*candidate) (kept, ended []claimed) {
	n := 0
	for _, cl := range all {
		if cl.c.Redelivered && store.LeaseLossesEnd(cl.losses, limit) {
			ended = append(ended, cl)
			for _, c := range cands {
				if c.ep.ID == cl.c.Delivery.EndpointID {
					c.got--
				}
			}
			continue
		}
		all[n] = cl
		n++
	}
	return all[:n], ended
}

// endLeaseLost ends the deliveries a claim may not hand out dead
// (lease_lost), in the claim's transaction tx, and ingests their
// herald.delivery.dead notifications (store.LeaseLostNotification),
// which it returns. It runs only when a claim finds such deliveries: a
// claim of deliveries whose leases hold costs nothing more.
func (s *Store) endLeaseLost(ctx context.Context, tx queryer, ended []claimed, now time.Time) ([]herald.Notification, error) {
	ids := make([]string, len(ended))
	tokens := make([]int64, len(ended))
	for i, cl := range ended {
		ids[i], tokens[i] = cl.c.Delivery.ID, cl.c.LeaseToken
	}
	if _, err := tx.Exec(ctx, claimQueuesOffSQL); err != nil {
		return nil, fmt.Errorf("end deliveries whose leases were lost: %w", err)
	}
	rows, err := tx.Query(ctx, endLeaseLostSQL, ids, tokens, nowArg(now))
	if err != nil {
		return nil, fmt.Errorf("end deliveries whose leases were lost: %w", err)
	}
	done := map[string]bool{}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return nil, fmt.Errorf("end deliveries whose leases were lost: %w", err)
		}
		done[id] = true
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("end deliveries whose leases were lost: %w", err)
	}
	var notes []herald.Notification
	for _, cl := range ended {
		if !done[cl.c.Delivery.ID] {
			continue
		}
		if n, ok := store.LeaseLostNotification(&cl.c.Delivery, &cl.c.Event); ok {
			notes = append(notes, n)
		}
	}
	if len(notes) > 0 {
		if _, err := s.ingest(ctx, tx, store.NotificationItems(notes), now); err != nil {
			return nil, fmt.Errorf("ingest notifications: %w", err)
		}
	}
	return notes, nil
}
