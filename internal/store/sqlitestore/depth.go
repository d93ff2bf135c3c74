package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/heraldhooks/herald/internal/store"
)

// DepthSample keeps the queue's depth as the sample of the minute of
// p.Now, unless that minute has one: it looks by the primary key first,
// then measures on a reader (Stats, the due and dead indexes), so the one
// writer is held only for the row's insert, never for the counts.
func (s *Store) DepthSample(ctx context.Context, p *store.DepthSampleParams) (bool, error) {
	t := now(p.Now)
	minute := store.ActivityMinute(t).Unix()
	var one int
	err := s.reader.QueryRowContext(ctx, `SELECT 1 FROM depth_minutes WHERE minute = ?`, minute).Scan(&one)
	switch {
	case err == nil:
		return false, nil
	case !errors.Is(err, sql.ErrNoRows):
		return false, fmt.Errorf("sample depth: %w", err)
	}
	st, err := s.Stats(ctx, &store.StatsParams{QueueOnly: true, Now: t})
	if err != nil {
		return false, fmt.Errorf("sample depth: %w", err)
	}
	d := store.DepthOf(st)
	var n int64
	err = s.write(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `INSERT INTO depth_minutes (minute, due_now, oldest_due_ms, dead)
			VALUES (?, ?, ?, ?) ON CONFLICT (minute) DO NOTHING`,
			minute, d.DueNow, d.OldestDueAge.Milliseconds(), d.Dead)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return false, fmt.Errorf("sample depth: %w", err)
	}
	return n == 1, nil
}

// DepthSeries reads the samples of the window, a step's highest in SQL,
// by the primary key.
func (s *Store) DepthSeries(ctx context.Context, p *store.DepthSeriesParams) ([]store.DepthPoint, error) {
	if err := store.CheckSeries(p.Window, p.Step); err != nil {
		return nil, fmt.Errorf("depth series: %w", err)
	}
	t := now(p.Now)
	from, to := p.Span(t)
	rows, err := s.reader.QueryContext(ctx, `SELECT (minute - ?) / ? AS i, max(due_now), max(oldest_due_ms), max(dead)
		FROM depth_minutes WHERE minute >= ? AND minute < ? GROUP BY i`,
		from.Unix(), int64(p.Step/time.Second), from.Unix(), to.Unix())
	if err != nil {
		return nil, fmt.Errorf("depth series: %w", err)
	}
	defer rows.Close()
	return store.DepthPoints(p, t, rows)
}

// DepthPurge deletes up to p.Limit samples older than p.Keep, oldest
// first, through the primary key.
func (s *Store) DepthPurge(ctx context.Context, p *store.DepthPurgeParams) (int, error) {
	keep, limit := p.Bounds()
	cutoff := store.ActivityMinute(now(p.Now).Add(-keep)).Unix()
	var n int64
	err := s.write(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM depth_minutes WHERE minute IN (
			SELECT minute FROM depth_minutes WHERE minute < ? ORDER BY minute LIMIT ?)`, cutoff, limit)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("purge depth: %w", err)
	}
	return int(n), nil
}
