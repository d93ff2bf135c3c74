package pgstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/jackc/pgx/v5"

	"github.com/heraldhooks/herald"
	"github.com/heraldhooks/herald/internal/store"
)

// scanDelivery reads one delivery from a query returning deliveryCols.
func scanDelivery(row pgx.Row) (*herald.Delivery, error) {
	var r deliveryRow
	if err := row.Scan(r.dest()...); err != nil {
		return nil, err
	}
	return r.delivery(), nil
}

// DeliveryGet returns one delivery, or store.ErrNotFound.
func (s *Store) DeliveryGet(ctx context.Context, id string) (*herald.Delivery, error) {
	d, err := scanDelivery(s.pool.QueryRow(ctx, "SELECT "+deliveryCols+" FROM deliveries WHERE id = $1", id))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("get delivery %s: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get delivery %s: %w", id, err)
	}
	return d, nil
}

// DeliveryList lists deliveries newest first, filtered by status,
// endpoint, consumer and event. No index of deliveries names the status
// (migration 0018): dead ones are listed from dead_deliveries and live
// ones from delivery_queue (deliveryListQuery), so a page of them never
// reads the history around them; delivered and cancelled ones are read
// from deliveries by id (or by endpoint, consumer or event) and filtered.
func (s *Store) DeliveryList(ctx context.Context, p *store.DeliveryListParams) (*store.Page[*herald.Delivery], error) {
	limit := store.ClampLimit(p.Limit)
	q, args := deliveryListQuery(p, limit)
	rows, err := s.pool.Query(ctx, q, args...)
	items, err := collect(rows, err, scanDelivery)
	if err != nil {
		return nil, fmt.Errorf("list deliveries: %w", err)
	}
	return store.NewPage(items, limit, func(d *herald.Delivery) string { return d.ID }), nil
}

// deliveryListQuery is DeliveryList's statement for a page of limit, and
// its arguments.
func deliveryListQuery(p *store.DeliveryListParams, limit int) (string, []any) {
	var where []string
	var args []any
	add := func(cond string, v any) {
		args = append(args, v)
		where = append(where, cond+" $"+strconv.Itoa(len(args)))
	}
	// from is where the rows come from; key qualifies the columns an
	// index of it orders or filters by (the id, the endpoint, the
	// consumer), and id is the id it is ordered by. A page of dead or live
	// deliveries walks dead_deliveries or delivery_queue from the newest
	// and reads each delivery by id (OFFSET 0 keeps that order of the
	// join: the planner could otherwise walk deliveries by id and filter
	// on status), unless an event is named: its few deliveries are read
	// through deliveries_event_idx.
	from, key, id := "deliveries d", "d", "d.id"
	side := map[herald.Status]string{herald.StatusDead: "dead_deliveries",
		herald.StatusPending: "delivery_queue", herald.StatusDelivering: "delivery_queue"}[p.Status]
	if side != "" && p.EventID == "" {
		from = side + " x CROSS JOIN LATERAL (SELECT * FROM deliveries WHERE id = x.delivery_id OFFSET 0) AS d"
		key, id = "x", "x.delivery_id"
	}
	if p.Status != "" {
		add("d.status =", string(p.Status))
	}
	if p.EndpointID != "" {
		add(key+".endpoint_id =", p.EndpointID)
	}
	if p.ConsumerID != "" {
		add(key+".consumer_id =", p.ConsumerID)
	}
	if p.EventID != "" {
		add("d.event_id =", p.EventID)
	}
	if p.EventType != "" {
		add("d.event_type =", p.EventType)
	}
	if p.Cursor != "" {
		add(id+" <", p.Cursor)
	}
	args = append(args, limit+1)
	return "SELECT " + qualify("d", deliveryCols) + " FROM " + from + whereClause(where) +
		" ORDER BY " + id + " DESC LIMIT $" + strconv.Itoa(len(args)), args
}

// replaySet is the assignment that brings a terminal delivery back:
// pending, due after wait (an interval expression) from now (the time
// parameter now, NULL for the database clock), with a fresh attempt
// budget and no lease lost (store.LeaseLossesEnd). The attempt log and
// the last status code and error stay.
func replaySet(now, wait string) string {
	t := "coalesce(" + now + "::timestamptz, now())"
	return "status = 'pending', attempt_count = 0, lease_losses = 0, due_at = " + t + " + " + wait +
		", dead_reason = '', delivered_at = NULL, updated_at = " + t
}

// DeliveryReplay brings one terminal delivery back to pending, due now,
// with a fresh attempt budget, and wakes the dispatchers. A live delivery
// gives store.ErrConflict, and so does one whose endpoint is disabled or
// deleted. The endpoint is share-locked first, so a concurrent disable
// either waits for the replay and then sends the delivery dead, or goes
// first and makes the replay fail.
func (s *Store) DeliveryReplay(ctx context.Context, p *store.DeliveryReplayParams) (*herald.Delivery, error) {
	var d *herald.Delivery
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		var endpointID string
		var status herald.Status
		err := tx.QueryRow(ctx, "SELECT endpoint_id, status FROM deliveries WHERE id = $1", p.ID).Scan(&endpointID, &status)
		if errors.Is(err, pgx.ErrNoRows) {
			return store.ErrNotFound
		}
		if err != nil {
			return err
		}
		var enabled bool // a deleted endpoint is not
		err = tx.QueryRow(ctx, "SELECT enabled FROM endpoints WHERE id = $1 FOR SHARE", endpointID).Scan(&enabled)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		if err := store.CheckReplay(status, enabled); err != nil {
			return err
		}
		d, err = scanDelivery(tx.QueryRow(ctx, `
			UPDATE deliveries SET `+replaySet("$2", "interval '0'")+`
			WHERE id = $1 AND status IN ('delivered', 'dead', 'cancelled')
			RETURNING `+deliveryCols,
			p.ID, nowArg(p.Now)))
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("delivery is not terminal: %w", store.ErrConflict)
		}
		if err != nil {
			return err
		}
		return s.notify(ctx, tx)
	})
	if err != nil {
		return nil, fmt.Errorf("replay delivery %s: %w", p.ID, err)
	}
	return d, nil
}

