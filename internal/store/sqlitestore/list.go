package sqlitestore

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"time"
)

// The lister moves new events and deliveries into the listings of the
// history (consumer_events, endpoint_deliveries, consumer_deliveries:
// migration 0020), listEvery apart (Store.listEvery), at most listBatch
// rows of one table a transaction. Until then a row is unlisted: a
// trigger queued it (unlisted_events, unlisted_deliveries), and the reads
// that list by consumer or endpoint read the queue too (listing). Written
// as each row arrives, an entry of a listing lands on its consumer's or
// endpoint's own page, a page write per delivery for each of the three;
// written in a batch, the entries of the batch's rows share those pages.
// A pass rewrites no row of the history, only the listings and the queue.
const (
	listEvery = time.Second
	listBatch = 500
)

// A queue's move: lastQuery finds the last of the batch (?: its size),
// the inserts copy the batch (n <= ?) into the listings, deleteQuery
// takes it out of the queue.
type listMove struct {
	name, lastQuery, deleteQuery string
	inserts                      []string
}

var listMoves = []listMove{
	{
		name:        "events",
		lastQuery:   `SELECT count(*), max(n) FROM (SELECT n FROM unlisted_events ORDER BY n LIMIT ?)`,
		deleteQuery: `DELETE FROM unlisted_events WHERE n <= ?`,
		inserts:     []string{`INSERT INTO consumer_events (owner, item) SELECT owner, item FROM unlisted_events WHERE n <= ?`},
	},
	{
		name:        "deliveries",
		lastQuery:   `SELECT count(*), max(n) FROM (SELECT n FROM unlisted_deliveries ORDER BY n LIMIT ?)`,
		deleteQuery: `DELETE FROM unlisted_deliveries WHERE n <= ?`,
		inserts: []string{
			`INSERT INTO endpoint_deliveries (owner, item) SELECT endpoint, item FROM unlisted_deliveries WHERE n <= ?`,
			`INSERT INTO consumer_deliveries (owner, item) SELECT consumer, item FROM unlisted_deliveries WHERE n <= ?`,
		},
	},
}

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

// listUnlisted lists the queued rows, events then deliveries, in
// transactions of up to batch rows of one table, until a transaction finds
// fewer, and returns how many it listed. A transaction holds the writer
// for its batch, so others write between two.
func (s *Store) listUnlisted(ctx context.Context, batch int64) (int64, error) {
	var total int64
	for _, m := range listMoves {
		for {
			var n int64
			err := s.write(ctx, func(tx *sql.Tx) error {
				var last sql.NullInt64
				if err := tx.QueryRowContext(ctx, m.lastQuery, batch).Scan(&n, &last); err != nil || n == 0 {
					return err
				}
				for _, q := range slices.Concat(m.inserts, []string{m.deleteQuery}) {
					if _, err := tx.ExecContext(ctx, q, last.Int64); err != nil {
						return err
					}
				}
				return nil
			})
			if err != nil {
				return total, fmt.Errorf("list %s: %w", m.name, err)
			}
			total += n
			if n < batch {
				break
			}
		}
	}
	return total, nil
}

// A listing is one of the history's listings: rows' rows listed by
// owner in table, and queue's column queueOwner for the rows not yet
// listed.
type listing struct {
	rows, table, queue, queueOwner string
}

var (
	eventsOfConsumer     = listing{rows: "events", table: "consumer_events", queue: "unlisted_events", queueOwner: "owner"}
	deliveriesOfEndpoint = listing{rows: "deliveries", table: "endpoint_deliveries", queue: "unlisted_deliveries", queueOwner: "endpoint"}
	deliveriesOfConsumer = listing{rows: "deliveries", table: "consumer_deliveries", queue: "unlisted_deliveries", queueOwner: "consumer"}
)

// newestFirst is a read of owner's rows that match w, newest first, at
// most limit of them, before cursor if it is not empty (w holds the
// condition on id too): the union of the rows listed, walked in the
// listing's order from the cursor, and those still queued (a second's
// worth), each part cut at limit. cols must include id.
func (l listing) newestFirst(cols, owner string, w *where, cursor string, limit int) (string, []any) {
	cond := strings.Join(w.conds, " AND ")
	if cond != "" {
		cond = " AND " + cond
	}
	listedArgs := []any{owner}
	from := ""
	if cursor != "" {
		from = " AND l.item < ?"
		listedArgs = append(listedArgs, cursor)
	}
	listed := `SELECT * FROM (SELECT ` + cols + ` FROM ` + l.table + ` AS l CROSS JOIN ` + l.rows +
		` ON ` + l.rows + `.id = l.item WHERE l.owner = ?` + from + cond + ` ORDER BY l.item DESC LIMIT ?)`
	unlisted := `SELECT * FROM (SELECT ` + cols + ` FROM ` + l.rows + ` WHERE id IN (SELECT item FROM ` + l.queue +
		` WHERE ` + l.queueOwner + ` = ?)` + cond + ` ORDER BY id DESC LIMIT ?)`
	q := listed + ` UNION ALL ` + unlisted + ` ORDER BY id DESC LIMIT ?`
	return q, slices.Concat(listedArgs, w.args, []any{limit, owner}, w.args, []any{limit, limit})
}

// ownedRows is a condition on the rows' rows: those of the owner given as
// the argument, twice, listed or queued, by rowid, for a statement that
// reads or changes all of them. Name the table NOT INDEXED in that
// statement, so that SQLite looks the rows up by rowid instead of walking
// another index.
func (l listing) ownedRows() string {
	return `rowid IN (SELECT rowid FROM ` + l.rows + ` WHERE id IN (SELECT item FROM ` + l.table + ` WHERE owner = ?
		UNION ALL SELECT item FROM ` + l.queue + ` WHERE ` + l.queueOwner + ` = ?))`
}
