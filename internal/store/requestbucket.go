package store

import (
	"context"
	"time"

	"github.com/heraldhooks/herald/internal/ratelimit"
)

// RequestBucketStore keeps the token buckets that the API's request limits
// (--consumer-rate-limit, --operator-rate-limit) share across nodes: one
// row per consumer key, portal session or operator key, holding tokens and
// the time they were counted at. The rule is ratelimit.TakeUpTo; a backend
// only reads and writes the row. Nodes take tokens in lots
// (ratelimit.LotSize) and spend them in memory, so the database sees one
// take per lot, not one per request, and a key with no limit none at all.
type RequestBucketStore interface {
	// RequestBucketTake takes up to p.Want tokens of the bucket p.Name at
	// p.Rate, as ratelimit.TakeUpTo decides at Now (zero: the database
	// clock), under a lock on the bucket's row: of several nodes taking at
	// once, each counts the others' takes, so together they never get more
	// than the rate over time plus the burst. A bucket with no row is
	// full. A take that gets nothing writes nothing.
	RequestBucketTake(ctx context.Context, p *RequestBucketTakeParams) (RequestBucketTaken, error)
	// RequestBucketPurge deletes up to p.Limit buckets that have refilled
	// by Now (zero: the database clock), which are the same as none, in
	// one short statement, and says how many it deleted: one row per key
	// or session used within the last few seconds is what stays.
	RequestBucketPurge(ctx context.Context, p *RequestBucketPurgeParams) (int, error)
}

// RequestBucketTakeParams asks for up to Want tokens of the bucket Name
// ("key ak_…", "session ps_…") refilled at Rate.
type RequestBucketTakeParams struct {
	Name string
	Rate ratelimit.Rate
	Want int
	Now  time.Time
}

// RequestBucketTaken is what RequestBucketTake granted: Got tokens (0 to
// Want); with none, Wait is how long until Want are there.
type RequestBucketTaken struct {
	Got  int
	Wait time.Duration
}

// RequestBucketPurgeParams asks to forget up to Limit (default and at
// most DefaultActivityPurgeLimit) full buckets at Now.
type RequestBucketPurgeParams struct {
	Limit int
	Now   time.Time
}

// Bound is p's limit, as the purge applies it.
func (p *RequestBucketPurgeParams) Bound() int {
	if p.Limit <= 0 || p.Limit > DefaultActivityPurgeLimit {
		return DefaultActivityPurgeLimit
	}
	return p.Limit
}
