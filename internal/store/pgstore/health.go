package pgstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/heraldhooks/herald"
	"github.com/heraldhooks/herald/internal/store"
)

// healthDoc is how an endpoint's health is kept in its health column. The
// figures computed on request (SuccessRate1h, Attempts1h) are not kept.
// Times are kept to the microsecond, as every other time in the database,
// so the health and the blocked_until column beside it agree exactly.
type healthDoc struct {
	BreakerState        herald.BreakerState `json:"breaker_state"`
	ConsecutiveFailures int                 `json:"consecutive_failures,omitempty"`
	FailingSince        *time.Time          `json:"failing_since,omitempty"`
	FailingNotified     bool                `json:"failing_notified,omitempty"`
	LastSuccessAt       *time.Time          `json:"last_success_at,omitempty"`
	LastFailureAt       *time.Time          `json:"last_failure_at,omitempty"`
	ProbeAt             *time.Time          `json:"probe_at,omitempty"`
	CooldownNS          int64               `json:"cooldown_ns,omitempty"`
	PausedUntil         *time.Time          `json:"paused_until,omitempty"`
	RateFactor          float64             `json:"rate_factor"`
}

// microUTC is t in UTC truncated to the microsecond, or nil.
func microUTC(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC().Truncate(time.Microsecond)
	return &u
}

// normalHealth is h as the database keeps it: times to the microsecond,
// no figures computed on request, and the state of a fresh endpoint where
// h has none.
func normalHealth(h herald.EndpointHealth) herald.EndpointHealth {
	h = h.Normalized()
	h.FailingSince = microUTC(h.FailingSince)
	h.LastSuccessAt = microUTC(h.LastSuccessAt)
	h.LastFailureAt = microUTC(h.LastFailureAt)
	h.ProbeAt = microUTC(h.ProbeAt)
	h.PausedUntil = microUTC(h.PausedUntil)
	h.SuccessRate1h = nil
	h.Attempts1h = 0
	h.InFlight, h.Due, h.Dead = 0, 0, 0
	return h
}

// encodeHealth gives the health column's value for h, and the
// blocked_until that goes with it.
func encodeHealth(h herald.EndpointHealth) ([]byte, *time.Time) {
	h = normalHealth(h)
	b, err := json.Marshal(healthDoc{
		BreakerState:        h.BreakerState,
		ConsecutiveFailures: h.ConsecutiveFailures,
		FailingSince:        h.FailingSince,
		FailingNotified:     h.FailingNotified,
		LastSuccessAt:       h.LastSuccessAt,
		LastFailureAt:       h.LastFailureAt,
		ProbeAt:             h.ProbeAt,
		CooldownNS:          int64(h.Cooldown),
		PausedUntil:         h.PausedUntil,
		RateFactor:          h.RateFactor,
	})
	if err != nil {
		// A struct of strings, numbers and times always encodes.
		panic("pgstore: encode health: " + err.Error())
	}
	return b, h.BlockedUntil()
}

// decodeHealth reads a health column.
func decodeHealth(b []byte) (herald.EndpointHealth, error) {
	if len(b) == 0 {
		return herald.NewEndpointHealth(), nil
	}
	var d healthDoc
	if err := json.Unmarshal(b, &d); err != nil {
		return herald.EndpointHealth{}, err
	}
	return normalHealth(herald.EndpointHealth{
		BreakerState:        d.BreakerState,
		ConsecutiveFailures: d.ConsecutiveFailures,
		FailingSince:        d.FailingSince,
		FailingNotified:     d.FailingNotified,
		LastSuccessAt:       d.LastSuccessAt,
		LastFailureAt:       d.LastFailureAt,
		ProbeAt:             d.ProbeAt,
		Cooldown:            time.Duration(d.CooldownNS),
		PausedUntil:         d.PausedUntil,
		RateFactor:          d.RateFactor,
	}), nil
}

