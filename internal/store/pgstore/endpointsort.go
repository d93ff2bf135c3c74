package pgstore

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/heraldhooks/herald"
	"github.com/heraldhooks/herald/internal/store"
)

// The ranked endpoint orders (store.RankEndpoints): the queries of
// store.EndpointRanker, each a range of an index of 0015_endpoint_sorts.sql
// (or of the primary key, skipping the few ranked endpoints).

// ranker answers store.EndpointRanker through the pool.
type ranker struct{ s *Store }

var _ store.EndpointLister = ranker{}

// EndpointsSorted lists limit+1 endpoints of p's column order
// (endpointListQuery).
func (r ranker) EndpointsSorted(ctx context.Context, p *store.EndpointListParams, limit int) ([]*herald.Endpoint, error) {
	q, args, err := endpointListQuery(p, limit)
	if err != nil {
		return nil, err
	}
	return r.s.queryEndpoints(ctx, q, args...)
}

// EndpointsByID reads the endpoints ids names.
func (r ranker) EndpointsByID(ctx context.Context, ids []string) ([]*herald.Endpoint, error) {
	return r.s.queryEndpoints(ctx, "SELECT "+endpointCols+" FROM endpoints WHERE id = ANY($1::text[])", ids)
}

// args collects the positional arguments of a query.
type args []any

// add appends v and returns its placeholder.
func (a *args) add(v any) string {
	*a = append(*a, v)
	return "$" + strconv.Itoa(len(*a))
}

// consumerCond is the condition on col for the consumer filter, or "".
func (a *args) consumerCond(col, consumer string) string {
	if consumer == "" {
		return ""
	}
	return " AND " + col + " = " + a.add(consumer)
}

// collectRanks reads (id, value) rows.
func collectRanks(rows pgx.Rows, err error) ([]store.Rank, error) {
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (store.Rank, error) {
		var r store.Rank
		err := row.Scan(&r.ID, &r.Value)
		return r, err
	})
}

