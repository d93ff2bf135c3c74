package store

import (
	"context"
	"fmt"
	"time"

	"github.com/heraldhooks/herald"
)

// ActivityStore keeps the activity series: per minute, what the outcome
// writes did (attempts, their results, retries scheduled, deliveries gone
// dead) and a histogram of attempt latency. The outcome write
// (DeliveryCompleteMany) adds its batch to its minute's row in the same
// transaction, once per call, so the series costs one small write per
// batch of outcomes and nothing at ingest. On PostgreSQL every node
// writes rows of its own (a minute has one row per node that wrote in
// it), summed on read, so no row is shared by nodes writing at once.
// Reads and purges cost the minutes kept, never the deliveries kept.
type ActivityStore interface {
	// ActivitySeries sums the activity of p.Window before the start of
	// the minute of p.Now (the minute under way is left out, being
	// partial) into points of p.Step each, oldest first: Window/Step
	// points, each At its start, a point with no activity all zeros.
	ActivitySeries(ctx context.Context, p *ActivitySeriesParams) ([]ActivityPoint, error)
	// ActivityPurge deletes up to p.Limit minute rows older than Now -
	// p.Keep, oldest first, in one short transaction, and says how many
	// it deleted (fewer than p.Limit: nothing older is left).
	ActivityPurge(ctx context.Context, p *ActivityPurgeParams) (int, error)
}

// ActivitySeriesParams asks for a series: Window is a whole number of
// Steps, and Step a whole number of minutes.
type ActivitySeriesParams struct {
	Window time.Duration
	Step   time.Duration
	Now    time.Time
}

// ActivityPurgeParams asks for one batch of the activity purge.
type ActivityPurgeParams struct {
	// Keep is how long minutes are kept; at least MinActivityKeep.
	Keep time.Duration
	// Limit is how many rows a batch deletes at most; 0 means
	// DefaultActivityPurgeLimit.
	Limit int
	Now   time.Time
}

// DepthPurgeParams asks for one batch of the depth purge, bounded as the
// activity purge's are.
type DepthPurgeParams ActivityPurgeParams

// Bounds are those of ActivityPurgeParams.
func (p *DepthPurgeParams) Bounds() (keep time.Duration, limit int) {
	return (*ActivityPurgeParams)(p).Bounds()
}

// Bounds are how long a purge batch keeps (Keep, at least MinActivityKeep)
// and how many rows it deletes at most (Limit, or
// DefaultActivityPurgeLimit).
func (p *ActivityPurgeParams) Bounds() (keep time.Duration, limit int) {
	keep = max(p.Keep, MinActivityKeep)
	limit = p.Limit
	if limit <= 0 {
		limit = DefaultActivityPurgeLimit
	}
	return keep, limit
}

// Activity kept and how it is purged.
const (
	// MinActivityKeep is the least time activity is kept: a day of
	// charts, and an hour to spare.
	MinActivityKeep = 25 * time.Hour
	// DefaultActivityPurgeLimit bounds one batch of the activity purge.
	DefaultActivityPurgeLimit = 500
)

// ActivityPoint is the activity of one step of a series, from At.
type ActivityPoint struct {
	At time.Time
	Activity
}

// LatencyBounds are the upper bounds of the attempt latency histogram's
// buckets, in milliseconds: bucket i holds the attempts that took less
// than LatencyBounds[i] and at least the bound before it, and the last
// bucket (LatencyBuckets-1) the attempts that took LatencyBounds' last or
// longer. A quantile read from it lies within its bucket's width: a few
// ms for fast receivers, about a third of the value for slow ones.
var LatencyBounds = [LatencyBuckets - 1]float64{
	2, 5, 10, 20, 35, 50, 75, 100, 150, 200, 300, 500, 750, 1000, 1500, 2500, 5000, 10000, 30000,
}

// LatencyBuckets is how many buckets the latency histogram has.
const LatencyBuckets = 20

// latencyCeil closes the last bucket for interpolation: no attempt lasts
// longer than the largest endpoint timeout.
const latencyCeil = 60000

// Activity counts what outcome writes did over some span of time.
type Activity struct {
	// Attempts counts the HTTP attempts logged, Succeeded those answered
	// 2xx, and Failed the others (Attempts = Succeeded + Failed). An
	// attempt whose lease was lost by then (not applied) counts too: it
	// was made.
	Attempts, Succeeded, Failed int64
	// Retries counts the applied outcomes that scheduled another attempt,
	// and Exhausted those that sent their delivery dead (attempts spent, a
	// 410 or a client error): the deliveries that came to the dead-letter
	// queue through an attempt.
	Retries, Exhausted int64
	// Latency is the histogram of the attempts' durations (LatencyBounds).
	Latency [LatencyBuckets]int64
}

