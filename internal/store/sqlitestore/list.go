package sqlitestore

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"time"
)

// The lister moves new events and deliveries into the listing indexes
// (events_consumer, deliveries_endpoint, deliveries_consumer: migration
// 0019), listEvery apart (Store.listEvery), at most listBatch rows of one
// table a transaction. Until then a row is unlisted, and the reads that
// list by consumer or endpoint read it through the small index of unlisted
// rows (listedOrNot). Written as each row arrives, an entry of a listing
// index lands on its consumer's or endpoint's own last page, a page write
// per delivery for each of the three; written in a batch, the entries of
// the batch's rows share those pages.
const (
	listEvery = time.Second
	listBatch = 500
)

// The statements of a pass: each lists up to listBatch rows, the oldest
// unlisted first.
const (
	listEventsQuery = `UPDATE events SET unlisted = NULL WHERE rowid IN
		(SELECT rowid FROM events INDEXED BY events_unlisted WHERE unlisted = 1 ORDER BY id LIMIT ?)`
	listDeliveriesQuery = `UPDATE deliveries SET unlisted = NULL WHERE rowid IN
		(SELECT rowid FROM deliveries INDEXED BY deliveries_unlisted WHERE unlisted = 1 ORDER BY id LIMIT ?)`
)

// startLister starts the lister once; Migrate calls it, as the lister's
// statements need the schema. Close, by the same sync.Once, closes
// listerDone itself when it never started.
func (s *Store) startLister() {
	s.listerOnce.Do(func() { go s.lister() })
}

// lister runs listUnlisted every s.listEvery until Close.
func (s *Store) lister() {
	defer close(s.listerDone)
	tick := time.NewTicker(s.listEvery)
	defer tick.Stop()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-s.done
		cancel()
	}()
	for {
		select {
		case <-s.done:
			return
		case <-tick.C:
		}
		if _, err := s.listUnlisted(ctx, listBatch); err != nil && ctx.Err() == nil {
			s.logger.Warn("sqlite lister", "error", err)
		}
	}
}

// listUnlisted lists the unlisted rows, events then deliveries, in
// transactions of up to batch rows of one table, until a transaction finds
// fewer, and returns how many it listed. A transaction holds the writer
// for its batch (a row costs 10-20 us), so others write between two.
func (s *Store) listUnlisted(ctx context.Context, batch int64) (int64, error) {
	var total int64
	for _, table := range []struct{ name, query string }{
		{"events", listEventsQuery},
		{"deliveries", listDeliveriesQuery},
	} {
		for {
			var n int64
			err := s.write(ctx, func(tx *sql.Tx) error {
				var err error
				n, err = execCount(ctx, tx, table.query, batch)
				return err
			})
			if err != nil {
				return total, fmt.Errorf("list %s: %w", table.name, err)
			}
			total += n
			if n < batch {
				break
			}
		}
	}
	return total, nil
}

// execCount runs a statement and returns the rows it changed.
func execCount(ctx context.Context, tx *sql.Tx, query string, args ...any) (int64, error) {
	res, err := tx.ExecContext(ctx, query, args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// listedOrNot is a read of table's rows that match w, newest first, at
// most limit of them, through a listing index: the union of that index's
// rows (listed) and the unlisted rows, read through unlistedIndex (as many
// as the lister left, a second's worth), each part newest first and cut
// at limit. It returns what a plain read would, but reads the listing
// index, which SQLite uses only for a query that names its condition.
// cols must include id.
func listedOrNot(cols, table, index, unlistedIndex string, w *where, limit int) (string, []any) {
	cond := strings.Join(w.conds, " AND ")
	if cond != "" {
		cond = " AND " + cond
	}
	part := func(idx, unlisted string) string {
		return `SELECT * FROM (SELECT ` + cols + ` FROM ` + table + ` INDEXED BY ` + idx +
			` WHERE ` + unlisted + cond + ` ORDER BY id DESC LIMIT ?)`
	}
	q := part(index, "unlisted IS NULL") + ` UNION ALL ` + part(unlistedIndex, "unlisted = 1") +
		` ORDER BY id DESC LIMIT ?`
	return q, slices.Concat(w.args, []any{limit}, w.args, []any{limit, limit})
}

// ownedRows is a condition on table's rows: those whose col is the
// argument, given twice, read through the listing index on col and the
// unlisted rows, for a statement that reads or changes all of them. Name
// the table NOT INDEXED in that statement, so that SQLite looks the rows
// up by rowid instead of walking another index.
func ownedRows(table, index, unlistedIndex, col string) string {
	return `rowid IN (SELECT rowid FROM ` + table + ` INDEXED BY ` + index + ` WHERE unlisted IS NULL AND ` + col + ` = ?
		UNION ALL SELECT rowid FROM ` + table + ` INDEXED BY ` + unlistedIndex + ` WHERE unlisted = 1 AND ` + col + ` = ?)`
}
