package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/heraldhooks/herald"
	"github.com/heraldhooks/herald/internal/breaker"
	"github.com/heraldhooks/herald/internal/store"
)

// DeliveryCompleteMany logs each outcome's attempt and applies the outcome
// where the delivery is still delivering under its lease token; each
// applied outcome then updates its endpoint's health (breaker.Observe),
// disables the endpoint when that calls for it, and emits the
// notifications it deserves, all in one transaction. Outcomes are taken in
// the order given, each seeing the health the ones before it left.
func (s *Store) DeliveryCompleteMany(ctx context.Context, p *store.DeliveryCompleteManyParams) ([]bool, error) {
	t := now(p.Now)
	applied := make([]bool, len(p.Outcomes))
	if err := store.CheckOutcomes(p.Outcomes); err != nil {
		return nil, fmt.Errorf("complete deliveries: %w", err)
	}
	st, err := s.prepared(ctx)
	if err != nil {
		return nil, fmt.Errorf("complete deliveries: %w", err)
	}
	created := false
	var emitted []herald.Notification
	// It rides the next ingest group if calls wait for one (groupcommit.go).
	err = s.writeOutcome(ctx, func(tx *sql.Tx) error {
		c := newCompleter(ctx, tx, st, t)
		var err error
		for i := range p.Outcomes {
			if applied[i], err = c.complete(&p.Outcomes[i]); err != nil {
				return err
			}
		}
		if created, err = c.finish(); err != nil {
			return err
		}
		emitted = c.batch.Notifications
		// The batch's activity, one row write for the whole call.
		return addActivity(ctx, tx, t, store.OutcomeActivity(p.Outcomes, applied))
	})
	if err != nil {
		return nil, fmt.Errorf("complete deliveries: %w", err)
	}
	if p.Notify != nil {
		for _, n := range emitted {
			p.Notify(n)
		}
	}
	if created || store.RetriesSoon(p.Outcomes, applied) {
		s.notify()
	}
	return applied, nil
}

// The statements of an outcome, in the order they run.
const (
	// logAttemptQuery logs an attempt against its delivery, when there is
	// one, whether or not the outcome then applies.
	logAttemptQuery = `INSERT INTO attempts
		(id, delivery_id, endpoint_id, number, attempted_at, duration_ns, status_code, response, error)
		SELECT ?, id, endpoint_id, ?, ?, ?, ?, ?, ? FROM deliveries WHERE id = ?`
	// applyQuery is fenced by the lease token (invariant 10): a stale
	// outcome changes nothing and returns no row.
	applyQuery = `UPDATE deliveries SET
			status = ?, attempt_count = attempt_count + 1, due_at = ?, last_status_code = ?,
			last_error = ?, dead_reason = ?, delivered_at = ?, updated_at = ?
		WHERE id = ? AND status = 'delivering' AND lease_token = ?
		RETURNING attempt_count, endpoint_id, event_id, event_type, consumer_id`
	// healthTargetQuery reads what the breaker and the notifications need
	// of an endpoint.
	healthTargetQuery = `SELECT id, consumer_id, url, enabled, auto_disable_after_failures,
			auto_disable_after_ns, health
		FROM endpoints WHERE id = ? AND deleted_at IS NULL`
	// windowQuery counts the breaker window: the endpoint's attempts over
	// [from, to] and how many of them failed (anything but a 2xx, no
	// answer too), from attempts_endpoint_status alone.
	windowQuery = `SELECT count(*), coalesce(sum(status_code NOT BETWEEN 200 AND 299), 0)
		FROM attempts WHERE endpoint_id = ? AND attempted_at >= ? AND attempted_at <= ?`
)

// completer applies the outcomes of one DeliveryCompleteMany call.
type completer struct {
	ctx context.Context
	tx  *sql.Tx
	st  *statements
	t   time.Time
	cfg breaker.Config

	// The call's statements, bound to its transaction.
	logAttempt, apply, window, healthTarget, writeHealth *sql.Stmt
	// endpoints are those the outcomes reach, by id, as batch leaves
	// them.
	endpoints map[string]*herald.Endpoint
	// batch decides what the outcomes do to their endpoints; finish
	// writes it once every outcome is applied.
	batch *store.OutcomeBatch
}

func newCompleter(ctx context.Context, tx *sql.Tx, st *statements, t time.Time) *completer {
	cfg := breaker.Default()
	return &completer{
		ctx: ctx, tx: tx, st: st, t: t, cfg: cfg,
		logAttempt:   tx.StmtContext(ctx, st.logAttempt),
		apply:        tx.StmtContext(ctx, st.apply),
		window:       tx.StmtContext(ctx, st.window),
		healthTarget: tx.StmtContext(ctx, st.healthTarget),
		writeHealth:  tx.StmtContext(ctx, st.writeHealth),
		endpoints:    map[string]*herald.Endpoint{},
		batch:        store.NewOutcomeBatch(cfg, t),
	}
}

