package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/heraldhooks/herald"
	"github.com/heraldhooks/herald/internal/store"
)

// deliveryColumns are read by deliveryDest, in this order.
const deliveryColumns = `id, event_id, endpoint_id, consumer_id, event_type, status, attempt_count,
	due_at, last_status_code, last_error, dead_reason, created_at, updated_at, delivered_at`

// liveStatuses and terminalStatuses, as SQL lists.
const (
	liveStatuses     = `('pending', 'delivering')`
	terminalStatuses = `('delivered', 'dead', 'cancelled')`
)

// deliveryDest returns scan destinations for deliveryColumns and a function
// that finishes d once scanned.
func deliveryDest(d *herald.Delivery) ([]any, func()) {
	var (
		status, deadReason   string
		due, deliveredAt     sql.NullInt64
		createdAt, updatedAt int64
	)
	return []any{
			&d.ID, &d.EventID, &d.EndpointID, &d.ConsumerID, &d.EventType, &status, &d.AttemptCount,
			&due, &d.LastStatusCode, &d.LastError, &deadReason, &createdAt, &updatedAt, &deliveredAt,
		}, func() {
			d.Status = herald.Status(status)
			d.DeadReason = herald.DeadReason(deadReason)
			d.NextAttemptAt = nil
			if d.Status == herald.StatusPending {
				// For delivering rows due_at is the lease expiry, not a
				// next attempt.
				d.NextAttemptAt = fromNullMicros(due)
			}
			d.CreatedAt = fromMicros(createdAt)
			d.UpdatedAt = fromMicros(updatedAt)
			d.DeliveredAt = fromNullMicros(deliveredAt)
		}
}

// scanDelivery reads one row of deliveryColumns.
func scanDelivery(sc scanner) (*herald.Delivery, error) {
	d := &herald.Delivery{}
	dest, finish := deliveryDest(d)
	if err := sc.Scan(dest...); err != nil {
		return nil, err
	}
	finish()
	return d, nil
}

// getDelivery reads a delivery through q, or store.ErrNotFound.
func getDelivery(ctx context.Context, q interface {
	QueryRowContext(context.Context, string, ...any) *sql.Row
}, id string) (*herald.Delivery, error) {
	d, err := scanDelivery(q.QueryRowContext(ctx, `SELECT `+deliveryColumns+` FROM deliveries WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, store.ErrNotFound
	}
	return d, err
}

// DeliveryGet returns the delivery, or store.ErrNotFound.
func (s *Store) DeliveryGet(ctx context.Context, id string) (*herald.Delivery, error) {
	d, err := getDelivery(ctx, s.reader, id)
	if err != nil {
		return nil, fmt.Errorf("get delivery %s: %w", id, err)
	}
	return d, nil
}

// DeliveryList lists deliveries newest first.
func (s *Store) DeliveryList(ctx context.Context, p *store.DeliveryListParams) (*store.Page[*herald.Delivery], error) {
	limit := store.ClampLimit(p.Limit)
	query, args := deliveryListQuery(p, limit)
	rows, err := s.reader.QueryContext(ctx, query, args...)
	items, err := collect(rows, err, scanDelivery)
	if err != nil {
		return nil, fmt.Errorf("list deliveries: %w", err)
	}
	return store.NewPage(items, limit, func(d *herald.Delivery) string { return d.ID }), nil
}

// deliveryListQuery is DeliveryList's query, newest first, limit+1 rows.
// With an endpoint it reads that endpoint's listing, never the
// status index: SQLite would otherwise walk every dead delivery of every
// endpoint in id order (the order asked) for the few of one, 166 ms with
// 150,000 dead among 10 million. Its dead deliveries come from the
// partial index that holds dead rows only, sorted (as many as its
// dead-letter queue holds), its others from its own deliveries in id
// order, listed or not (listing.newestFirst); a consumer's likewise.
func deliveryListQuery(p *store.DeliveryListParams, limit int) (string, []any) {
	w := &where{}
	deadOfEndpoint := p.EndpointID != "" && p.Status == herald.StatusDead
	switch {
	case deadOfEndpoint:
		// A literal: SQLite uses a partial index only for a query whose
		// terms imply the index's own.
		w.add("status = 'dead'")
	case p.Status != "":
		w.add("status = ?", string(p.Status))
	}
	if p.EndpointID != "" {
		w.add("endpoint_id = ?", p.EndpointID)
	}
	if p.ConsumerID != "" {
		w.add("consumer_id = ?", p.ConsumerID)
	}
	if p.EventID != "" {
		w.add("event_id = ?", p.EventID)
	}
	if p.EventType != "" {
		w.add("event_type = ?", p.EventType)
	}
	from := " FROM deliveries"
	switch {
	case deadOfEndpoint:
		from += " INDEXED BY deliveries_dead"
	case p.EventID != "":
		// An event's few deliveries: deliveries_event.
	case p.EndpointID != "":
		return deliveriesOfEndpoint.newestFirst(deliveryColumns, p.EndpointID, w, p.Cursor, limit+1)
	case p.ConsumerID != "":
		return deliveriesOfConsumer.newestFirst(deliveryColumns, p.ConsumerID, w, p.Cursor, limit+1)
	}
	if p.Cursor != "" {
		w.add("id < ?", p.Cursor)
	}
	return `SELECT ` + deliveryColumns + from + w.String() + ` ORDER BY id DESC LIMIT ?`, append(w.args, limit+1)
}

// replaySet is the SET of a replay: pending, due now, a fresh budget and
// no lease lost (store.LeaseLossesEnd).
const replaySet = `status = 'pending', attempt_count = 0, lease_losses = 0, due_at = ?, dead_reason = '',
	delivered_at = NULL, updated_at = ?`

// replayPacedSet is replaySet with the due time spread out: arguments now,
// the rate, now; r.n numbers the deliveries, the n-th due
// store.ReplayDelay after now (floor(n * 10^6 / rate) microseconds: the
// CAST truncates, and the quotient is not negative).
const replayPacedSet = `status = 'pending', attempt_count = 0, lease_losses = 0, due_at = ? + CAST(r.n * 1e6 / ? AS INTEGER),
	dead_reason = '', delivered_at = NULL, updated_at = ?`

// replayableEndpoint holds for deliveries whose endpoint can take them.
const replayableEndpoint = `endpoint_id IN (SELECT id FROM endpoints WHERE enabled = 1 AND deleted_at IS NULL)`

// DeliveryReplay brings one terminal delivery back to pending, due now,
// with a fresh attempt budget; live ones and those of a disabled or deleted
// endpoint give store.ErrConflict.
func (s *Store) DeliveryReplay(ctx context.Context, p *store.DeliveryReplayParams) (*herald.Delivery, error) {
	t := now(p.Now)
	var out *herald.Delivery
	err := s.write(ctx, func(tx *sql.Tx) error {
		var (
			status  string
			enabled bool
		)
		err := tx.QueryRowContext(ctx, `SELECT d.status, e.enabled = 1 AND e.deleted_at IS NULL
			FROM deliveries d JOIN endpoints e ON e.id = d.endpoint_id WHERE d.id = ?`, p.ID).Scan(&status, &enabled)
		if errors.Is(err, sql.ErrNoRows) {
			return store.ErrNotFound
		}
		if err != nil {
			return err
		}
		if err := store.CheckReplay(herald.Status(status), enabled); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE deliveries SET `+replaySet+` WHERE id = ?`, micros(t), micros(t), p.ID); err != nil {
			return err
		}
		out, err = getDelivery(ctx, tx, p.ID)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("replay delivery %s: %w", p.ID, err)
	}
	s.notify()
	return out, nil
}

