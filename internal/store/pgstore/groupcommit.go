package pgstore

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/heraldhooks/herald/internal/store"
)

// Group commit: a transaction's fixed costs (its begin, its commit and the
// WAL flush the commit waits for, a pooled connection held throughout)
// and each statement's round trip dwarf one small event's rows, and
// single-event ingest calls arrive by the thousand. Calls that arrive
// while a group is being written wait in a queue (or, once
// moreLeadersQueue wait, lead a second group: at most defaultLeaders);
// the next leader takes the queue's head and writes it in one
// transaction, as one batch: the same few statements whatever the number
// of calls. If the batch fails, the group is written again with each call
// inside a savepoint of its own, so a call that fails rolls back alone and
// the others commit. Groups form when calls overlap, and, in a steady
// stream, when a call waits for company (below).
//
// At a steady moderate rate calls seldom overlap, and each would pay a
// transaction of its own: at 300 single events a second to one endpoint
// the statements' fixed costs were nine tenths of the database's CPU per
// event, and two events to a transaction cost it half as much each. So a
// call that comes while calls are arriving steadily (the one before it
// came within lingerFor) and finds no group being written nor any call
// waiting waits for company: for lingerFor, or until lingerGroup calls
// are there, then leads them as one group. A call after a quiet spell,
// and every call under load (which finds calls waiting or a group being
// written, or follows a group of lingerGroup calls or more), goes at
// once: there groups form by themselves, and a wait would only hold them
// back.
//
// A batch asks for one wake-up (pg_notify), delivered at its commit; so
// does each call written in a savepoint, and PostgreSQL delivers a
// channel's identical notifications of one transaction once and drops
// those of a savepoint rolled back. So a group wakes the dispatchers once.
//
// A group holds the locks of all its calls until it commits, and two
// groups are written at once: the statements of a batch take events by
// consumer and key and endpoint_queue marks by endpoint, and calls
// written one by one go in the order of their (first) consumer, so that
// two groups take the rows they share in the same order, as one call's
// statements do. Two groups can still cross (keys reused across event
// types, say): PostgreSQL then fails one batch with a deadlock error, and
// its group is written again call by call.

// Bounds on one group, so that a burst cannot make one transaction, and
// the wait of the calls behind it, unbounded. Written call by call, each
// call of a group is a subtransaction of its own, and PostgreSQL caches
// at most 64 of a transaction's subtransaction ids in shared memory: past
// that, every snapshot taken anywhere while the group is open has to look
// them up in pg_subtrans, which slows the whole server.
const (
	maxGroupCalls = 64
	maxGroupItems = 5000
)

// defaultLeaders is how many groups are written at once, each on a
// connection of its own. One at a time leaves the database idle while
// the leader waits for each statement's answer and for its commit's
// flush, and was slower than no groups at all; two keep both cores busy.
// More make the groups smaller for little more throughput, and hold more
// of the pool.
//
// The second leader starts only once moreLeadersQueue calls wait: at a
// low rate, where calls seldom overlap, two transactions at once each
// wanting to lease to the same endpoint made the second skip its locked
// row (leasing.go) and queue what it would have leased, which then cost
// a claim; calls that come while one transaction is written wait for it
// and share the next. (Tests that set maxLeaders get them at once.)
const (
	defaultLeaders   = 2
	moreLeadersQueue = 4
)

// lingerFor is the longest a call waits for company, and the gap between
// calls that counts as a steady stream; lingerGroup is the group that ends
// the wait. A wait adds up to lingerFor to an ingest call's answer at
// rates from about 1/lingerFor a second until groups form by themselves.
const (
	lingerFor   = 5 * time.Millisecond
	lingerGroup = moreLeadersQueue
)

