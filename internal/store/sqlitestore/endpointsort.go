package sqlitestore

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/heraldhooks/herald"
	"github.com/heraldhooks/herald/internal/store"
)

// The ranked endpoint orders (store.RankEndpoints): the queries of
// store.EndpointRanker, each a range of an index of 0015_endpoint_sorts.sql
// (or of the primary key, skipping the few ranked endpoints).

// ranker answers store.EndpointRanker through the reader.
type ranker struct{ s *Store }

var _ store.EndpointLister = ranker{}

// EndpointsSorted lists limit+1 endpoints of p's column order
// (endpointListQuery).
func (r ranker) EndpointsSorted(ctx context.Context, p *store.EndpointListParams, limit int) ([]*herald.Endpoint, error) {
	query, args, err := endpointListQuery(p, limit)
	if err != nil {
		return nil, err
	}
	return r.s.queryEndpoints(ctx, query, args...)
}

// EndpointsByID reads the endpoints ids names, deleted ones left out.
func (r ranker) EndpointsByID(ctx context.Context, ids []string) ([]*herald.Endpoint, error) {
	list, err := json.Marshal(ids)
	if err != nil {
		return nil, err
	}
	return r.s.queryEndpoints(ctx, `SELECT `+endpointColumns+` FROM endpoints
		WHERE id IN (SELECT value FROM json_each(?)) AND deleted_at IS NULL`, string(list))
}

// query is a query being built and its arguments.
type query struct {
	sql  strings.Builder
	args []any
}

// add appends text and its arguments.
func (q *query) add(text string, args ...any) *query {
	q.sql.WriteString(text)
	q.args = append(q.args, args...)
	return q
}

// consumer adds the consumer filter on col, if any.
func (q *query) consumer(col, consumer string) *query {
	if consumer != "" {
		q.add(" AND "+col+" = ?", consumer)
	}
	return q
}

// idAfter adds a walk by id after after ("": from the first), in its
// direction, and the order and limit.
func (q *query) idAfter(after string, desc bool, n int) *query {
	cmp, dir := ">", "ASC"
	if desc {
		cmp, dir = "<", "DESC"
	}
	if after != "" {
		q.add(" AND e.id "+cmp+" ?", after)
	}
	return q.add(" ORDER BY e.id "+dir+" LIMIT ?", n)
}

