package store

import (
	"context"
	"fmt"
	"time"
)

// DepthStore keeps the depth series: once a minute, the queue's depth as
// Stats measures it with QueueOnly (due now, the oldest due delivery's
// wait, the dead-letter depth), so the charts show how the queue's levels
// moved over the last hour and day, the same on every node. One sample is
// kept a minute, whatever the number of nodes: the first node to sample a
// minute writes it, and the others, finding it, measure nothing. Reads and
// purges cost the minutes kept, never the deliveries kept.
type DepthStore interface {
	// DepthSample measures the queue of every consumer (Stats with
	// QueueOnly, at p.Now, or the database clock when it is zero) and
	// keeps it as the sample of that time's minute, unless the minute
	// has one already: it looks first (a primary key probe) and then
	// measures nothing. Of nodes sampling the same minute at once, the
	// first write wins and the others' do nothing (it is keyed by the
	// minute), so a minute's sample never changes once written. It says
	// whether it wrote the sample.
	DepthSample(ctx context.Context, p *DepthSampleParams) (bool, error)
	// DepthSeries reads the samples of p.Window before the start of the
	// minute of p.Now (the minute under way is left out, as in
	// ActivitySeries) into points of p.Step, oldest first: Window/Step
	// points, each At its start. A step's depth is the highest of its
	// minutes' samples, each figure on its own (depth is a level, not a
	// sum: the worst of the step shows); a step with no sample at all is
	// not Sampled (unknown, not an empty queue).
	DepthSeries(ctx context.Context, p *DepthSeriesParams) ([]DepthPoint, error)
	// DepthPurge deletes up to p.Limit samples older than Now - p.Keep
	// (at least MinActivityKeep), oldest first, in one short transaction,
	// and says how many it deleted (fewer than p.Limit: nothing older is
	// left).
	DepthPurge(ctx context.Context, p *DepthPurgeParams) (int, error)
}

// DepthSampleParams asks for the sample of the minute of Now.
type DepthSampleParams struct {
	Now time.Time
}

// DepthSeriesParams asks for a depth series: Window is a whole number of
// Steps, and Step a whole number of minutes (CheckSeries). The API reads
// the activity and the depth over the same window and steps.
type DepthSeriesParams struct {
	Window time.Duration
	Step   time.Duration
	Now    time.Time
}

// Span is the series' time range at now, [from, to): Window up to the
// start of now's minute (ActivitySpan, the activity's).
func (p *DepthSeriesParams) Span(now time.Time) (from, to time.Time) {
	to = ActivityMinute(now)
	return to.Add(-p.Window), to
}

// Depth is the queue's depth at one moment, or the highest over a step.
type Depth struct {
	// DueNow counts the pending deliveries whose time had come.
	DueNow int64
	// OldestDueAge is how long the oldest due delivery had waited (0 if
	// none); kept to the millisecond.
	OldestDueAge time.Duration
	// Dead is the dead-letter depth: the dead deliveries.
	Dead int64
}

// DepthPoint is the depth of one step of a series, from At.
type DepthPoint struct {
	At time.Time
	// Sampled is false when no minute of the step has a sample: its Depth
	// is then unknown (all zeros here), which the answers show as null.
	Sampled bool
	Depth
}

// DepthOf is the depth a Stats measured.
func DepthOf(st *Stats) Depth {
	return Depth{DueNow: st.DueNow, OldestDueAge: st.OldestDueAge.Truncate(time.Millisecond), Dead: st.DeadLetters}
}

// DepthPoints reads rows into the points of the series p asks for, as
// DepthSeries returns them: each row a step's index from the series'
// start, then the highest due_now, oldest_due_ms and dead of the step's
// samples. Steps without a row are not Sampled.
func DepthPoints(p *DepthSeriesParams, now time.Time, rows ActivityRows) ([]DepthPoint, error) {
	from, _ := p.Span(now)
	n := int(p.Window / p.Step)
	out := make([]DepthPoint, n)
	for i := range out {
		out[i].At = from.Add(time.Duration(i) * p.Step)
	}
	for rows.Next() {
		var i, due, oldestMS, dead int64
		if err := rows.Scan(&i, &due, &oldestMS, &dead); err != nil {
			return nil, fmt.Errorf("depth series: %w", err)
		}
		if i >= 0 && i < int64(n) {
			out[i].Sampled = true
			out[i].Depth = Depth{DueNow: due, OldestDueAge: time.Duration(oldestMS) * time.Millisecond, Dead: dead}
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("depth series: %w", err)
	}
	return out, nil
}

// CheckSeries refuses a series window in steps that is not whole
// minutes and steps.
func CheckSeries(window, step time.Duration) error {
	if step < time.Minute || step%time.Minute != 0 || window < step || window%step != 0 {
		return fmt.Errorf("window %s in steps of %s: want whole minutes, a whole number of steps", window, step)
	}
	return nil
}