// AddOutcome counts o, whose outcome applied or not.
func (a *Activity) AddOutcome(o *DeliveryOutcome, applied bool) {
	a.Attempts++
	if c := o.Attempt.StatusCode; c >= 200 && c <= 299 {
		a.Succeeded++
	} else {
		a.Failed++
	}
	a.Latency[LatencyBucket(o.Attempt.Duration)]++
	if !applied {
		return
	}
	switch o.Status {
	case herald.StatusPending:
		a.Retries++
	case herald.StatusDead:
		a.Exhausted++
	}
}

// Add adds b to a.
func (a *Activity) Add(b *Activity) {
	a.Attempts += b.Attempts
	a.Succeeded += b.Succeeded
	a.Failed += b.Failed
	a.Retries += b.Retries
	a.Exhausted += b.Exhausted
	for i := range a.Latency {
		a.Latency[i] += b.Latency[i]
	}
}

// LatencyBucket is the histogram bucket of an attempt that took d.
func LatencyBucket(d time.Duration) int {
	ms := float64(d) / float64(time.Millisecond)
	for i, b := range LatencyBounds {
		if ms < b {
			return i
		}
	}
	return LatencyBuckets - 1
}

// LatencyQuantile estimates the q-quantile (0 < q < 1) of the attempts'
// latency from the histogram, interpolating within the bucket it falls in;
// ok is false when there were no attempts.
func (a *Activity) LatencyQuantile(q float64) (ms float64, ok bool) {
	var total int64
	for _, n := range a.Latency {
		total += n
	}
	if total == 0 {
		return 0, false
	}
	rank := q * float64(total)
	var below float64
	for i, n := range a.Latency {
		if n == 0 || below+float64(n) < rank {
			below += float64(n)
			continue
		}
		lo, hi := 0.0, float64(latencyCeil)
		if i > 0 {
			lo = LatencyBounds[i-1]
		}
		if i < len(LatencyBounds) {
			hi = LatencyBounds[i]
		}
		return lo + (hi-lo)*(rank-below)/float64(n), true
	}
	return latencyCeil, true
}

// ActivityMinute is the start of the minute of t, in UTC: the key of the
// row an outcome write at t adds to.
func ActivityMinute(t time.Time) time.Time { return t.UTC().Truncate(time.Minute) }

// ActivitySpan is where a series ends (the start of the minute of now,
// which is left out) and where it starts.
func ActivitySpan(p *ActivitySeriesParams, now time.Time) (from, to time.Time) {
	to = ActivityMinute(now)
	return to.Add(-p.Window), to
}

// ActivityRows are a backend's rows of a series: each a step's index from
// the series' start, then ActivityColumns summed over that step. pgx.Rows
// and *sql.Rows both are.
type ActivityRows interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
}

// ActivityPoints reads rows into the points of the series p asks for, as
// ActivitySeries returns them; steps without a row are zero.
func ActivityPoints(p *ActivitySeriesParams, now time.Time, rows ActivityRows) ([]ActivityPoint, error) {
	from, _ := ActivitySpan(p, now)
	n := int(p.Window / p.Step)
	out := make([]ActivityPoint, n)
	for i := range out {
		out[i].At = from.Add(time.Duration(i) * p.Step)
	}
	for rows.Next() {
		var (
			i int64
			a Activity
		)
		if err := rows.Scan(append([]any{&i}, ActivityDest(&a)...)...); err != nil {
			return nil, fmt.Errorf("activity series: %w", err)
		}
		if i >= 0 && i < int64(n) {
			out[i].Add(&a)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("activity series: %w", err)
	}
	return out, nil
}

// ActivityColumns are activity_minutes' counting columns, in the order of
// ActivityValues and ActivityDest; both backends name them alike.
var ActivityColumns = func() []string {
	cols := []string{"attempts", "succeeded", "failed", "retries", "exhausted"}
	for i := range LatencyBuckets {
		cols = append(cols, fmt.Sprintf("lat%02d", i))
	}
	return cols
}()

// ActivityValues are a's counts in the order of ActivityColumns.
func ActivityValues(a *Activity) []any {
	v := []any{a.Attempts, a.Succeeded, a.Failed, a.Retries, a.Exhausted}
	for _, n := range a.Latency {
		v = append(v, n)
	}
	return v
}

// ActivityDest are where a row of ActivityColumns is scanned into a.
func ActivityDest(a *Activity) []any {
	d := []any{&a.Attempts, &a.Succeeded, &a.Failed, &a.Retries, &a.Exhausted}
	for i := range a.Latency {
		d = append(d, &a.Latency[i])
	}
	return d
}