// ingestGroups queues the EventIngest calls of a Store for group commit.
// Its zero value is ready for use.
type ingestGroups struct {
	mu sync.Mutex
	// queue holds the calls waiting for a group, oldest first.
	queue []*ingestCall
	// leaders counts the calls leading a group now, at most maxLeaders
	// (defaultLeaders when 0, a second only for a queue; tests set 1 to
	// make calls queue).
	leaders    int
	maxLeaders int
	// lastCall is when the last call came; lastGroup is the size of the
	// last group taken.
	lastCall  time.Time
	lastGroup int
	// company is open while a leader waits for company, and closed once
	// lingerGroup calls are there.
	company chan struct{}
	// linger is how long a call waits for company: lingerFor unless set
	// (by tests, before any call; negative: never).
	linger time.Duration

	// written counts the transactions the groups have opened, so that
	// tests can see calls share them.
	written atomic.Int64
	// beforeWrite, when set (by tests, before any call), runs in the
	// leader once it has taken a group of n calls, before it writes it.
	beforeWrite func(n int)
}

// ingestCall is one EventIngest call waiting for its group.
type ingestCall struct {
	ctx   context.Context
	items []store.EventIngestItem
	now   time.Time
	// done receives true when the call has been written or skipped
	// (results and err are set), or false when it must lead the next
	// group. It is buffered, so whoever sends never waits.
	done    chan bool
	results []store.EventIngestResult
	err     error
}

// groupIngest writes c, alone or with the calls queued beside it, and
// sets its outcome. A call whose context ends while it waits leaves the
// queue and answers the context's error at once, unless a leader has
// already taken it into a group: then it waits for that group's outcome,
// since its events may be committed.
func (s *Store) groupIngest(c *ingestCall) {
	g := &s.groups
	c.done = make(chan bool, 1)
	g.mu.Lock()
	linger := cmp.Or(g.linger, lingerFor)
	arrived := time.Now()
	steady := linger > 0 && arrived.Sub(g.lastCall) < linger
	g.lastCall = arrived
	lead := g.leaders < cmp.Or(g.maxLeaders, defaultLeaders) &&
		(g.leaders == 0 || g.maxLeaders > 0 || len(g.queue) >= moreLeadersQueue)
	var company chan struct{}
	if lead {
		if steady && g.leaders == 0 && len(g.queue) == 0 && g.lastGroup < lingerGroup {
			company = make(chan struct{})
			g.company = company
		}
		g.leaders++
	} else {
		g.queue = append(g.queue, c)
		if g.company != nil && len(g.queue)+1 >= lingerGroup {
			close(g.company)
			g.company = nil
		}
	}
	g.mu.Unlock()
	if company != nil {
		g.waitForCompany(c.ctx, company, linger)
	}
	if !lead {
		select {
		case written := <-c.done:
			if written {
				return
			}
		case <-c.ctx.Done():
			if g.leave(c) {
				c.err = c.ctx.Err()
				return
			}
			if written := <-c.done; written {
				return
			}
		}
	}
	s.leadGroup(c)
}

// waitForCompany waits, as a leader, for the calls that come within
// linger, until lingerGroup of them are there (company closed) or ctx
// ends.
func (g *ingestGroups) waitForCompany(ctx context.Context, company chan struct{}, linger time.Duration) {
	t := time.NewTimer(linger)
	defer t.Stop()
	select {
	case <-t.C:
	case <-company:
	case <-ctx.Done():
	}
	g.mu.Lock()
	if g.company == company {
		g.company = nil
	}
	g.mu.Unlock()
}

// leave takes c out of the queue if it is still there, and reports
// whether it did. A call no longer queued has been taken into a group, or
// named to lead one.
func (g *ingestGroups) leave(c *ingestCall) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	for i, q := range g.queue {
		if q == c {
			g.queue = append(g.queue[:i], g.queue[i+1:]...)
			return true
		}
	}
	return false
}

