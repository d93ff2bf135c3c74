package sqlitestore

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"time"

	"github.com/heraldhooks/herald"
	"github.com/heraldhooks/herald/internal/store"
)

// countLossesQuery counts one more lost lease (migration 0026) of each
// delivery in a JSON array of ids, and returns the counts. It is not
// among the prepared statements: only a claim that takes a delivery from
// an expired lease runs it.
const countLossesQuery = `UPDATE deliveries SET lease_losses = lease_losses + 1
	WHERE id IN (SELECT value FROM json_each(?))
	RETURNING id, lease_losses`

// countLeaseLosses counts a lost lease for each of the claimed rows taken
// from an expired lease (Redelivered) and sets their losses: one
// statement for the claim when there are such rows, none otherwise.
func countLeaseLosses(ctx context.Context, tx *sql.Tx, rows []*claimedRow) error {
	var lost []string
	byID := map[string]*claimedRow{}
	for _, r := range rows {
		if r.c.Redelivered {
			lost = append(lost, r.c.Delivery.ID)
			byID[r.c.Delivery.ID] = r
		}
	}
	if len(lost) == 0 {
		return nil
	}
	arg, err := json.Marshal(lost)
	if err != nil {
		return fmt.Errorf("count lost leases: %w", err)
	}
	res, err := tx.QueryContext(ctx, countLossesQuery, string(arg))
	if err != nil {
		return fmt.Errorf("count lost leases: %w", err)
	}
	defer res.Close()
	for res.Next() {
		var id string
		var n int
		if err := res.Scan(&id, &n); err != nil {
			return fmt.Errorf("count lost leases: %w", err)
		}
		if r := byID[id]; r != nil {
			r.losses = n
			r.c.LeaseLosses = n
		}
	}
	return res.Err()
}

// endLeaseLostQuery ends dead (lease_lost) a delivery a claim has just
// leased under the token given but may not hand out
// (store.LeaseLossesEnd). The triggers on deliveries keep the endpoint
// queue and the dead count, as for any delivery that ends. Arguments:
// now, delivery id, lease token.
const endLeaseLostQuery = `UPDATE deliveries SET status = 'dead', dead_reason = 'lease_lost', due_at = NULL, updated_at = ?
	WHERE id = ? AND status = 'delivering' AND lease_token = ?`

// splitLeaseLost parts what a claim leased into the deliveries it hands
// out and those whose lost leases reached limit (store.LeaseLossesEnd),
// which it ends instead. Those are taken out of their targets too, which
// then do not count them as started (their token buckets and probes). In
// the common case (no lease lost) it allocates nothing.
func splitLeaseLost(rows []*claimedRow, limit int, targets []*claimTarget) (kept, ended []*claimedRow) {
	n := 0
	for _, r := range rows {
		if r.c.Redelivered && store.LeaseLossesEnd(r.losses, limit) {
			ended = append(ended, r)
			continue
		}
		rows[n] = r
		n++
	}
	if len(ended) == 0 {
		return rows, nil
	}
	for _, tg := range targets {
		m := 0
		for _, r := range tg.taken {
			if !(r.c.Redelivered && store.LeaseLossesEnd(r.losses, limit)) {
				tg.taken[m] = r
				m++
			}
		}
		tg.taken = tg.taken[:m]
	}
	return rows[:n], ended
}

// endLeaseLost ends the deliveries a claim may not hand out dead
// (lease_lost), in the claim's transaction tx, and ingests their
// herald.delivery.dead notifications (store.LeaseLostNotification),
// which it returns. It runs only when a claim finds such deliveries.
func endLeaseLost(ctx context.Context, tx *sql.Tx, st *statements, ended []*claimedRow, t time.Time) ([]herald.Notification, error) {
	var notes []herald.Notification
	for _, r := range ended {
		res, err := tx.ExecContext(ctx, endLeaseLostQuery, micros(t), r.c.Delivery.ID, r.c.LeaseToken)
		if err != nil {
			return nil, fmt.Errorf("end delivery %s whose leases were lost: %w", r.c.Delivery.ID, err)
		}
		if n, err := res.RowsAffected(); err != nil {
			return nil, err
		} else if n == 0 {
			continue
		}
		if note, ok := store.LeaseLostNotification(&r.c.Delivery, &r.c.Event); ok {
			notes = append(notes, note)
		}
	}
	if len(notes) == 0 {
		return nil, nil
	}
	seq := newSeqCounter(ctx, tx, st)
	_, _, err := ingest(ctx, tx, st, seq, store.NotificationItems(notes), t, nil)
	if err == nil {
		err = seq.save(ctx)
	}
	if err != nil {
		return nil, fmt.Errorf("ingest notifications: %w", err)
	}
	return notes, nil
}
