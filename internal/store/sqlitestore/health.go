package sqlitestore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/heraldhooks/herald"
	"github.com/heraldhooks/herald/internal/store"
)

// healthRecord is how an endpoint's health is kept in endpoints.health:
// JSON with times as unix microseconds and durations as nanoseconds, like
// the rest of the schema. SuccessRate1h and Attempts1h are not kept; they
// are computed from the attempts on request.
type healthRecord struct {
	BreakerState        string `json:"breaker_state"`
	ConsecutiveFailures int    `json:"consecutive_failures,omitempty"`
	FailingSince        *int64 `json:"failing_since,omitempty"`
	FailingNotified     bool   `json:"failing_notified,omitempty"`
	LastSuccessAt       *int64 `json:"last_success_at,omitempty"`
	LastFailureAt       *int64 `json:"last_failure_at,omitempty"`
	ProbeAt             *int64 `json:"probe_at,omitempty"`
	CooldownNS          int64  `json:"cooldown_ns,omitempty"`
	PausedUntil         *int64 `json:"paused_until,omitempty"`
	// RateFactor is always written: 0 would read as "not throttled".
	RateFactor float64 `json:"rate_factor"`
}

func microsPtr(t *time.Time) *int64 {
	if t == nil {
		return nil
	}
	v := micros(*t)
	return &v
}

func timePtr(us *int64) *time.Time {
	if us == nil {
		return nil
	}
	t := fromMicros(*us)
	return &t
}

// encodeHealth is the stored form of h.
func encodeHealth(h *herald.EndpointHealth) string {
	b, err := json.Marshal(healthRecord{
		BreakerState:        string(h.BreakerState),
		ConsecutiveFailures: h.ConsecutiveFailures,
		FailingSince:        microsPtr(h.FailingSince),
		FailingNotified:     h.FailingNotified,
		LastSuccessAt:       microsPtr(h.LastSuccessAt),
		LastFailureAt:       microsPtr(h.LastFailureAt),
		ProbeAt:             microsPtr(h.ProbeAt),
		CooldownNS:          int64(h.Cooldown),
		PausedUntil:         microsPtr(h.PausedUntil),
		RateFactor:          h.RateFactor,
	})
	if err != nil {
		// A struct of numbers, strings and bools always encodes.
		panic("sqlitestore: encode health: " + err.Error())
	}
	return string(b)
}

// decodeHealth reads a stored health.
func decodeHealth(raw string) (herald.EndpointHealth, error) {
	var r healthRecord
	if err := json.Unmarshal([]byte(raw), &r); err != nil {
		return herald.EndpointHealth{}, err
	}
	h := herald.EndpointHealth{
		BreakerState:        herald.BreakerState(r.BreakerState),
		ConsecutiveFailures: r.ConsecutiveFailures,
		FailingSince:        timePtr(r.FailingSince),
		FailingNotified:     r.FailingNotified,
		LastSuccessAt:       timePtr(r.LastSuccessAt),
		LastFailureAt:       timePtr(r.LastFailureAt),
		ProbeAt:             timePtr(r.ProbeAt),
		Cooldown:            time.Duration(r.CooldownNS),
		PausedUntil:         timePtr(r.PausedUntil),
		RateFactor:          r.RateFactor,
	}
	return h.Normalized(), nil
}

// writeHealthQuery stores an endpoint's health and, in step with it, its
// blocked_until.
const writeHealthQuery = `UPDATE endpoints SET health = ?, blocked_until = ? WHERE id = ?`

// writeHealth runs writeHealthQuery through stmt, bound to the caller's
// transaction.
func writeHealth(ctx context.Context, stmt *sql.Stmt, id string, h *herald.EndpointHealth) error {
	_, err := stmt.ExecContext(ctx, encodeHealth(h), nullMicros(h.BlockedUntil()), id)
	if err != nil {
		return fmt.Errorf("write health of endpoint %s: %w", id, err)
	}
	return nil
}

// EndpointHealthGet returns the endpoint's stored health with Attempts1h
// and SuccessRate1h (the share of 2xx answers) over the attempts made in
// (Now - 1h, Now].
func (s *Store) EndpointHealthGet(ctx context.Context, p *store.EndpointHealthGetParams) (*herald.EndpointHealth, error) {
	t := now(p.Now)
	// One read transaction: the health and the counts agree.
	tx, err := s.reader.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, fmt.Errorf("get health of endpoint %s: %w", p.ID, err)
	}
	defer tx.Rollback()

	var raw string
	err = tx.QueryRowContext(ctx, `SELECT health FROM endpoints WHERE id = ? AND deleted_at IS NULL`, p.ID).Scan(&raw)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("get health of endpoint %s: %w", p.ID, store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get health of endpoint %s: %w", p.ID, err)
	}
	h, err := decodeHealth(raw)
	if err != nil {
		return nil, fmt.Errorf("get health of endpoint %s: decode: %w", p.ID, err)
	}
	var c store.EndpointCounts
	if err := tx.QueryRowContext(ctx, `SELECT count(*), coalesce(sum(status_code BETWEEN 200 AND 299), 0)
		FROM attempts WHERE endpoint_id = ? AND attempted_at > ? AND attempted_at <= ?`,
		p.ID, micros(t.Add(-time.Hour)), micros(t)).Scan(&c.Attempts, &c.Successes); err != nil {
		return nil, fmt.Errorf("get health of endpoint %s: count attempts: %w", p.ID, err)
	}
	c.FillRecent(&h)
	return &h, nil
}

