package pgstore

import (
	"context"
	"fmt"
	"time"

	"github.com/heraldhooks/herald/internal/store"
)

// DepthSample keeps the queue's depth as the sample of the minute of
// p.Now (the database clock's when zero, so nodes with skewed clocks
// agree on the minute), unless that minute has one: it looks by the
// primary key first and then measures nothing. Nodes that look at once
// both measure, and the first insert wins: ON CONFLICT DO NOTHING on the
// minute makes the others' a no-op, so no row is ever written twice.
func (s *Store) DepthSample(ctx context.Context, p *store.DepthSampleParams) (bool, error) {
	t := p.Now
	if t.IsZero() {
		if err := s.pool.QueryRow(ctx, `SELECT now()`).Scan(&t); err != nil {
			return false, fmt.Errorf("sample depth: %w", err)
		}
	}
	minute := store.ActivityMinute(t)
	var taken bool
	if err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM depth_minutes WHERE minute = $1)`, minute).
		Scan(&taken); err != nil {
		return false, fmt.Errorf("sample depth: %w", err)
	}
	if taken {
		return false, nil
	}
	st, err := s.Stats(ctx, &store.StatsParams{QueueOnly: true, Now: t})
	if err != nil {
		return false, fmt.Errorf("sample depth: %w", err)
	}
	d := store.DepthOf(st)
	// A queue that a crash emptied and no node has made again yet
	// (migration 0032) undercounts: the minute is left without a sample
	// rather than kept with a wrong one.
	tag, err := s.pool.Exec(ctx, `INSERT INTO depth_minutes (minute, due_now, oldest_due_ms, dead)
		SELECT $1, $2, $3, $4 WHERE `+queueBuiltSQL+`
		ON CONFLICT (minute) DO NOTHING`,
		minute, d.DueNow, d.OldestDueAge.Milliseconds(), d.Dead)
	if err != nil {
		return false, fmt.Errorf("sample depth: %w", err)
	}
	return tag.RowsAffected() == 1, nil
}

// DepthSeries reads the samples of the window, a step's highest in SQL,
// by the primary key.
func (s *Store) DepthSeries(ctx context.Context, p *store.DepthSeriesParams) ([]store.DepthPoint, error) {
	if err := store.CheckSeries(p.Window, p.Step); err != nil {
		return nil, fmt.Errorf("depth series: %w", err)
	}
	t := p.Now
	if t.IsZero() {
		if err := s.pool.QueryRow(ctx, `SELECT now()`).Scan(&t); err != nil {
			return nil, fmt.Errorf("depth series: %w", err)
		}
	}
	from, to := p.Span(t)
	rows, err := s.pool.Query(ctx, `SELECT (extract(epoch FROM minute - $1)::bigint / $3)::bigint AS i,
			max(due_now), max(oldest_due_ms), max(dead)
		FROM depth_minutes WHERE minute >= $1 AND minute < $2 GROUP BY i`, from, to, int64(p.Step/time.Second))
	if err != nil {
		return nil, fmt.Errorf("depth series: %w", err)
	}
	defer rows.Close()
	return store.DepthPoints(p, t, rows)
}

// DepthPurge deletes up to p.Limit samples older than p.Keep, oldest
// first, through the primary key; rows another transaction holds are
// skipped.
func (s *Store) DepthPurge(ctx context.Context, p *store.DepthPurgeParams) (int, error) {
	keep, limit := p.Bounds()
	tag, err := s.pool.Exec(ctx, `DELETE FROM depth_minutes WHERE minute IN (
		SELECT minute FROM depth_minutes
		WHERE minute < date_trunc('minute', coalesce($1::timestamptz, now()) - $2::bigint * interval '1 microsecond')
		ORDER BY minute LIMIT $3 FOR UPDATE SKIP LOCKED)`, nowArg(p.Now), micros(keep), limit)
	if err != nil {
		return 0, fmt.Errorf("purge depth: %w", err)
	}
	return int(tag.RowsAffected()), nil
}