// leadGroup writes own, the leader's call, and the calls at the head of
// the queue in one transaction, then hands the lead to the first call
// left waiting, if any. Calls whose context has ended by then are
// skipped, not written.
func (s *Store) leadGroup(own *ingestCall) {
	g := &s.groups
	var group, skipped []*ingestCall
	items := 0
	take := func(c *ingestCall) bool {
		if c.ctx.Err() != nil {
			skipped = append(skipped, c)
			return true
		}
		if len(group) == maxGroupCalls || (len(group) > 0 && items+len(c.items) > maxGroupItems) {
			return false
		}
		group = append(group, c)
		items += len(c.items)
		return true
	}
	g.mu.Lock()
	take(own)
	n := 0
	for _, c := range g.queue {
		if !take(c) {
			break
		}
		n++
	}
	g.queue = append(g.queue[:0], g.queue[n:]...)
	g.lastGroup = len(group)
	g.mu.Unlock()
	for _, c := range skipped {
		c.err = c.ctx.Err()
	}
	if len(group) > 0 {
		if g.beforeWrite != nil {
			g.beforeWrite(len(group))
		}
		s.writeGroup(group)
	}

	// The next leader leaves the queue as it is named, so that no other
	// leader takes it into a group.
	g.mu.Lock()
	var next *ingestCall
	if len(g.queue) > 0 {
		next = g.queue[0]
		g.queue = append(g.queue[:0], g.queue[1:]...)
	} else {
		g.leaders--
	}
	g.mu.Unlock()
	for _, c := range skipped {
		c.done <- true
	}
	for _, c := range group {
		c.done <- true
	}
	if next != nil {
		next.done <- false
	}
}