// collectIDs reads id rows.
func collectIDs(rows pgx.Rows, err error) ([]string, error) {
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// deadHeadSQL gives the query of DeadHead: a backward range of
// endpoint_dead_rank_idx, or of endpoint_dead_consumer_idx within a
// consumer.
func deadHeadSQL(consumer string, after *store.Rank, n int) (string, args) {
	var a args
	q := `SELECT d.endpoint_id, d.dead FROM endpoint_dead d JOIN endpoints e ON e.id = d.endpoint_id
		WHERE d.dead > 0` + a.consumerCond("d.consumer_id", consumer)
	if after != nil {
		q += " AND (d.dead, d.endpoint_id) < (" + a.add(after.Value) + "::bigint, " + a.add(after.ID) + ")"
	}
	return q + " ORDER BY d.dead DESC, d.endpoint_id DESC LIMIT " + a.add(n), a
}

// DeadHead lists the endpoints with dead deliveries, most first.
func (r ranker) DeadHead(ctx context.Context, p *store.RankQuery) ([]store.Rank, error) {
	q, a := deadHeadSQL(p.Consumer, p.After, p.Limit)
	rs, err := collectRanks(r.s.pool.Query(ctx, q, a...))
	if err != nil {
		return nil, fmt.Errorf("rank by dead: %w", err)
	}
	return rs, nil
}

// deadRestSQL gives the query of DeadRest: the primary key (or
// endpoints_consumer_idx) backwards, skipping the endpoints with a count.
func deadRestSQL(consumer, before string, n int) (string, args) {
	var a args
	q := `SELECT e.id FROM endpoints e
		WHERE NOT EXISTS (SELECT 1 FROM endpoint_dead d WHERE d.endpoint_id = e.id AND d.dead > 0)` +
		a.consumerCond("e.consumer_id", consumer)
	if before != "" {
		q += " AND e.id < " + a.add(before)
	}
	return q + " ORDER BY e.id DESC LIMIT " + a.add(n), a
}

// DeadRest lists the endpoints with no dead delivery, newest first.
func (r ranker) DeadRest(ctx context.Context, p *store.RankQuery) ([]string, error) {
	q, a := deadRestSQL(p.Consumer, p.From, p.Limit)
	ids, err := collectIDs(r.s.pool.Query(ctx, q, a...))
	if err != nil {
		return nil, fmt.Errorf("rank by dead: %w", err)
	}
	return ids, nil
}

// dueNowSQL is true when the endpoint aliased q has a delivery due at $1
// (or the database clock): a probe of delivery_queue_claim_idx for a new
// delivery, then one for a retry, as the figures count them.
const dueNowSQL = `(EXISTS (SELECT 1 FROM delivery_queue x
		WHERE x.endpoint_id = q.endpoint_id AND x.kind = 0
			AND x.due_at <= coalesce($1::timestamptz, now()))
	OR EXISTS (SELECT 1 FROM delivery_queue x
		WHERE x.endpoint_id = q.endpoint_id AND x.kind = 1
			AND x.due_at <= coalesce($1::timestamptz, now())))`

// dueHeadSQL gives the query of DueHead: a range of
// endpoint_queue_rank_idx up to now, each mark checked by dueNowSQL (a
// mark the tidy has not yet moved may name an endpoint whose work is
// done, or not yet due).
func dueHeadSQL(consumer string, now time.Time, after *store.Rank, n int) (string, args) {
	a := args{nowArg(now)}
	q := `SELECT q.endpoint_id, (extract(epoch FROM q.due_at) * 1000000)::bigint
		FROM endpoint_queue q JOIN endpoints e ON e.id = q.endpoint_id
		WHERE q.due_at <= coalesce($1::timestamptz, now())` + a.consumerCond("e.consumer_id", consumer)
	if after != nil {
		q += " AND (q.due_at, q.endpoint_id) > (" + a.add(time.UnixMicro(after.Value)) + "::timestamptz, " + a.add(after.ID) + ")"
	}
	return q + " AND " + dueNowSQL + " ORDER BY q.due_at, q.endpoint_id LIMIT " + a.add(n), a
}

// DueHead lists the endpoints with work due now, longest waiting first.
func (r ranker) DueHead(ctx context.Context, p *store.RankQuery) ([]store.Rank, error) {
	q, a := dueHeadSQL(p.Consumer, p.Now, p.After, p.Limit)
	rs, err := collectRanks(r.s.pool.Query(ctx, q, a...))
	if err != nil {
		return nil, fmt.Errorf("rank by due: %w", err)
	}
	return rs, nil
}

// dueRestSQL gives the query of DueRest: the primary key (or
// endpoints_consumer_idx), skipping the endpoints DueHead lists.
func dueRestSQL(consumer string, now time.Time, after string, n int) (string, args) {
	a := args{nowArg(now)}
	q := `SELECT e.id FROM endpoints e
		WHERE NOT EXISTS (SELECT 1 FROM endpoint_queue q
			WHERE q.endpoint_id = e.id AND q.due_at <= coalesce($1::timestamptz, now()) AND ` + dueNowSQL + `)` +
		a.consumerCond("e.consumer_id", consumer)
	if after != "" {
		q += " AND e.id > " + a.add(after)
	}
	return q + " ORDER BY e.id LIMIT " + a.add(n), a
}

// DueRest lists the endpoints with nothing due now, oldest first.
func (r ranker) DueRest(ctx context.Context, p *store.RankQuery) ([]string, error) {
	q, a := dueRestSQL(p.Consumer, p.Now, p.From, p.Limit)
	ids, err := collectIDs(r.s.pool.Query(ctx, q, a...))
	if err != nil {
		return nil, fmt.Errorf("rank by due: %w", err)
	}
	return ids, nil
}

// idAfter is the condition of a walk by id after after, in its direction,
// and the direction.
func (a *args) idAfter(after string, desc bool) (cond, dir string) {
	cmp, dir := ">", "ASC"
	if desc {
		cmp, dir = "<", "DESC"
	}
	if after != "" {
		cond = " AND e.id " + cmp + " " + a.add(after)
	}
	return cond, dir
}

// healthZeroSQL gives the query of HealthZero: a range of
// endpoints_unwell_idx (whose condition it repeats, so the planner sees
// the index fits).
func healthZeroSQL(consumer, after string, desc bool, n int) (string, args) {
	var a args
	cond, dir := a.idAfter(after, desc)
	q := `SELECT e.id FROM endpoints e
		WHERE (NOT e.enabled OR e.breaker_state <> 'closed') AND (NOT e.enabled OR e.breaker_state = 'open')` +
		a.consumerCond("e.consumer_id", consumer) + cond
	return q + " ORDER BY e.id " + dir + " LIMIT " + a.add(n), a
}

// HealthZero lists the endpoints scoring 0 by their state, by id.
func (r ranker) HealthZero(ctx context.Context, p *store.RankQuery) ([]string, error) {
	q, a := healthZeroSQL(p.Consumer, p.From, p.Desc, p.Limit)
	ids, err := collectIDs(r.s.pool.Query(ctx, q, a...))
	if err != nil {
		return nil, fmt.Errorf("rank by health: %w", err)
	}
	return ids, nil
}

// healthFailingSQL gives the query of HealthFailing: the half-open
// endpoints from endpoints_unwell_idx and those failed within the hour
// from a range of endpoints_failed_idx, each with its last hour's attempts
// counted as figuresSQL counts them ($2, store.FigureLimit, the newest).
func healthFailingSQL(consumer string, now time.Time) (string, args) {
	a := args{nowArg(now), store.FigureLimit}
	q := `SELECT e.id, e.breaker_state, x.attempts, x.successes
		FROM endpoints e,
			LATERAL (
				SELECT count(*) AS attempts, count(*) FILTER (WHERE y.status_code BETWEEN 200 AND 299) AS successes
				FROM (SELECT status_code FROM attempts
					WHERE endpoint_id = e.id
						AND attempted_at > coalesce($1::timestamptz, now()) - interval '1 hour'
						AND attempted_at <= coalesce($1::timestamptz, now())
					ORDER BY attempted_at DESC LIMIT $2) AS y
			) AS x
		WHERE e.enabled AND e.breaker_state <> 'open'
			AND (((NOT e.enabled OR e.breaker_state <> 'closed') AND e.breaker_state = 'half_open')
				OR e.last_failure_at > coalesce($1::timestamptz, now()) - interval '1 hour')` +
		a.consumerCond("e.consumer_id", consumer)
	return q, a
}

// HealthFailing lists the failing endpoints with their last hour's figures.
func (r ranker) HealthFailing(ctx context.Context, p *store.RankQuery) ([]store.FailingEndpoint, error) {
	q, a := healthFailingSQL(p.Consumer, p.Now)
	rows, err := r.s.pool.Query(ctx, q, a...)
	if err != nil {
		return nil, fmt.Errorf("rank by health: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (store.FailingEndpoint, error) {
		var f store.FailingEndpoint
		var state string
		var attempts, successes int64
		err := row.Scan(&f.ID, &state, &attempts, &successes)
		f.BreakerState, f.Attempts1h, f.Successes1h = herald.BreakerState(state), int(attempts), int(successes)
		return f, err
	})
	if err != nil {
		return nil, fmt.Errorf("rank by health: %w", err)
	}
	return out, nil
}

// healthRestSQL gives the query of HealthRest: the primary key (or
// endpoints_consumer_idx), skipping the few endpoints ranked before.
func healthRestSQL(consumer string, now time.Time, after string, desc bool, n int) (string, args) {
	a := args{nowArg(now)}
	cond, dir := a.idAfter(after, desc)
	q := `SELECT e.id FROM endpoints e
		WHERE e.enabled AND e.breaker_state = 'closed'
			AND (e.last_failure_at IS NULL OR e.last_failure_at <= coalesce($1::timestamptz, now()) - interval '1 hour')` +
		a.consumerCond("e.consumer_id", consumer) + cond
	return q + " ORDER BY e.id " + dir + " LIMIT " + a.add(n), a
}

// HealthRest lists the endpoints that failed nothing within the hour, by id.
func (r ranker) HealthRest(ctx context.Context, p *store.RankQuery) ([]string, error) {
	q, a := healthRestSQL(p.Consumer, p.Now, p.From, p.Desc, p.Limit)
	ids, err := collectIDs(r.s.pool.Query(ctx, q, a...))
	if err != nil {
		return nil, fmt.Errorf("rank by health: %w", err)
	}
	return ids, nil
}
