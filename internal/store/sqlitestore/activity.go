package sqlitestore

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"github.com/heraldhooks/herald/internal/store"
)

// activityCols are activity_minutes' counting columns, in the order of
// activityValues.
var activityCols = func() []string {
	cols := []string{"attempts", "succeeded", "failed", "retries", "exhausted"}
	for i := range store.LatencyBuckets {
		cols = append(cols, fmt.Sprintf("lat%02d", i))
	}
	return cols
}()

// activityValues are a's counts in the order of activityCols.
func activityValues(a *store.Activity) []any {
	v := []any{a.Attempts, a.Succeeded, a.Failed, a.Retries, a.Exhausted}
	for _, n := range a.Latency {
		v = append(v, n)
	}
	return v
}

// activityDest are where a row of activityCols is read into a.
func activityDest(a *store.Activity) []any {
	d := []any{&a.Attempts, &a.Succeeded, &a.Failed, &a.Retries, &a.Exhausted}
	for i := range a.Latency {
		d = append(d, &a.Latency[i])
	}
	return d
}

// addActivityQuery adds a batch's counts to its minute's row.
var addActivityQuery = func() string {
	set := make([]string, len(activityCols))
	for i, c := range activityCols {
		set[i] = c + " = " + c + " + excluded." + c
	}
	return `INSERT INTO activity_minutes (minute, node, ` + strings.Join(activityCols, ", ") + `)
		VALUES (?, ''` + strings.Repeat(", ?", len(activityCols)) + `)
		ON CONFLICT (minute, node) DO UPDATE SET ` + strings.Join(set, ", ")
}()

// addActivity adds a to the row of t's minute, in tx. An empty a writes
// nothing.
func addActivity(ctx context.Context, tx *sql.Tx, t time.Time, a *store.Activity) error {
	if a.Attempts == 0 {
		return nil
	}
	args := append([]any{store.ActivityMinute(t).Unix()}, activityValues(a)...)
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
	var scanErr error
	out := store.ActivityPoints(p, t, func(yield func(time.Time, *store.Activity)) {
		for rows.Next() {
			var (
				i int64
				a store.Activity
			)
			if err := rows.Scan(append([]any{&i}, activityDest(&a)...)...); err != nil {
				scanErr = err
				return
			}
			yield(from.Add(time.Duration(i)*p.Step), &a)
		}
	})
	if scanErr != nil {
		return nil, fmt.Errorf("activity series: %w", scanErr)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("activity series: %w", err)
	}
	return out, nil
}

// activitySums adds up each of activityCols.
var activitySums = func() string {
	sums := make([]string, len(activityCols))
	for i, c := range activityCols {
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
	keep := max(p.Keep, store.MinActivityKeep)
	limit := p.Limit
	if limit <= 0 {
		limit = store.DefaultActivityPurgeLimit
	}
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
