package sqlitestore

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/heraldhooks/herald/internal/store"
)

// Group commit: SQLite has one writer, and a transaction's fixed costs
// (begin, commit, the WAL frames of the index pages it touched) dwarf one
// small event's rows. Ingest calls that arrive while another is being
// written wait in a queue; the next one to write takes the whole queue
// into one transaction, each call inside a savepoint of its own, so a call
// that fails rolls back alone and the others commit. A lone call waits for
// no one: batches form only when calls overlap.

// Bounds on one group, so a burst cannot make one transaction, and the
// wait of the calls behind it, unbounded.
const (
	maxGroupCalls = 64
	maxGroupItems = 5000
)

// ingestCall is one EventIngest call waiting for its group.
type ingestCall struct {
	ctx   context.Context
	items []store.EventIngestItem
	t     time.Time
	// done receives true when the call has been written (results, created
	// and err are set), or false when it must lead the next group.
	done    chan bool
	results []store.EventIngestResult
	created bool
	err     error
}

// groupIngest writes c, alone or with the calls queued beside it, and
// sets its outcome. A call whose context ends while it waits stays queued
// (the lead may pass through it) and is then skipped, not written.
func (s *Store) groupIngest(st *statements, c *ingestCall) {
	c.done = make(chan bool, 1)
	s.groupMu.Lock()
	s.groupQueue = append(s.groupQueue, c)
	lead := !s.groupBusy
	s.groupBusy = true
	s.groupMu.Unlock()
	if !lead {
		if written := <-c.done; written {
			return
		}
	}
	s.leadGroup(st)
}

// leadGroup writes the calls at the head of the queue in one transaction,
// then hands the lead to the first call left waiting, if any.
func (s *Store) leadGroup(st *statements) {
	s.groupMu.Lock()
	n, items := 0, 0
	for n < len(s.groupQueue) && n < maxGroupCalls && (n == 0 || items+len(s.groupQueue[n].items) <= maxGroupItems) {
		items += len(s.groupQueue[n].items)
		n++
	}
	group := append([]*ingestCall(nil), s.groupQueue[:n]...)
	s.groupQueue = append(s.groupQueue[:0], s.groupQueue[n:]...)
	s.groupMu.Unlock()

	s.writeGroup(st, group)
	created := false
	for _, c := range group {
		created = created || (c.err == nil && c.created)
	}
	if created {
		s.notify()
	}

	s.groupMu.Lock()
	var next *ingestCall
	if len(s.groupQueue) > 0 {
		next = s.groupQueue[0]
	} else {
		s.groupBusy = false
	}
	s.groupMu.Unlock()
	for _, c := range group {
		c.done <- true
	}
	if next != nil {
		next.done <- false
	}
}

// writeGroup writes a group in one transaction and sets each call's
// outcome. A call whose own context has ended by its turn is not written.
// The transaction runs on a context no single caller can cancel.
func (s *Store) writeGroup(st *statements, group []*ingestCall) {
	var live []*ingestCall
	for _, c := range group {
		if c.err = c.ctx.Err(); c.err == nil {
			live = append(live, c)
		}
	}
	if len(live) == 0 {
		return
	}
	ctx := context.WithoutCancel(live[0].ctx)
	err := s.write(ctx, func(tx *sql.Tx) error {
		if len(live) == 1 { // alone, the transaction is its savepoint
			c := live[0]
			c.results, c.created, c.err = ingest(ctx, tx, st, c.items, c.t)
			return c.err
		}
		for _, c := range live {
			if err := ingestInSavepoint(ctx, tx, st, c); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		// Nothing committed: every call written fails.
		for _, c := range live {
			c.results, c.created = nil, false
			if c.err == nil {
				c.err = fmt.Errorf("write group of %d ingest calls: %w", len(live), err)
			}
		}
	}
}

// ingestInSavepoint writes c inside a savepoint, so that a call that fails
// rolls back alone and sets its own error. An error returned is one the
// transaction cannot go on after.
func ingestInSavepoint(ctx context.Context, tx *sql.Tx, st *statements, c *ingestCall) error {
	if _, err := tx.ExecContext(ctx, "SAVEPOINT ingest_call"); err != nil {
		return err
	}
	c.results, c.created, c.err = ingest(ctx, tx, st, c.items, c.t)
	if c.err != nil {
		c.results, c.created = nil, false
		if _, err := tx.ExecContext(ctx, "ROLLBACK TO ingest_call"); err != nil {
			return err
		}
	}
	_, err := tx.ExecContext(ctx, "RELEASE ingest_call")
	return err
}