// DeliveryReplayMany replays every terminal delivery of p.EventID or
// p.EndpointID that matches the filter and whose endpoint is enabled. With
// p.DryRun it only counts them; with p.Rate > 0 the i-th of them (in
// creation order) is due i/Rate seconds after Now.
func (s *Store) DeliveryReplayMany(ctx context.Context, p *store.DeliveryReplayManyParams) (int, error) {
	if err := store.CheckReplayMany(p); err != nil {
		return 0, fmt.Errorf("replay deliveries: %w", err)
	}
	t := now(p.Now)
	w := &where{}
	w.add("status IN " + terminalStatuses)
	w.add(replayableEndpoint)
	if p.Status != "" {
		w.add("status = ?", string(p.Status))
	}
	if p.EventID != "" {
		w.add("event_id = ?", p.EventID)
	}
	// An endpoint's deliveries (without an event) are its rows listed or
	// not (listing.ownedRows), looked up by rowid: NOT INDEXED keeps SQLite from
	// walking the status index, every terminal delivery, instead.
	table := "deliveries"
	if p.EndpointID != "" && p.EventID == "" {
		w.add(deliveriesOfEndpoint.ownedRows(), p.EndpointID, p.EndpointID)
		table = "deliveries NOT INDEXED"
	} else if p.EndpointID != "" {
		w.add("endpoint_id = ?", p.EndpointID)
	}
	if !p.Since.IsZero() {
		w.add("created_at >= ?", micros(p.Since))
	}
	if !p.Until.IsZero() {
		w.add("created_at < ?", micros(p.Until))
	}
	if p.DryRun {
		var n int
		if err := s.reader.QueryRowContext(ctx, `SELECT count(*) FROM `+table+w.String(), w.args...).Scan(&n); err != nil {
			return 0, fmt.Errorf("count deliveries to replay: %w", err)
		}
		return n, nil
	}
	var n int64
	err := s.write(ctx, func(tx *sql.Tx) error {
		var (
			res sql.Result
			err error
		)
		if p.Rate > 0 {
			// The i-th (from 0) is due store.ReplayDelay after Now.
			res, err = tx.ExecContext(ctx, `UPDATE deliveries SET `+replayPacedSet+`
				FROM (SELECT id, row_number() OVER (ORDER BY created_at, seq) - 1 AS n
					FROM `+table+w.String()+`) AS r
				WHERE deliveries.id = r.id`,
				append([]any{micros(t), p.Rate, micros(t)}, w.args...)...)
		} else {
			res, err = tx.ExecContext(ctx, `UPDATE `+table+` SET `+replaySet+w.String(),
				append([]any{micros(t), micros(t)}, w.args...)...)
		}
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("replay deliveries: %w", err)
	}
	if n > 0 {
		s.notify()
	}
	return int(n), nil
}

// DeliveryCancel cancels a pending or delivering delivery; a terminal one
// gives store.ErrConflict.
func (s *Store) DeliveryCancel(ctx context.Context, p *store.DeliveryCancelParams) (*herald.Delivery, error) {
	t := now(p.Now)
	var out *herald.Delivery
	err := s.write(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE deliveries SET status = 'cancelled', due_at = NULL, updated_at = ?
			WHERE id = ? AND status IN `+liveStatuses, micros(t), p.ID)
		if err := oneRow(res, err); errors.Is(err, store.ErrNotFound) {
			d, err := getDelivery(ctx, tx, p.ID)
			if err != nil {
				return err
			}
			return fmt.Errorf("delivery is %s: %w", d.Status, store.ErrConflict)
		} else if err != nil {
			return err
		}
		out, err = getDelivery(ctx, tx, p.ID)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("cancel delivery %s: %w", p.ID, err)
	}
	return out, nil
}
