package store

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/heraldhooks/herald"
)

// The ranked endpoint orders (health, due, dead) go by figures that no
// column of endpoints holds, so no index of endpoints gives their order.
// Counting them for every endpoint would cost every endpoint (and, for
// due and dead, their deliveries) on every page. Instead each order puts
// first the endpoints that need attention, which are few, found through
// what the store keeps for them, and then the rest, in id order, from the
// primary key:
//
//   - dead: each backend keeps a count of dead deliveries per endpoint
//     (endpoint_dead, migration 0015), maintained by triggers wherever a
//     delivery enters or leaves dead. Its index on (dead, id) is the
//     order; endpoints with none follow, newest first.
//   - due: the endpoint queue (migration 0007) has a row per endpoint with
//     live work and a due mark no later than its earliest due delivery.
//     Marks due by now, of endpoints with a delivery due now, are walked
//     by the queue's (due_at, id) index, oldest first; the other
//     endpoints follow, oldest first.
//   - health: an endpoint that failed no attempt in the last hour, with a
//     closed breaker and enabled, scores 100 or has no score, and needs
//     no attention. The others are few: disabled or breaker open (score
//     0, a partial index, walked in id order), and half-open or failed
//     within the hour (an index on the last failure's time), each scored
//     as herald.HealthScore does from its last hour's attempts. They come
//     first, by score; the rest follow in id order.
//
// Each endpoint thus has a rank, a number, and an order is by (rank, id),
// ascending or descending, so a page's cursor (RankCursor) is the last
// rank and id, as stable as the sorts by a column. A page costs a range of
// an index, the endpoints failing within the hour, or the endpoints
// skipped in the rest's walk for being ranked (again the few that need
// attention): never every endpoint, nor any delivery but a probe of the
// due ones.

// Rank is an endpoint's place in a ranked order: ties by ID.
type Rank struct {
	ID    string
	Value int64
}

// The ranks that are not a figure.
const (
	// RankNoScore ranks, in the order by health, a failing endpoint with
	// no attempt in the last hour (a half-open breaker's), after the
	// scored ones (0-100).
	RankNoScore = 101
	// RankHealthy ranks, in the order by health, every endpoint that
	// failed no attempt in the last hour (enabled, breaker closed).
	RankHealthy = 102
	// RankNotDue ranks, in the order by due, every endpoint with nothing
	// due now.
	RankNotDue = math.MaxInt64
)

// Ranked reports whether s goes by a figure rather than a column: the
// orders by health, due and dead, which a backend lists with
// RankEndpoints.
func (s EndpointSort) Ranked() bool {
	key, _ := s.Key()
	return key == "health" || key == "due" || key == "dead"
}

// RankCursor is the cursor of a ranked order after r.
func RankCursor(r Rank) string {
	return SortCursor(strconv.FormatInt(r.Value, 10), r.ID)
}

// ParseRankCursor reads a RankCursor; ok is false when c is not one.
func ParseRankCursor(c string) (r Rank, ok bool) {
	k, id, ok := ParseSortCursor(c)
	if !ok {
		return Rank{}, false
	}
	v, err := strconv.ParseInt(k, 10, 64)
	if err != nil || strconv.FormatInt(v, 10) != k {
		return Rank{}, false
	}
	return Rank{ID: id, Value: v}, true
}

// FailingEndpoint is an enabled endpoint whose breaker is half-open, or
// closed with a failed attempt in the last hour, with that hour's figures
// (as EndpointFigures counts them).
type FailingEndpoint struct {
	ID           string
	BreakerState herald.BreakerState
	Attempts1h   int
	Successes1h  int
}

// RankQuery is what a query of a ranked order is asked: the consumer
// whose endpoints it lists ("": every consumer's), the time the figures
// are read at (the zero time: the database clock), where it starts and
// how many it lists.
type RankQuery struct {
	Consumer string
	Now      time.Time
	// After is where a head query (DeadHead, DueHead) starts: after this
	// rank, or from the first when nil.
	After *Rank
	// From is where a rest query, or HealthZero, starts: after this id in
	// its direction (before it, for DeadRest), or from the first when "".
	From string
	// Desc walks by id descending (HealthZero, HealthRest).
	Desc  bool
	Limit int
}