// figuresQuery reads the figures of the endpoints named in ?1 (a JSON
// array of ids) at ?2 (now) for Store.EndpointFigures. Each figure is a
// range of an index, stopped at ?3 entries (store.FigureLimit):
// attempts_endpoint_status (counted from the index alone), and the
// partial indexes deliveries_in_flight, deliveries_endpoint_queue (one
// range for new deliveries, one for retries) and deliveries_dead, so an
// endpoint's delivered history is never walked.
var figuresQuery = `SELECT e.id, e.health,
	(SELECT json_array(count(*), coalesce(sum(x.ok), 0)) FROM
		(SELECT a.status_code BETWEEN 200 AND 299 AS ok FROM attempts a INDEXED BY attempts_endpoint_status
			WHERE a.endpoint_id = e.id AND a.attempted_at > ?2 - 3600000000 AND a.attempted_at <= ?2
			ORDER BY a.attempted_at DESC LIMIT ?3) AS x),
	(SELECT count(*) FROM (SELECT 1 FROM deliveries d INDEXED BY deliveries_in_flight
		WHERE d.endpoint_id = e.id AND d.status = 'delivering' AND d.due_at > ?2 LIMIT ?3)),
	(SELECT count(*) FROM (SELECT 1 FROM deliveries d INDEXED BY deliveries_endpoint_queue
		WHERE d.endpoint_id = e.id AND d.status IN ` + liveStatuses + ` AND (d.attempt_count > 0) = 0
			AND d.due_at <= ?2 LIMIT ?3)),
	(SELECT count(*) FROM (SELECT 1 FROM deliveries d INDEXED BY deliveries_endpoint_queue
		WHERE d.endpoint_id = e.id AND d.status IN ` + liveStatuses + ` AND (d.attempt_count > 0) = 1
			AND d.due_at <= ?2 LIMIT ?3)),
	(SELECT count(*) FROM (SELECT 1 FROM deliveries d INDEXED BY deliveries_dead
		WHERE d.endpoint_id = e.id AND d.status = 'dead' LIMIT ?3))
	FROM endpoints e
	WHERE e.id IN (SELECT value FROM json_each(?1)) AND e.deleted_at IS NULL`

// EndpointFigures reads the health and queue figures of the endpoints
// p.IDs names, in one statement (figuresQuery), so they are of one moment.
func (s *Store) EndpointFigures(ctx context.Context, p *store.EndpointFiguresParams) (map[string]*herald.EndpointHealth, error) {
	out := make(map[string]*herald.EndpointHealth, len(p.IDs))
	if len(p.IDs) == 0 {
		return out, nil
	}
	if err := p.Check(); err != nil {
		return nil, fmt.Errorf("endpoint figures: %w", err)
	}
	ids, err := json.Marshal(p.IDs)
	if err != nil {
		return nil, fmt.Errorf("endpoint figures: %w", err)
	}
	limit := p.CountLimit()
	rows, err := s.reader.QueryContext(ctx, figuresQuery, string(ids), micros(now(p.Now)), limit)
	if err != nil {
		return nil, fmt.Errorf("endpoint figures: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id, raw, attempts string
		var inFlight, dueNew, dueRetries, dead int
		if err := rows.Scan(&id, &raw, &attempts, &inFlight, &dueNew, &dueRetries, &dead); err != nil {
			return nil, fmt.Errorf("endpoint figures: %w", err)
		}
		h, err := decodeHealth(raw)
		if err != nil {
			return nil, fmt.Errorf("endpoint figures of %s: decode health: %w", id, err)
		}
		var counts [2]int
		if err := json.Unmarshal([]byte(attempts), &counts); err != nil {
			return nil, fmt.Errorf("endpoint figures of %s: attempts: %w", id, err)
		}
		store.EndpointCounts{Attempts: counts[0], Successes: counts[1],
			InFlight: inFlight, Due: dueNew + dueRetries, Dead: dead}.Fill(&h, limit)
		out[id] = &h
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("endpoint figures: %w", err)
	}
	return out, nil
}