// DeliveryReplayMany replays every terminal delivery of an event or an
// endpoint that matches the filter and whose endpoint is enabled, and says
// how many it replayed. With p.DryRun it only counts them. With p.Rate > 0
// the i-th of them (from 0, ordered by creation, then ingest order) is due
// at now + i/Rate seconds, to the microsecond below.
func (s *Store) DeliveryReplayMany(ctx context.Context, p *store.DeliveryReplayManyParams) (int, error) {
	if err := store.CheckReplayMany(p); err != nil {
		return 0, fmt.Errorf("replay deliveries: %w", err)
	}
	var args []any
	where := []string{"status IN ('delivered', 'dead', 'cancelled')"}
	add := func(cond string, v any) {
		args = append(args, v)
		where = append(where, cond+" $"+strconv.Itoa(len(args)))
	}
	if p.EventID != "" {
		add("event_id =", p.EventID)
	}
	if p.EndpointID != "" {
		add("endpoint_id =", p.EndpointID)
	}
	if p.Status != "" {
		add("status =", string(p.Status))
	}
	if !p.Since.IsZero() {
		add("created_at >=", p.Since)
	}
	if !p.Until.IsZero() {
		add("created_at <", p.Until)
	}
	filter := whereClause(where)

	if p.DryRun {
		var n int64
		err := s.pool.QueryRow(ctx, `
			SELECT count(*) FROM deliveries`+filter+`
			AND endpoint_id IN (SELECT id FROM endpoints WHERE enabled)`, args...).Scan(&n)
		if err != nil {
			return 0, fmt.Errorf("replay deliveries: count: %w", err)
		}
		return int(n), nil
	}

	var n int64
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		// Share-lock the enabled endpoints first, as DeliveryReplay does.
		rows, err := tx.Query(ctx, `
			SELECT id FROM endpoints
			WHERE enabled AND id IN (SELECT endpoint_id FROM deliveries`+filter+`)
			ORDER BY id FOR SHARE`, args...)
		if err != nil {
			return err
		}
		endpoints, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return err
		}
		if len(endpoints) == 0 {
			return nil
		}
		nowParam := "$" + strconv.Itoa(len(args)+1)
		endpointsParam := "$" + strconv.Itoa(len(args)+2)
		rateParam := "$" + strconv.Itoa(len(args)+3)
		// The i-th replayed delivery waits store.ReplayDelay: floor(i *
		// 10^6 / rate) microseconds.
		wait := "CASE WHEN " + rateParam + "::float8 > 0" +
			" THEN floor(o.i * 1e6 / " + rateParam + "::float8)::bigint * interval '1 microsecond'" +
			" ELSE interval '0' END"
		tag, err := tx.Exec(ctx, `
			UPDATE deliveries d SET `+replaySet(nowParam, wait)+`
			FROM (
				SELECT id, row_number() OVER (ORDER BY created_at, seq) - 1 AS i
				FROM deliveries`+filter+` AND endpoint_id = ANY(`+endpointsParam+`)
			) AS o
			WHERE d.id = o.id AND d.status IN ('delivered', 'dead', 'cancelled')`,
			append(args, nowArg(p.Now), endpoints, p.Rate)...)
		if err != nil {
			return err
		}
		n = tag.RowsAffected()
		if n == 0 {
			return nil
		}
		return s.notify(ctx, tx)
	})
	if err != nil {
		return 0, fmt.Errorf("replay deliveries: %w", err)
	}
	return int(n), nil
}

// DeliveryCancel makes a live delivery cancelled; an attempt in flight then
// finds its lease gone. A terminal delivery gives store.ErrConflict.
func (s *Store) DeliveryCancel(ctx context.Context, p *store.DeliveryCancelParams) (*herald.Delivery, error) {
	d, err := scanDelivery(s.pool.QueryRow(ctx, `
		UPDATE deliveries
		SET status = 'cancelled', due_at = NULL, updated_at = coalesce($2::timestamptz, now())
		WHERE id = $1 AND status IN ('pending', 'delivering')
		RETURNING `+deliveryCols,
		p.ID, nowArg(p.Now)))
	if errors.Is(err, pgx.ErrNoRows) {
		var exists bool
		err = s.pool.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM deliveries WHERE id = $1)", p.ID).Scan(&exists)
		if err == nil && exists {
			err = fmt.Errorf("delivery is not live: %w", store.ErrConflict)
		} else if err == nil {
			err = store.ErrNotFound
		}
	}
	if err != nil {
		return nil, fmt.Errorf("cancel delivery %s: %w", p.ID, err)
	}
	return d, nil
}