// EndpointRanker answers the queries of the ranked orders. Each backend
// has one; deleted endpoints are never listed. Every query takes a
// RankQuery, of which it reads the fields its comment names.
type EndpointRanker interface {
	// DeadHead lists up to Limit endpoints with dead deliveries, by
	// (count, id) descending, after After, Value the count.
	DeadHead(ctx context.Context, q *RankQuery) ([]Rank, error)
	// DeadRest lists up to Limit endpoints with no dead delivery, by id
	// descending, before the id From ("": from the newest).
	DeadRest(ctx context.Context, q *RankQuery) ([]string, error)
	// DueHead lists up to Limit endpoints with a delivery due at Now, by
	// (due mark, id) ascending, after After, Value the mark in Unix
	// microseconds.
	DueHead(ctx context.Context, q *RankQuery) ([]Rank, error)
	// DueRest lists up to Limit endpoints with nothing due at Now, by id
	// ascending, after the id From.
	DueRest(ctx context.Context, q *RankQuery) ([]string, error)
	// HealthZero lists up to Limit endpoints disabled or with an open
	// breaker (HealthScore 0), by id (descending if Desc), after From.
	HealthZero(ctx context.Context, q *RankQuery) ([]string, error)
	// HealthFailing lists every FailingEndpoint at Now.
	HealthFailing(ctx context.Context, q *RankQuery) ([]FailingEndpoint, error)
	// HealthRest lists up to Limit enabled endpoints with a closed
	// breaker and no failed attempt in the hour before Now, by id
	// (descending if Desc), after From.
	HealthRest(ctx context.Context, q *RankQuery) ([]string, error)
}

// RankEndpoints gives the first n endpoints of p's ranked order (p.Sort
// Ranked) after p.Cursor, through r. A cursor that is not a RankCursor
// gives ErrInvalidCursor.
func RankEndpoints(ctx context.Context, r EndpointRanker, p *EndpointListParams, n int) ([]Rank, error) {
	var after *Rank
	if p.Cursor != "" {
		a, ok := ParseRankCursor(p.Cursor)
		if !ok {
			return nil, ErrInvalidCursor
		}
		after = &a
	}
	key, desc := p.Sort.Key()
	switch key {
	case "dead":
		return rankDead(ctx, r, p.ConsumerID, after, n)
	case "due":
		return rankDue(ctx, r, p.ConsumerID, p.Now, after, n)
	case "health":
		return rankHealth(ctx, r, p.ConsumerID, p.Now, after, desc, n)
	}
	return nil, ErrInvalidCursor
}

// ranks gives ids the rank v.
func ranks(ids []string, v int64) []Rank {
	out := make([]Rank, len(ids))
	for i, id := range ids {
		out[i] = Rank{ID: id, Value: v}
	}
	return out
}

// compareRank orders ranks ascending by value, then id.
func compareRank(a, b Rank) int {
	return cmp.Or(cmp.Compare(a.Value, b.Value), cmp.Compare(a.ID, b.ID))
}

// rankDead: the endpoint_dead counts descending, then the endpoints with
// none, newest first.
func rankDead(ctx context.Context, r EndpointRanker, consumer string, after *Rank, n int) ([]Rank, error) {
	var out []Rank
	if after == nil || after.Value > 0 {
		head, err := r.DeadHead(ctx, &RankQuery{Consumer: consumer, After: after, Limit: n})
		if err != nil {
			return nil, err
		}
		out = head
	}
	if len(out) < n {
		before := ""
		if after != nil && after.Value <= 0 {
			before = after.ID
		}
		rest, err := r.DeadRest(ctx, &RankQuery{Consumer: consumer, From: before, Limit: n - len(out)})
		if err != nil {
			return nil, err
		}
		out = append(out, ranks(rest, 0)...)
	}
	return out, nil
}

// rankDue: the endpoints with work due now, longest waiting first, then
// the others, oldest first.
func rankDue(ctx context.Context, r EndpointRanker, consumer string, now time.Time, after *Rank, n int) ([]Rank, error) {
	var out []Rank
	if after == nil || after.Value < RankNotDue {
		head, err := r.DueHead(ctx, &RankQuery{Consumer: consumer, Now: now, After: after, Limit: n})
		if err != nil {
			return nil, err
		}
		out = head
	}
	if len(out) < n {
		from := ""
		if after != nil && after.Value == RankNotDue {
			from = after.ID
		}
		rest, err := r.DueRest(ctx, &RankQuery{Consumer: consumer, Now: now, From: from, Limit: n - len(out)})
		if err != nil {
			return nil, err
		}
		out = append(out, ranks(rest, RankNotDue)...)
	}
	return out, nil
}

// FailingRank is a failing endpoint's rank in the order by health: its
// herald.HealthScore (enabled, as a failing endpoint is), or RankNoScore.
func FailingRank(f FailingEndpoint) int64 {
	h := herald.EndpointHealth{BreakerState: f.BreakerState, Attempts1h: f.Attempts1h}
	if f.Attempts1h > 0 {
		rate := float64(f.Successes1h) / float64(f.Attempts1h)
		h.SuccessRate1h = &rate
	}
	score, ok := herald.HealthScore(true, h)
	if !ok {
		return RankNoScore
	}
	return int64(score)
}

