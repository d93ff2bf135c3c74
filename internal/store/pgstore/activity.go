package pgstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/heraldhooks/herald/internal/store"
)

// addActivitySQL adds a batch's counts to the row of its minute ($1, or
// the minute of the database clock's now) and this node ($2). The row is
// this node's own, so only this node's overlapping outcome writes ever
// wait for it.
var addActivitySQL = func() string {
	set := make([]string, len(store.ActivityColumns))
	params := make([]string, len(store.ActivityColumns))
	for i, c := range store.ActivityColumns {
		set[i] = c + " = a." + c + " + excluded." + c
		params[i] = fmt.Sprintf("$%d::bigint", i+3)
	}
	return `INSERT INTO activity_minutes AS a (minute, node, ` + strings.Join(store.ActivityColumns, ", ") + `)
		VALUES (coalesce($1::timestamptz,
				date_trunc('minute', now() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC'),
			$2, ` + strings.Join(params, ", ") + `)
		ON CONFLICT (minute, node) DO UPDATE SET ` + strings.Join(set, ", ")
}()

// newNodeID names this store's rows of the activity series: random, so
// every process (every open store) writes rows of its own.
func newNodeID() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// queueActivity queues in b the write that adds a to this node's row of
// the minute of t, or of the database clock's now if t is zero; it is the
// last write of an outcome batch, sent with its COMMIT (or, riding an
// ingest, before the ingest's statements), so the row is held briefly,
// and only this node's outcome writes, one at a time, write it. An empty
// a writes nothing.
func (s *Store) queueActivity(b *pgx.Batch, t time.Time, a *store.Activity) {
	if a.Attempts == 0 {
		return
	}
	var minute any
	if !t.IsZero() {
		minute = store.ActivityMinute(t)
	}
	b.Queue(addActivitySQL, append([]any{minute, s.node}, store.ActivityValues(a)...)...)
}

// ActivitySeries reads the minutes of the window (every node's rows) and
// sums them into points, by the primary key.
func (s *Store) ActivitySeries(ctx context.Context, p *store.ActivitySeriesParams) ([]store.ActivityPoint, error) {
	if p.Step < time.Minute || p.Step%time.Minute != 0 || p.Window < p.Step || p.Window%p.Step != 0 {
		return nil, fmt.Errorf("activity series: window %s in steps of %s: want whole minutes, a whole number of steps", p.Window, p.Step)
	}
	t := p.Now
	if t.IsZero() {
		if err := s.pool.QueryRow(ctx, `SELECT now()`).Scan(&t); err != nil {
			return nil, fmt.Errorf("activity series: %w", err)
		}
	}
	from, to := store.ActivitySpan(p, t)
	// A step's minutes (of every node) are added up by the database.
	rows, err := s.pool.Query(ctx, `SELECT (extract(epoch FROM minute - $1)::bigint / $3)::bigint AS i, `+activitySums+`
		FROM activity_minutes WHERE minute >= $1 AND minute < $2 GROUP BY i`, from, to, int64(p.Step/time.Second))
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
		sums[i] = "sum(" + c + ")::bigint"
	}
	return strings.Join(sums, ", ")
}()

// ActivityPurge deletes up to p.Limit minute rows older than p.Keep,
// oldest first, through the primary key. Rows another transaction holds
// (an outcome write of the oldest minute kept) are skipped.
func (s *Store) ActivityPurge(ctx context.Context, p *store.ActivityPurgeParams) (int, error) {
	keep, limit := p.Bounds()
	tag, err := s.pool.Exec(ctx, `DELETE FROM activity_minutes WHERE (minute, node) IN (
		SELECT minute, node FROM activity_minutes
		WHERE minute < date_trunc('minute', coalesce($1::timestamptz, now()) - $2::bigint * interval '1 microsecond')
		ORDER BY minute LIMIT $3 FOR UPDATE SKIP LOCKED)`, nowArg(p.Now), micros(keep), limit)
	if err != nil {
		return 0, fmt.Errorf("purge activity: %w", err)
	}
	return int(tag.RowsAffected()), nil
}