// writeGroup writes a group in one transaction and sets each call's
// outcome. A lone call's transaction is its own, and runs on its context,
// as it would without groups, in two round trips (ingestAlone). A
// group's runs on a context that ends only when every one of its callers
// has given up, since one caller giving up must not break the others'
// transaction.
//
// A group is first written as one batch: its calls' events in the same
// few statements a single call of many events uses, so that the round
// trips a group costs do not grow with its calls. Calls of one consumer
// that share an idempotency key make one event, the later calls
// answering it as a duplicate, as the items of one call do. If the
// database refuses a statement (a call's bad event), the transaction is
// rolled back and the group written again call by call, each in a
// savepoint of its own, so that only the failing calls fail. If the
// transaction cannot commit, every call has that error, since none of it
// is written; so has every call when the connection fails once the
// COMMIT may have gone (ingestCalls), since all of it may be.
func (s *Store) writeGroup(group []*ingestCall) {
	s.groups.written.Add(1)
	if len(group) == 1 {
		c := group[0]
		c.results, c.err = s.ingestAlone(c.ctx, c.items, c.now)
		return
	}
	ctx, cancel := groupContext(group)
	defer cancel()
	ordered := slices.Clone(group)
	slices.SortStableFunc(ordered, func(a, b *ingestCall) int {
		return cmp.Compare(a.items[0].ConsumerID, b.items[0].ConsumerID)
	})
	batchErr := s.ingestGroupTx(ctx, ordered)
	if batchErr == nil {
		return
	}
	var callErr errCalls
	if !errors.As(batchErr, &callErr) {
		failGroup(group, batchErr)
		return
	}
	// A call's events failed: each call again, in its savepoint.
	for _, c := range group {
		c.results, c.err = nil, nil
	}
	s.groups.written.Add(1)
	err := s.inGenericTx(ctx, func(tx pgx.Tx) error {
		for i, c := range ordered {
			if err := s.ingestInSavepoint(ctx, tx, c, i == 0); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		failGroup(group, err)
	}
}

// errCalls is a batch's failure that the calls' own events may have
// caused: the batch is written again call by call.
type errCalls struct{ err error }

func (e errCalls) Error() string { return e.err.Error() }
func (e errCalls) Unwrap() error { return e.err }

// ingestGroupTx writes calls in one transaction. Calls that all ask for
// the same time (all of them, on the real clock) make one ingest in a
// batchTx, as for a lone call, its COMMIT sent with the deliveries, which
// carries an outcome write waiting for a ride (rides.go); others an
// ingest per time, in a pgx transaction. A
// statement's failure, which the calls' own events may have caused, is
// an errCalls; a failed COMMIT is not.
func (s *Store) ingestGroupTx(ctx context.Context, calls []*ingestCall) error {
	byNow := slices.Clone(calls)
	slices.SortStableFunc(byNow, func(a, b *ingestCall) int { return a.now.Compare(b.now) })
	if byNow[0].now.Equal(byNow[len(byNow)-1].now) {
		return s.inIngestTx(ctx, func(tx *batchTx) error {
			return s.ingestCalls(ctx, tx, tx, byNow)
		})
	}
	return s.inGenericTx(ctx, func(tx pgx.Tx) error {
		for len(byNow) > 0 {
			n := 1
			for n < len(byNow) && byNow[n].now.Equal(byNow[0].now) {
				n++
			}
			if err := s.ingestCalls(ctx, tx, nil, byNow[:n]); err != nil {
				return err
			}
			byNow = byNow[n:]
		}
		return nil
	})
}

// ingestCalls writes the events of calls that ask for one time as one
// ingest on q (committing tx, q itself, if it is not nil), and hands
// each call its results.
func (s *Store) ingestCalls(ctx context.Context, q queryer, tx *batchTx, calls []*ingestCall) error {
	var items []store.EventIngestItem
	for _, c := range calls {
		items = append(items, c.items...)
	}
	results, err := s.ingestOn(ctx, q, tx, items, calls[0].now)
	var failedCommit errCommit
	var afterCommit errAfterCommit
	var refused *pgconn.PgError
	switch {
	case err == nil:
	case ctx.Err() != nil || errors.As(err, &failedCommit) || errors.As(err, &afterCommit) || errors.Is(err, errEndpointsChanged):
		// Committed, or perhaps: the calls are not written again.
		return err
	case errors.As(err, &refused) || pgconn.SafeToRetry(err):
		// The database refused a statement, so the transaction is not
		// kept, or nothing was sent: the calls may be written again, each
		// on its own.
		return errCalls{err}
	default:
		// The connection failed with statements sent, a COMMIT among
		// them perhaps: the group may be written, and written again it
		// could be twice.
		return err
	}
	for _, c := range calls {
		c.results, results = results[:len(c.items):len(c.items)], results[len(c.items):]
	}
	return nil
}

// failGroup gives every call of a group that was not written err, unless
// the call has an error of its own.
func failGroup(group []*ingestCall, err error) {
	for _, c := range group {
		c.results = nil
		if c.err == nil {
			c.err = fmt.Errorf("write group of %d ingest calls: %w", len(group), err)
		}
	}
}

// groupContext is the context a group is written on: it carries the
// first call's values and ends once every call's context has ended.
func groupContext(group []*ingestCall) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.WithoutCancel(group[0].ctx))
	var left atomic.Int64
	left.Store(int64(len(group)))
	stops := make([]func() bool, len(group))
	for i, c := range group {
		stops[i] = context.AfterFunc(c.ctx, func() {
			if left.Add(-1) == 0 {
				cancel()
			}
		})
	}
	return ctx, func() {
		for _, stop := range stops {
			stop()
		}
		cancel()
	}
}

// ingestInSavepoint writes c inside a savepoint, so that a call that fails
// rolls back alone and keeps its own error. The savepoint of the call
// before is released in the same round trip as this one is made; the last
// is released by the commit. An error returned is one the transaction
// cannot go on after.
func (s *Store) ingestInSavepoint(ctx context.Context, tx pgx.Tx, c *ingestCall, first bool) error {
	sql := "RELEASE SAVEPOINT ingest_call; SAVEPOINT ingest_call"
	if first {
		sql = "SAVEPOINT ingest_call"
	}
	if _, err := tx.Exec(ctx, sql); err != nil {
		return err
	}
	c.results, c.err = s.ingest(ctx, tx, c.items, c.now)
	if c.err == nil {
		return nil
	}
	c.results = nil
	_, err := tx.Exec(ctx, "ROLLBACK TO SAVEPOINT ingest_call")
	return err
}