// rankHealth: worst first (or, desc, the exact reverse): the endpoints
// scoring 0 by their state and the failing ones, by score, then the rest
// (RankHealthy) in id order.
func rankHealth(ctx context.Context, r EndpointRanker, consumer string, now time.Time, after *Rank, desc bool, n int) ([]Rank, error) {
	// follows reports whether b comes after a in this order.
	follows := func(a, b Rank) bool {
		if desc {
			return compareRank(a, b) > 0
		}
		return compareRank(a, b) < 0
	}
	var out []Rank
	rest := func() error {
		if len(out) >= n {
			return nil
		}
		from := ""
		if after != nil && after.Value == RankHealthy {
			from = after.ID
		}
		ids, err := r.HealthRest(ctx, &RankQuery{Consumer: consumer, Now: now, From: from, Desc: desc, Limit: n - len(out)})
		out = append(out, ranks(ids, RankHealthy)...)
		return err
	}
	head := func() error {
		if len(out) >= n {
			return nil
		}
		var hs []Rank
		// The endpoints scoring 0 by their state are ranked 0: all of
		// them follow a cursor of a higher rank (desc) or none (asc).
		if after == nil || after.Value == 0 || desc {
			from := ""
			if after != nil && after.Value == 0 {
				from = after.ID
			}
			zero, err := r.HealthZero(ctx, &RankQuery{Consumer: consumer, From: from, Desc: desc, Limit: n - len(out)})
			if err != nil {
				return err
			}
			hs = ranks(zero, 0)
		}
		failing, err := r.HealthFailing(ctx, &RankQuery{Consumer: consumer, Now: now})
		if err != nil {
			return err
		}
		for _, f := range failing {
			rk := Rank{ID: f.ID, Value: FailingRank(f)}
			if after == nil || follows(*after, rk) {
				hs = append(hs, rk)
			}
		}
		slices.SortFunc(hs, func(a, b Rank) int {
			if desc {
				return compareRank(b, a)
			}
			return compareRank(a, b)
		})
		out = append(out, hs[:min(len(hs), n-len(out))]...)
		return nil
	}
	var steps []func() error
	switch {
	case desc && (after == nil || after.Value == RankHealthy):
		steps = []func() error{rest, head}
	case desc:
		steps = []func() error{head}
	case after == nil || after.Value < RankHealthy:
		steps = []func() error{head, rest}
	default:
		steps = []func() error{rest}
	}
	for _, step := range steps {
		if err := step(); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// RankIDs are the endpoint ids of rs, in order.
func RankIDs(rs []Rank) []string {
	ids := make([]string, len(rs))
	for i, r := range rs {
		ids[i] = r.ID
	}
	return ids
}

// RankedPage is the page of a ranked order: the endpoints of the first
// limit ranks of rs (RankEndpoints asked for limit+1) in rank order, as
// byID holds them, and a cursor after them when rs has more. An endpoint
// deleted since it was ranked is not in byID and is left out; the cursor
// still follows the ranks.
func RankedPage(rs []Rank, limit int, byID map[string]*herald.Endpoint) *Page[*herald.Endpoint] {
	out := &Page[*herald.Endpoint]{Items: []*herald.Endpoint{}}
	for i, r := range rs {
		if i == limit {
			out.NextCursor = RankCursor(rs[limit-1])
			break
		}
		if ep, ok := byID[r.ID]; ok {
			out.Items = append(out.Items, ep)
		}
	}
	return out
}

// EndpointLister reads the endpoints ListEndpoints pages through: a
// backend has one, its queries beside it.
type EndpointLister interface {
	EndpointRanker
	// EndpointsSorted lists up to limit+1 endpoints in p's order of a
	// column (p.Sort not Ranked), after p.Cursor.
	EndpointsSorted(ctx context.Context, p *EndpointListParams, limit int) ([]*herald.Endpoint, error)
	// EndpointsByID reads the endpoints ids names, in any order; deleted
	// ones are left out.
	EndpointsByID(ctx context.Context, ids []string) ([]*herald.Endpoint, error)
}

// ListEndpoints is Store.EndpointList through l, the one rule both
// backends page endpoints by: a column's order is one query (the limit
// clamped, one endpoint more than the page to tell whether another
// follows); a ranked order (p.Sort.Ranked: health, due, dead) is its
// ranks (RankEndpoints), then the endpoints they name, in rank order
// (RankedPage).
func ListEndpoints(ctx context.Context, l EndpointLister, p *EndpointListParams) (*Page[*herald.Endpoint], error) {
	limit := ClampLimit(p.Limit)
	if !p.Sort.Ranked() {
		items, err := l.EndpointsSorted(ctx, p, limit)
		if err != nil {
			return nil, fmt.Errorf("list endpoints: %w", err)
		}
		return NewPage(items, limit, func(e *herald.Endpoint) string { return EndpointCursor(p.Sort, e) }), nil
	}
	rs, err := RankEndpoints(ctx, l, p, limit+1)
	if err != nil {
		return nil, fmt.Errorf("list endpoints: %w", err)
	}
	eps, err := l.EndpointsByID(ctx, RankIDs(rs))
	if err != nil {
		return nil, fmt.Errorf("list endpoints: %w", err)
	}
	byID := make(map[string]*herald.Endpoint, len(eps))
	for _, ep := range eps {
		byID[ep.ID] = ep
	}
	return RankedPage(rs, limit, byID), nil
}