// complete logs o's attempt and applies o if its lease still holds, with
// what follows for the endpoint; it reports whether o was applied.
func (c *completer) complete(o *store.DeliveryOutcome) (bool, error) {
	ctx, t := c.ctx, c.t
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
	res, err := c.logAttempt.ExecContext(ctx, a.ID, a.Number,
		micros(a.AttemptedAt), int64(a.Duration), a.StatusCode, resp, a.Error, o.DeliveryID)
	if err != nil {
		return false, fmt.Errorf("log attempt of %s: %w", o.DeliveryID, err)
	}
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		return false, err // no delivery to log the attempt against: nothing applies
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
	var (
		attemptCount                               int
		endpointID, eventID, eventType, consumerID string
	)
	err = c.apply.QueryRowContext(ctx, string(o.Status), due, a.StatusCode, a.Error, deadReason,
		deliveredAt, micros(t), o.DeliveryID, o.LeaseToken).Scan(&attemptCount, &endpointID, &eventID, &eventType, &consumerID)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil // stale: the lease was lost (invariant 10)
	}
	if err != nil {
		return false, fmt.Errorf("apply outcome of %s: %w", o.DeliveryID, err)
	}

	ep, err := c.endpoint(endpointID)
	if errors.Is(err, store.ErrNotFound) {
		return true, nil // deleted: it has no health to keep
	}
	if err != nil {
		return true, err
	}
	if !c.batch.Observes(endpointID) {
		return true, nil // disabled by an earlier outcome of this call
	}
	var w breaker.Window
	if c.batch.NeedsWindow(ep, o) {
		if err := c.window.QueryRowContext(ctx, endpointID, micros(t.Add(-c.cfg.Window)), micros(t)).
			Scan(&w.Attempts, &w.Failures); err != nil {
			return true, fmt.Errorf("count attempts of endpoint %s: %w", endpointID, err)
		}
	}
	c.batch.Observe(ep, o, store.DeliveryFacts{EventID: eventID, EventType: eventType,
		ConsumerID: consumerID, AttemptCount: attemptCount}, w)
	return true, nil
}

// endpoint reads an endpoint once per call; later outcomes see the health
// the earlier ones left.
func (c *completer) endpoint(id string) (*herald.Endpoint, error) {
	if ep, ok := c.endpoints[id]; ok {
		return ep, nil
	}
	ep := &herald.Endpoint{}
	var (
		afterNS int64
		health  string
	)
	err := c.healthTarget.QueryRowContext(c.ctx, id).Scan(&ep.ID, &ep.ConsumerID, &ep.URL,
		&ep.Enabled, &ep.AutoDisableAfterFailures, &afterNS, &health)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, store.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("read endpoint %s: %w", id, err)
	}
	ep.AutoDisableAfter = time.Duration(afterNS)
	if ep.Health, err = decodeHealth(health); err != nil {
		return nil, fmt.Errorf("decode endpoint %s health: %w", id, err)
	}
	c.endpoints[id] = ep
	return ep, nil
}

// finish writes the health of every endpoint the outcomes touched,
// disables those the outcomes disabled (their live deliveries, one an
// outcome has just put back to pending included, go dead), and ingests the
// notifications last, so that an endpoint this call disabled receives none.
// It reports whether deliveries were made.
func (c *completer) finish() (bool, error) {
	for _, ep := range c.batch.HealthWrites() {
		if err := writeHealth(c.ctx, c.writeHealth, ep.ID, &ep.Health); err != nil {
			return false, err
		}
	}
	for _, d := range c.batch.Disable {
		if err := setEnabled(c.ctx, c.tx, d.ID, false, d.Reason, c.t); err != nil && !errors.Is(err, store.ErrNotFound) {
			return false, fmt.Errorf("disable endpoint %s: %w", d.ID, err)
		}
	}
	if len(c.batch.Notifications) == 0 {
		return false, nil
	}
	seq := newSeqCounter(c.ctx, c.tx, c.st)
	_, out, err := ingest(c.ctx, c.tx, c.st, seq, store.NotificationItems(c.batch.Notifications), c.t, nil)
	if err == nil {
		err = seq.save(c.ctx)
	}
	if err != nil {
		return false, fmt.Errorf("ingest notifications: %w", err)
	}
	return out.queued, nil
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
