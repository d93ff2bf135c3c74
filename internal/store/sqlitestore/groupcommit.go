package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/heraldhooks/herald/internal/store"
)

// Group commit: SQLite has one writer, and a transaction's fixed costs
// (begin, commit, the WAL frames of the index pages it touched) dwarf one
// small event's rows. Ingest calls that arrive while another is being
// written wait in a queue; the next one to write takes the whole queue
// into one transaction (writeGroup), so that one commit writes the pages
// all of them touched; a call that fails rolls back alone and the others
// commit. A lone call waits for no one: batches form only when calls
// overlap.
//
// An outcome write (DeliveryCompleteMany) that comes while calls wait for
// the next group rides that group: its statements run first in the
// group's transaction, and one commit writes the pages both touched (the
// deliveries' rows, the queue's indexes, the activity row) and waits for
// one WAL sync. A ride is answered with the group's commit; should the
// transaction fail, the group is written again without its riders, which
// then write alone, as if they had never ridden: a rider never fails an
// ingest call, nor an ingest call a rider.

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
	// done receives true when the call has been written (results, out
	// and err are set), or false when it must lead the next group.
	done    chan bool
	results []store.EventIngestResult
	out     ingested
	err     error
}

// outcomeRide is an outcome write riding an ingest group (writeOutcome).
type outcomeRide struct {
	ctx   context.Context
	write func(tx *sql.Tx) error
	// err is the ride's outcome once done is closed: nil once the group
	// committed it, errNotCarried if it must be written alone.
	err  error
	done chan struct{}
}

// errNotCarried is a ride its group did not commit.
var errNotCarried = errors.New("not carried by an ingest group")

// writeOutcome runs write, an outcome write, in a write transaction: that
// of the next ingest group when calls wait for one (so that a group is
// sure to come and take it), or else one of its own.
func (s *Store) writeOutcome(ctx context.Context, write func(tx *sql.Tx) error) error {
	s.groupMu.Lock()
	if !s.groupBusy || len(s.groupQueue) == 0 {
		s.groupMu.Unlock()
		return s.write(ctx, write)
	}
	r := &outcomeRide{ctx: ctx, write: write, done: make(chan struct{})}
	s.groupRides = append(s.groupRides, r)
	s.groupMu.Unlock()
	// Waited for whatever ctx does: the group's transaction may be running
	// the write.
	<-r.done
	if errors.Is(r.err, errNotCarried) {
		return s.write(ctx, write)
	}
	return r.err
}

// endRides answers rides with err.
func endRides(rides []*outcomeRide, err error) {
	for _, r := range rides {
		r.err = err
		close(r.done)
	}
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
	rides := s.groupRides
	s.groupRides = nil
	s.groupMu.Unlock()

	s.writeGroup(st, group, rides)
	queued := false
	for _, c := range group {
		queued = queued || (c.err == nil && c.out.queued)
	}
	if queued {
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

// writeGroup writes a group in one transaction, with the outcome writes
// riding it, and sets each call's outcome and answers each ride. A call
// or ride whose own context has ended by its turn is not written.
// The transaction runs on a context no single caller can cancel. With a
// taker, the group leases what it may (leasing.go) and hands it over once
// committed.
//
// The calls are written one after the other, without savepoints: a
// savepoint has SQLite keep the first version of each page changed within
// it, which costs a group more than its own statements. Should a call
// fail, the whole transaction rolls back and the group is written again
// with each call in a savepoint, so that the call fails alone.
func (s *Store) writeGroup(st *statements, group []*ingestCall, rides []*outcomeRide) {
	var live []*ingestCall
	items := 0
	for _, c := range group {
		if c.err = c.ctx.Err(); c.err == nil {
			live = append(live, c)
			items += len(c.items)
		}
	}
	rides = slices.DeleteFunc(rides, func(r *outcomeRide) bool {
		if r.ctx.Err() != nil {
			endRides([]*outcomeRide{r}, errNotCarried)
			return true
		}
		return false
	})
	if len(live) == 0 {
		endRides(rides, errNotCarried)
		return
	}
	l := s.reserveGroup(items)
	var leased []*store.ClaimedDelivery
	if l != nil {
		// Handed over once, whatever happens: what committed, or nothing.
		defer func() { l.done(leased) }()
	}
	ctx := context.WithoutCancel(live[0].ctx)
	err := s.writeCalls(ctx, st, rides, live, l, false)
	if err != nil && len(rides) > 0 {
		// Nothing committed: the riders write alone, and the group goes
		// on as if they had never ridden.
		endRides(rides, errNotCarried)
		rides = nil
		if !slices.ContainsFunc(live, func(c *ingestCall) bool { return c.err != nil }) {
			for _, c := range live {
				c.results, c.out = nil, ingested{}
			}
			l.reset()
			err = s.writeCalls(ctx, st, nil, live, l, false)
		}
	}
	if err != nil && len(live) > 1 && slices.ContainsFunc(live, func(c *ingestCall) bool { return c.err != nil }) {
		for _, c := range live {
			c.results, c.out, c.err = nil, ingested{}, nil
		}
		l.reset()
		err = s.writeCalls(ctx, st, nil, live, l, true)
	}
	if err != nil {
		// Nothing committed: every call written fails.
		for _, c := range live {
			c.results, c.out = nil, ingested{}
			if c.err == nil {
				c.err = fmt.Errorf("write group of %d ingest calls: %w", len(live), err)
			}
		}
		return
	}
	endRides(rides, nil)
	for _, c := range live {
		leased = append(leased, c.out.leased...)
	}
}

// writeCalls writes the rides, then calls, in one transaction, each call
// in a savepoint of its own if savepoints (see writeGroup), and commits
// it. Without savepoints it stops at the first call that fails, which
// keeps its error.
func (s *Store) writeCalls(ctx context.Context, st *statements, rides []*outcomeRide, calls []*ingestCall, l *groupLeasing, savepoints bool) error {
	return s.write(ctx, func(tx *sql.Tx) error {
		for _, r := range rides {
			if err := r.write(tx); err != nil {
				return err
			}
		}
		seq := newSeqCounter(ctx, tx, st)
		if l != nil {
			l.endpoints = nil
			kept, err := s.endpoints.sync(ctx, tx.StmtContext(ctx, st.endpointsVersion))
			if err != nil {
				return err
			}
			if kept {
				l.endpoints = &s.endpoints
			}
		}
		for _, c := range calls {
			if !savepoints {
				if c.results, c.out, c.err = ingest(ctx, tx, st, seq, c.items, c.t, l); c.err != nil {
					return c.err
				}
				continue
			}
			if err := ingestInSavepoint(ctx, tx, st, seq, c, l); err != nil {
				return err
			}
		}
		return seq.save(ctx)
	})
}

// ingestInSavepoint writes c inside a savepoint, so that a call that fails
// rolls back alone and sets its own error. An error returned is one the
// transaction cannot go on after.
func ingestInSavepoint(ctx context.Context, tx *sql.Tx, st *statements, seq *seqCounter, c *ingestCall, l *groupLeasing) error {
	if _, err := tx.ExecContext(ctx, "SAVEPOINT ingest_call"); err != nil {
		return err
	}
	c.results, c.out, c.err = ingest(ctx, tx, st, seq, c.items, c.t, l)
	if c.err != nil {
		if l != nil {
			l.giveBack(c.out.leased)
		}
		c.results, c.out = nil, ingested{}
		if _, err := tx.ExecContext(ctx, "ROLLBACK TO ingest_call"); err != nil {
			return err
		}
	}
	_, err := tx.ExecContext(ctx, "RELEASE ingest_call")
	return err
}
