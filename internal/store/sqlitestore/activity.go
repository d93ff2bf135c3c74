package sqlitestore

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"github.com/heraldhooks/herald/internal/store"
)

// addActivityQuery adds a batch's counts to its minute's row.
var addActivityQuery = func() string {
	set := make([]string, len(store.ActivityColumns))
	for i, c := range store.ActivityColumns {
		set[i] = c + " = " + c + " + excluded." + c
	}
	return `INSERT INTO activity_minutes (minute, node, ` + strings.Join(store.ActivityColumns, ", ") + `)
		VALUES (?, ''` + strings.Repeat(", ?", len(store.ActivityColumns)) + `)
		ON CONFLICT (minute, node) DO UPDATE SET ` + strings.Join(set, ", ")
}()

// addActivity adds a to the row of t's minute, in tx. An empty a writes
// nothing.
func addActivity(ctx context.Context, tx *sql.Tx, t time.Time, a *store.Activity) error {
	if a.Attempts == 0 {
		return nil
	}
	args := append([]any{store.ActivityMinute(t).Unix()}, store.ActivityValues(a)...)
	if _, err := tx.ExecContext(ctx, addActivityQuery, args...); err != nil {
		return fmt.Errorf("add activity: %w", err)
	}
	return nil
}

// ActivitySeries sums the minutes of the window into points, in SQL (a
// step's minutes are added up by the database, so a day's 1,440 rows
// come back as 96); it reads at most Window's minutes, by the primary
// key.
func (s *Store) ActivitySeries(ctx context.Context, p *store.ActivitySeriesParams) ([]store.ActivityPoint, error) {
	if err := checkSeries(p); err != nil {
		return nil, err
	}
	t := now(p.Now)
	from, to := store.ActivitySpan(p, t)
	step := int64(p.Step / time.Second)
	rows, err := s.reader.QueryContext(ctx, `SELECT (minute - ?) / ? AS i, `+activitySums+`
		FROM activity_minutes WHERE minute >= ? AND minute < ? GROUP BY i`, from.Unix(), step, from.Unix(), to.Unix())
	if err != nil {
		return nil, fmt.Errorf("activity series: %w", err)
	}
	defer rows.Close()
	return store.ActivityPoints(p, t, rows)
}

// activitySums adds up each of store.ActivityColumns.
var activitySums = func() string {
	sums := make([]string, len(store.ActivityColumns))
	for i, c := range store.ActivityColumns {
		sums[i] = "sum(" + c + ")"
	}
	return strings.Join(sums, ", ")
}()

// checkSeries refuses a series that is not whole minutes and steps.
func checkSeries(p *store.ActivitySeriesParams) error {
	if p.Step < time.Minute || p.Step%time.Minute != 0 || p.Window < p.Step || p.Window%p.Step != 0 {
		return fmt.Errorf("activity series: window %s in steps of %s: want whole minutes, a whole number of steps", p.Window, p.Step)
	}
	return nil
}

// ActivityPurge deletes up to p.Limit minutes older than p.Keep, oldest
// first, through the primary key.
func (s *Store) ActivityPurge(ctx context.Context, p *store.ActivityPurgeParams) (int, error) {
	keep, limit := p.Bounds()
	cutoff := store.ActivityMinute(now(p.Now).Add(-keep)).Unix()
	var n int64
	err := s.write(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM activity_minutes WHERE (minute, node) IN (
			SELECT minute, node FROM activity_minutes WHERE minute < ? ORDER BY minute LIMIT ?)`, cutoff, limit)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("purge activity: %w", err)
	}
	return int(n), nil
}