// EndpointHealthGet returns the endpoint's stored health with Attempts1h
// and SuccessRate1h: how many attempts the endpoint saw in the hour up to
// p.Now (attempted_at in (now - 1 h, now]) and the share of them answered
// with a 2xx, nil when there were none. A missing endpoint gives
// store.ErrNotFound.
func (s *Store) EndpointHealthGet(ctx context.Context, p *store.EndpointHealthGetParams) (*herald.EndpointHealth, error) {
	var raw []byte
	var attempts, successes int64
	err := s.pool.QueryRow(ctx, `
		SELECT e.health, a.attempts, a.successes
		FROM endpoints e,
			(SELECT coalesce($2::timestamptz, now()) AS t) AS n,
			LATERAL (
				SELECT count(*) AS attempts,
					count(*) FILTER (WHERE status_code BETWEEN 200 AND 299) AS successes
				FROM attempts
				WHERE endpoint_id = e.id
					AND attempted_at > n.t - interval '1 hour' AND attempted_at <= n.t
			) AS a
		WHERE e.id = $1`,
		p.ID, nowArg(p.Now)).Scan(&raw, &attempts, &successes)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("endpoint health %s: %w", p.ID, store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("endpoint health %s: %w", p.ID, err)
	}
	h, err := decodeHealth(raw)
	if err != nil {
		return nil, fmt.Errorf("endpoint health %s: %w", p.ID, err)
	}
	store.EndpointCounts{Attempts: int(attempts), Successes: int(successes)}.FillRecent(&h)
	return &h, nil
}

// figuresSQL reads the figures of the endpoints named in $1 at $2 (or the
// database clock) for Store.EndpointFigures. Each figure is a range of an
// index, stopped at $3 entries (store.FigureLimit): attempts_endpoint_idx
// (its INCLUDE holds the status code), delivery_queue_leased_idx,
// delivery_queue_claim_idx (one range for new deliveries, one for
// retries) and dead_deliveries_endpoint_idx, so an endpoint's delivered
// history is never walked.
const figuresSQL = `
	SELECT e.id, e.health, a.attempts, a.successes, f.in_flight, dn.n + dr.n, dd.n
	FROM endpoints e,
		(SELECT coalesce($2::timestamptz, now()) AS t) AS n,
		LATERAL (
			SELECT count(*) AS attempts, count(*) FILTER (WHERE x.status_code BETWEEN 200 AND 299) AS successes
			FROM (SELECT status_code FROM attempts
				WHERE endpoint_id = e.id AND attempted_at > n.t - interval '1 hour' AND attempted_at <= n.t
				ORDER BY attempted_at DESC LIMIT $3) AS x
		) AS a,
		LATERAL (
			SELECT count(*) AS in_flight FROM (SELECT 1 FROM delivery_queue
				WHERE endpoint_id = e.id AND leased AND due_at > n.t LIMIT $3) AS x
		) AS f,
		LATERAL (
			SELECT count(*) AS n FROM (SELECT 1 FROM delivery_queue
				WHERE endpoint_id = e.id AND kind = 0 AND due_at <= n.t LIMIT $3) AS x
		) AS dn,
		LATERAL (
			SELECT count(*) AS n FROM (SELECT 1 FROM delivery_queue
				WHERE endpoint_id = e.id AND kind = 1 AND due_at <= n.t LIMIT $3) AS x
		) AS dr,
		LATERAL (
			SELECT count(*) AS n FROM (SELECT 1 FROM dead_deliveries
				WHERE endpoint_id = e.id LIMIT $3) AS x
		) AS dd
	WHERE e.id = ANY($1::text[])`

// EndpointFigures reads the health and queue figures of the endpoints
// p.IDs names, in one statement (figuresSQL), so they are of one moment.
func (s *Store) EndpointFigures(ctx context.Context, p *store.EndpointFiguresParams) (map[string]*herald.EndpointHealth, error) {
	out := make(map[string]*herald.EndpointHealth, len(p.IDs))
	if len(p.IDs) == 0 {
		return out, nil
	}
	if err := p.Check(); err != nil {
		return nil, fmt.Errorf("endpoint figures: %w", err)
	}
	limit := p.CountLimit()
	rows, err := s.pool.Query(ctx, figuresSQL, p.IDs, nowArg(p.Now), limit)
	if err != nil {
		return nil, fmt.Errorf("endpoint figures: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		var raw []byte
		var attempts, successes, inFlight, due, dead int64
		if err := rows.Scan(&id, &raw, &attempts, &successes, &inFlight, &due, &dead); err != nil {
			return nil, fmt.Errorf("endpoint figures: %w", err)
		}
		h, err := decodeHealth(raw)
		if err != nil {
			return nil, fmt.Errorf("endpoint figures of %s: decode health: %w", id, err)
		}
		store.EndpointCounts{Attempts: int(attempts), Successes: int(successes),
			InFlight: int(inFlight), Due: int(due), Dead: int(dead)}.Fill(&h, limit)
		out[id] = &h
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("endpoint figures: %w", err)
	}
	return out, nil
}