// ranks runs q for (id, value) rows.
func (r ranker) ranks(ctx context.Context, q *query) ([]store.Rank, error) {
	rows, err := r.s.reader.QueryContext(ctx, q.sql.String(), q.args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []store.Rank
	for rows.Next() {
		var rk store.Rank
		if err := rows.Scan(&rk.ID, &rk.Value); err != nil {
			return nil, err
		}
		out = append(out, rk)
	}
	return out, rows.Err()
}

// ids runs q for id rows.
func (r ranker) ids(ctx context.Context, q *query) ([]string, error) {
	rows, err := r.s.reader.QueryContext(ctx, q.sql.String(), q.args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		out = append(out, id)
	}
	return out, rows.Err()
}

// deadHeadQuery is DeadHead's: a backward range of endpoint_dead_rank, or
// of endpoint_dead_consumer within a consumer.
func deadHeadQuery(consumer string, after *store.Rank, n int) *query {
	q := &query{}
	q.add(`SELECT d.endpoint_id, d.dead FROM endpoint_dead d JOIN endpoints e ON e.id = d.endpoint_id
		WHERE d.dead > 0 AND e.deleted_at IS NULL`).consumer("d.consumer_id", consumer)
	if after != nil {
		q.add(" AND (d.dead, d.endpoint_id) < (?, ?)", after.Value, after.ID)
	}
	return q.add(" ORDER BY d.dead DESC, d.endpoint_id DESC LIMIT ?", n)
}

// DeadHead lists the endpoints with dead deliveries, most first.
func (r ranker) DeadHead(ctx context.Context, p *store.RankQuery) ([]store.Rank, error) {
	rs, err := r.ranks(ctx, deadHeadQuery(p.Consumer, p.After, p.Limit))
	if err != nil {
		return nil, fmt.Errorf("rank by dead: %w", err)
	}
	return rs, nil
}

// deadRestQuery is DeadRest's: the primary key (or endpoints_consumer)
// backwards, skipping the endpoints with a count.
func deadRestQuery(consumer, before string, n int) *query {
	q := &query{}
	q.add(`SELECT e.id FROM endpoints e
		WHERE e.deleted_at IS NULL
			AND NOT EXISTS (SELECT 1 FROM endpoint_dead d WHERE d.endpoint_id = e.id AND d.dead > 0)`).
		consumer("e.consumer_id", consumer)
	return q.idAfter(before, true, n)
}

// DeadRest lists the endpoints with no dead delivery, newest first.
func (r ranker) DeadRest(ctx context.Context, p *store.RankQuery) ([]string, error) {
	ids, err := r.ids(ctx, deadRestQuery(p.Consumer, p.From, p.Limit))
	if err != nil {
		return nil, fmt.Errorf("rank by dead: %w", err)
	}
	return ids, nil
}

// dueNowCond is true when the endpoint of the queue row q has a delivery
// due at ?1: a probe of deliveries_endpoint_queue for a new delivery, then
// one for a retry, as the figures count them.
const dueNowCond = `(EXISTS (SELECT 1 FROM deliveries x INDEXED BY deliveries_endpoint_queue
		WHERE x.endpoint_id = q.endpoint_id AND x.status IN ` + liveStatuses + `
			AND (x.attempt_count > 0) = 0 AND x.due_at <= ?1)
	OR EXISTS (SELECT 1 FROM deliveries x INDEXED BY deliveries_endpoint_queue
		WHERE x.endpoint_id = q.endpoint_id AND x.status IN ` + liveStatuses + `
			AND (x.attempt_count > 0) = 1 AND x.due_at <= ?1))`

// dueHeadQuery is DueHead's: a range of endpoint_queue_rank up to now,
// each mark checked by dueNowCond (a mark the tidy has not yet moved may
// name an endpoint whose work is done, or not yet due). The queue is the
// outer loop (CROSS JOIN) even within a consumer: its due marks are what
// needs attention, where the consumer's endpoints may be many.
func dueHeadQuery(consumer string, t time.Time, after *store.Rank, n int) *query {
	q := &query{}
	q.add(`SELECT q.endpoint_id, q.due_at FROM endpoint_queue q INDEXED BY endpoint_queue_rank
		CROSS JOIN endpoints e ON e.id = q.endpoint_id
		WHERE q.due_at <= ?1 AND e.deleted_at IS NULL AND `+dueNowCond, micros(t)).consumer("e.consumer_id", consumer)
	if after != nil {
		q.add(" AND (q.due_at, q.endpoint_id) > (?, ?)", after.Value, after.ID)
	}
	return q.add(" ORDER BY q.due_at, q.endpoint_id LIMIT ?", n)
}

// DueHead lists the endpoints with work due now, longest waiting first.
func (r ranker) DueHead(ctx context.Context, p *store.RankQuery) ([]store.Rank, error) {
	rs, err := r.ranks(ctx, dueHeadQuery(p.Consumer, now(p.Now), p.After, p.Limit))
	if err != nil {
		return nil, fmt.Errorf("rank by due: %w", err)
	}
	return rs, nil
}

// dueRestQuery is DueRest's: the primary key (or endpoints_consumer),
// skipping the endpoints DueHead lists.
func dueRestQuery(consumer string, t time.Time, after string, n int) *query {
	q := &query{}
	q.add(`SELECT e.id FROM endpoints e
		WHERE e.deleted_at IS NULL AND NOT EXISTS (SELECT 1 FROM endpoint_queue q
			WHERE q.endpoint_id = e.id AND q.due_at <= ?1 AND `+dueNowCond+`)`, micros(t)).
		consumer("e.consumer_id", consumer)
	return q.idAfter(after, false, n)
}

// DueRest lists the endpoints with nothing due now, oldest first.
func (r ranker) DueRest(ctx context.Context, p *store.RankQuery) ([]string, error) {
	ids, err := r.ids(ctx, dueRestQuery(p.Consumer, now(p.Now), p.From, p.Limit))
	if err != nil {
		return nil, fmt.Errorf("rank by due: %w", err)
	}
	return ids, nil
}

// healthZeroQuery is HealthZero's: a range of endpoints_unwell, or of
// endpoints_consumer_unwell within a consumer (whose condition it
// repeats, so that SQLite sees the index fits).
func healthZeroQuery(consumer, after string, desc bool, n int) *query {
	index := "endpoints_unwell"
	if consumer != "" {
		index = "endpoints_consumer_unwell"
	}
	q := &query{}
	q.add(`SELECT e.id FROM endpoints e INDEXED BY `+index+`
		WHERE e.deleted_at IS NULL AND (e.enabled = 0 OR e.breaker_state <> 'closed')
			AND (e.enabled = 0 OR e.breaker_state = 'open')`).consumer("e.consumer_id", consumer)
	return q.idAfter(after, desc, n)
}

// HealthZero lists the endpoints scoring 0 by their state, by id.
func (r ranker) HealthZero(ctx context.Context, p *store.RankQuery) ([]string, error) {
	ids, err := r.ids(ctx, healthZeroQuery(p.Consumer, p.From, p.Desc, p.Limit))
	if err != nil {
		return nil, fmt.Errorf("rank by health: %w", err)
	}
	return ids, nil
}

// healthFailingQuery is HealthFailing's: the half-open endpoints from
// endpoints_unwell and those failed within the hour from a range of
// endpoints_failed, read from those indexes alone (no endpoint's row), each
// with its last hour's attempts counted as figuresQuery counts them (the
// newest store.FigureLimit).
func healthFailingQuery(consumer string, t time.Time) *query {
	q := &query{}
	q.add(`SELECT c.id, c.breaker_state,
			(SELECT json_array(count(*), coalesce(sum(x.ok), 0)) FROM
				(SELECT a.status_code BETWEEN 200 AND 299 AS ok FROM attempts a INDEXED BY attempts_endpoint_status
					WHERE a.endpoint_id = c.id AND a.attempted_at > ?1 - 3600000000 AND a.attempted_at <= ?1
					ORDER BY a.attempted_at DESC LIMIT ?2) AS x)
		FROM (
			SELECT id, breaker_state FROM endpoints INDEXED BY endpoints_unwell
			WHERE deleted_at IS NULL AND (enabled = 0 OR breaker_state <> 'closed')
				AND enabled = 1 AND breaker_state = 'half_open'`, micros(t), store.FigureLimit).
		consumer("consumer_id", consumer).
		add(`
			UNION
			SELECT id, breaker_state FROM endpoints INDEXED BY endpoints_failed
			WHERE deleted_at IS NULL AND last_failure_at IS NOT NULL AND last_failure_at > ?1 - 3600000000
				AND enabled = 1 AND breaker_state <> 'open'`).
		consumer("consumer_id", consumer)
	return q.add(`) AS c`)
}

// HealthFailing lists the failing endpoints with their last hour's figures.
func (r ranker) HealthFailing(ctx context.Context, p *store.RankQuery) ([]store.FailingEndpoint, error) {
	q := healthFailingQuery(p.Consumer, now(p.Now))
	rows, err := r.s.reader.QueryContext(ctx, q.sql.String(), q.args...)
	if err != nil {
		return nil, fmt.Errorf("rank by health: %w", err)
	}
	defer rows.Close()
	var out []store.FailingEndpoint
	for rows.Next() {
		var f store.FailingEndpoint
		var state string
		var counts sql.NullString
		if err := rows.Scan(&f.ID, &state, &counts); err != nil {
			return nil, fmt.Errorf("rank by health: %w", err)
		}
		var attempts, successes int
		if _, err := fmt.Sscanf(counts.String, "[%d,%d]", &attempts, &successes); err != nil {
			return nil, fmt.Errorf("rank by health: counts of %s: %w", f.ID, err)
		}
		f.BreakerState, f.Attempts1h, f.Successes1h = herald.BreakerState(state), attempts, successes
		out = append(out, f)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("rank by health: %w", err)
	}
	return out, nil
}

// healthRestQuery is HealthRest's: the primary key (or
// endpoints_consumer), skipping the few endpoints ranked before.
func healthRestQuery(consumer string, t time.Time, after string, desc bool, n int) *query {
	q := &query{}
	q.add(`SELECT e.id FROM endpoints e
		WHERE e.deleted_at IS NULL AND e.enabled = 1 AND e.breaker_state = 'closed'
			AND (e.last_failure_at IS NULL OR e.last_failure_at <= ?1 - 3600000000)`, micros(t)).
		consumer("e.consumer_id", consumer)
	return q.idAfter(after, desc, n)
}

// HealthRest lists the endpoints that failed nothing within the hour, by id.
func (r ranker) HealthRest(ctx context.Context, p *store.RankQuery) ([]string, error) {
	ids, err := r.ids(ctx, healthRestQuery(p.Consumer, now(p.Now), p.From, p.Desc, p.Limit))
	if err != nil {
		return nil, fmt.Errorf("rank by health: %w", err)
	}
	return ids, nil
}
