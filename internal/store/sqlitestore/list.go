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

// queues are the listings of each table that queues its new rows, in the
// order a pass lists them: the listings of a table share its queue.
var queues = [][]listing{
	{eventsOfConsumer},
	{deliveriesOfEndpoint, deliveriesOfConsumer},
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
// fewer, and returns how many it listed. A transaction copies its batch
// into the listings and deletes it from the queue, rewriting no row of
// the history, and holds the writer only for that, so others write
// between two.
func (s *Store) listUnlisted(ctx context.Context, batch int64) (int64, error) {
	var total int64
	for _, listings := range queues {
		rows, queue := listings[0].rows, listings[0].queue
		for {
			var n int64
			err := s.write(ctx, func(tx *sql.Tx) error {
				var last sql.NullInt64
				err := tx.QueryRowContext(ctx, `SELECT count(*), max(n) FROM (SELECT n FROM `+queue+` ORDER BY n LIMIT ?)`,
					batch).Scan(&n, &last)
				if err != nil || n == 0 {
					return err
				}
				for _, l := range listings {
					// An entry already there is left as it is: a listing is
					// a set, and one row listed twice must not stop the
					// lister.
					if _, err := tx.ExecContext(ctx, `INSERT OR IGNORE INTO `+l.table+` (owner, item)
						SELECT `+l.queueOwner+`, item FROM `+queue+` WHERE n <= ?`, last.Int64); err != nil {
						return err
					}
				}
				_, err = tx.ExecContext(ctx, `DELETE FROM `+queue+` WHERE n <= ?`, last.Int64)
				return err
			})
			if err != nil {
				return total, fmt.Errorf("list %s: %w", rows, err)
			}
			total += n
			if n < batch {
				break
			}
		}
	}
	return total, nil
}

// A listing lists the rows of the table rows by owner: its table holds
// (owner, item) for the rows listed, and the column queueOwner of queue
// holds the owner of each row not yet listed.
type listing struct {
	rows, table, queue, queueOwner string
}

var (
	eventsOfConsumer     = listing{rows: "events", table: "consumer_events", queue: "unlisted_events", queueOwner: "owner"}
	deliveriesOfEndpoint = listing{rows: "deliveries", table: "endpoint_deliveries", queue: "unlisted_deliveries", queueOwner: "endpoint"}
	deliveriesOfConsumer = listing{rows: "deliveries", table: "consumer_deliveries", queue: "unlisted_deliveries", queueOwner: "consumer"}
)

// newestFirst is a read of owner's rows that match w, newest first, at
// most limit of them, those before cursor if it is not empty: the union
// of the rows listed, walked in the listing's order from the cursor, and
// those still queued (a second's worth), each part cut at limit. Each
// part starts from its owner's entries and looks its rows up by id, so
// that SQLite never walks another index of the rows (that of a status,
// in id order, would meet every row of the status). cols must include
// id; w must not hold the cursor.
func (l listing) newestFirst(cols, owner string, w *where, cursor string, limit int) (string, []any) {
	conds := slices.Clone(w.conds)
	args := slices.Clone(w.args)
	listedFrom, listedArgs := "", []any{owner}
	if cursor != "" {
		conds = append(conds, l.rows+".id < ?")
		args = append(args, cursor)
		listedFrom = " AND l.item < ?"
		listedArgs = append(listedArgs, cursor)
	}
	cond := ""
	if len(conds) > 0 {
		cond = " AND " + strings.Join(conds, " AND ")
	}
	// Each part is in the order of its driving table's item (the rows'
	// id), which the listing's key gives without a sort.
	part := func(from, alias, owned string) string {
		return `SELECT * FROM (SELECT ` + cols + ` FROM ` + from + ` AS ` + alias + ` CROSS JOIN ` + l.rows +
			` ON ` + l.rows + `.id = ` + alias + `.item WHERE ` + owned + cond + ` ORDER BY ` + alias + `.item DESC LIMIT ?)`
	}
	listed := part(l.table, "l", `l.owner = ?`+listedFrom)
	queued := part(l.queue, "q", `q.`+l.queueOwner+` = ?`)
	return listed + ` UNION ALL ` + queued + ` ORDER BY id DESC LIMIT ?`,
		slices.Concat(listedArgs, args, []any{limit, owner}, args, []any{limit, limit})
}

// ownedRows is a condition on the rows' rows: those of the owner given as
// the argument, twice, listed or queued, by rowid, for a statement that
// reads or changes all of them. Name the table NOT INDEXED in that
// statement, so that SQLite looks the rows up by rowid instead of walking
// another index.
func (l listing) ownedRows() string {
	return `rowid IN (SELECT r.rowid FROM ` + l.table + ` AS l CROSS JOIN ` + l.rows + ` AS r ON r.id = l.item WHERE l.owner = ?
		UNION ALL SELECT r.rowid FROM ` + l.queue + ` AS q CROSS JOIN ` + l.rows + ` AS r ON r.id = q.item WHERE q.` + l.queueOwner + ` = ?)`
}
