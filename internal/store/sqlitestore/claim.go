package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/heraldhooks/herald"
	"github.com/heraldhooks/herald/internal/store"
)

// claimQuery picks the due deliveries of enabled endpoints, oldest due
// first, with their event and endpoint. It walks the partial index
// deliveries_due in (due_at, id) order and stops at the limit, so a backlog
// of deliveries that are not due yet costs nothing; INDEXED BY keeps the
// planner from preferring the status index and sorting the whole backlog.
var claimQuery = `SELECT ` + prefixed("d", deliveryColumns) + `, ` +
	prefixed("ev", eventColumns) + `, ` + prefixed("e", endpointColumns) + `
	FROM deliveries d INDEXED BY deliveries_due
	JOIN endpoints e ON e.id = d.endpoint_id
	JOIN events ev ON ev.id = d.event_id
	WHERE d.status IN ` + liveStatuses + ` AND d.due_at <= ? AND e.enabled = 1 AND e.deleted_at IS NULL
	ORDER BY d.due_at, d.id
	LIMIT ?`

// DeliveryClaim leases up to p.Limit due deliveries: pending and due, or
// delivering with an expired lease. All of it happens in one write
// transaction, and SQLite has one writer, so no two claims overlap.
func (s *Store) DeliveryClaim(ctx context.Context, p *store.DeliveryClaimParams) ([]*store.ClaimedDelivery, error) {
	if p.Limit <= 0 {
		return nil, nil
	}
	t := now(p.Now)
	var out []*store.ClaimedDelivery
	err := s.write(ctx, func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, claimQuery, micros(t), p.Limit)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			c := &store.ClaimedDelivery{}
			dd, finishD := deliveryDest(&c.Delivery)
			de, finishEv := eventDest(&c.Event)
			dp, finishEp := endpointDest(&c.Endpoint)
			dest := append(append(dd, de...), dp...)
			if err := rows.Scan(dest...); err != nil {
				return err
			}
			finishD()
			finishEv()
			if err := finishEp(); err != nil {
				return err
			}
			out = append(out, c)
		}
		if err := rows.Err(); err != nil {
			return err
		}
		rows.Close()

		lease, err := tx.PrepareContext(ctx, `UPDATE deliveries
			SET status = 'delivering', lease_token = lease_token + 1, due_at = ?, updated_at = ?
			WHERE id = ? RETURNING lease_token`)
		if err != nil {
			return err
		}
		defer lease.Close()
		for _, c := range out {
			c.LeaseExpiresAt = t.Add(2*c.Endpoint.Timeout + p.LeaseMargin).Truncate(time.Microsecond)
			if err := lease.QueryRowContext(ctx, micros(c.LeaseExpiresAt), micros(t), c.Delivery.ID).Scan(&c.LeaseToken); err != nil {
				return err
			}
			c.Delivery.Status = herald.StatusDelivering
			c.Delivery.NextAttemptAt = nil
			c.Delivery.UpdatedAt = t
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("claim deliveries: %w", err)
	}
	return out, nil
}

// DeliveryCompleteMany logs each outcome's attempt and applies the outcome
// where the delivery is still delivering under its lease token, all in one
// transaction.
func (s *Store) DeliveryCompleteMany(ctx context.Context, p *store.DeliveryCompleteManyParams) ([]bool, error) {
	t := now(p.Now)
	applied := make([]bool, len(p.Outcomes))
	for i, o := range p.Outcomes {
		switch o.Status {
		case herald.StatusDelivered, herald.StatusPending, herald.StatusDead:
		default:
			return nil, fmt.Errorf("complete deliveries: outcome %d of %s: status %q is not delivered, pending or dead", i, o.DeliveryID, o.Status)
		}
	}
	err := s.write(ctx, func(tx *sql.Tx) error {
		lookup, err := tx.PrepareContext(ctx, `SELECT endpoint_id, status, lease_token FROM deliveries WHERE id = ?`)
		if err != nil {
			return err
		}
		defer lookup.Close()
		logAttempt, err := tx.PrepareContext(ctx, `INSERT INTO attempts
			(id, delivery_id, endpoint_id, number, attempted_at, duration_ns, status_code, response, error)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`)
		if err != nil {
			return err
		}
		defer logAttempt.Close()
		apply, err := tx.PrepareContext(ctx, `UPDATE deliveries SET
				status = ?, attempt_count = attempt_count + 1, due_at = ?, last_status_code = ?,
				last_error = ?, dead_reason = ?, delivered_at = ?, updated_at = ?
			WHERE id = ? AND status = 'delivering' AND lease_token = ?`)
		if err != nil {
			return err
		}
		defer apply.Close()

		for i, o := range p.Outcomes {
			var (
				endpointID, status string
				token              int64
			)
			err := lookup.QueryRowContext(ctx, o.DeliveryID).Scan(&endpointID, &status, &token)
			if errors.Is(err, sql.ErrNoRows) {
				// No delivery to log the attempt against: nothing applies.
				continue
			}
			if err != nil {
				return err
			}

			a := o.Attempt
			if a.ID == "" {
				a.ID = herald.NewID(herald.PrefixAttempt, t)
			}
			if a.AttemptedAt.IsZero() {
				a.AttemptedAt = t
			}
			resp := a.Response
			if resp == nil {
				resp = []byte{}
			}
			if _, err := logAttempt.ExecContext(ctx, a.ID, o.DeliveryID, endpointID, a.Number,
				micros(a.AttemptedAt), int64(a.Duration), a.StatusCode, resp, a.Error); err != nil {
				return fmt.Errorf("log attempt of %s: %w", o.DeliveryID, err)
			}

			if status != string(herald.StatusDelivering) || token != o.LeaseToken {
				continue // stale: the lease was lost (invariant 10)
			}
			var (
				due, deliveredAt sql.NullInt64
				deadReason       string
			)
			switch o.Status {
			case herald.StatusPending:
				due = sql.NullInt64{Int64: micros(t.Add(o.RetryIn)), Valid: true}
			case herald.StatusDelivered:
				deliveredAt = sql.NullInt64{Int64: micros(t), Valid: true}
			case herald.StatusDead:
				deadReason = string(o.DeadReason)
			}
			res, err := apply.ExecContext(ctx, string(o.Status), due, a.StatusCode, a.Error, deadReason,
				deliveredAt, micros(t), o.DeliveryID, o.LeaseToken)
			if err != nil {
				return fmt.Errorf("apply outcome of %s: %w", o.DeliveryID, err)
			}
			if n, err := res.RowsAffected(); err != nil {
				return err
			} else if n == 0 {
				continue
			}
			applied[i] = true
			if o.DisableEndpoint != "" {
				if err := setEnabled(ctx, tx, endpointID, false, o.DisableEndpoint, t); err != nil && !errors.Is(err, store.ErrNotFound) {
					return fmt.Errorf("disable endpoint %s: %w", endpointID, err)
				}
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("complete deliveries: %w", err)
	}
	return applied, nil
}

// DeliveryRelease puts leased deliveries back to pending, due now, without
// spending an attempt; leases no longer held are skipped.
func (s *Store) DeliveryRelease(ctx context.Context, p *store.DeliveryReleaseParams) error {
	if len(p.Leases) == 0 {
		return nil
	}
	t := now(p.Now)
	released := false
	err := s.write(ctx, func(tx *sql.Tx) error {
		stmt, err := tx.PrepareContext(ctx, `UPDATE deliveries SET status = 'pending', due_at = ?, updated_at = ?
			WHERE id = ? AND status = 'delivering' AND lease_token = ?`)
		if err != nil {
			return err
		}
		defer stmt.Close()
		for _, l := range p.Leases {
			res, err := stmt.ExecContext(ctx, micros(t), micros(t), l.DeliveryID, l.LeaseToken)
			if err != nil {
				return fmt.Errorf("release %s: %w", l.DeliveryID, err)
			}
			if n, err := res.RowsAffected(); err != nil {
				return err
			} else if n > 0 {
				released = true
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("release deliveries: %w", err)
	}
	if released {
		s.notify()
	}
	return nil
}
