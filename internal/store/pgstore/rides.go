package pgstore

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/heraldhooks/herald/internal/store"
)

// Outcome writes that ride an ingest: at low rates each transaction's
// fixed costs (its BEGIN and COMMIT, the WAL flush the commit waits for,
// the settings, a round trip) are most of what an outcome write costs
// the database and this process, and an ingest transaction begins every
// few milliseconds anyway. So an outcome write of plain successes
// (completePlain), while ingests are arriving, offers its statements to
// the next ingest transaction of this node, for at most rideWait; an
// ingest that takes them sends them right after its BEGIN, before its
// own, and the two commit together. The outcome write is answered with
// the ingest's fate: committed, or failed as a whole; then, if a plain
// check failed (herald_outcomes_not_plain), the outcomes take the
// breaker's path, and otherwise they are written alone, as if they had
// never ridden. The ingest, if its transaction failed with a rider on
// board and surely did not commit, is written again without it, so that
// a rider never fails an ingest.
//
// Locks: the rider's statements come first in the transaction, and its
// health statement takes its endpoints FOR KEY SHARE NOWAIT
// (plainSuccessRidingSQL): if a writer holds one FOR UPDATE (the
// breaker's path, disabling, deleting; claims hold theirs FOR NO KEY
// UPDATE, which it does not meet), the rider fails at once rather
// than hold the ingest back, and both are written again apart. What it
// holds then (its endpoints FOR KEY SHARE, its own deliveries, this
// node's activity row) no ingest waits for: ingests hold endpoints FOR
// KEY SHARE SKIP LOCKED and insert only new rows. Its once-a-second write
// of an endpoint's last success is skipped while a claim holds the row.

// rideWait is how long an outcome write waits for an ingest to carry it
// before it goes alone, when an ingest began within the last rideWait
// (otherwise it goes alone at once). At a steady moderate rate ingest
// transactions begin about once a lingerFor (groupcommit.go), as calls
// wait for company; a wait of three of those finds one nearly always. It
// delays only the outcome's record (its webhook has gone), and the
// outcomes that come meanwhile join the next write.
const rideWait = 3 * lingerFor

// maxRiders is the most outcomes that ride an ingest. A larger write
// comes of a load under which transactions are not what costs: it goes
// alone, beside the ingests rather than inside one, whose commit, and
// the ingest calls waiting on it, it would hold back.
const maxRiders = 32

// outcomeRide is one outcome write offered to an ingest.
type outcomeRide struct {
	// queries are the write's statements, without BEGIN or COMMIT.
	queries []*pgx.QueuedQuery
	// done receives the carrying transaction's error (nil: committed),
	// once. It is buffered, so the ingest never waits on it.
	done chan error
}

// rides is a Store's place for an outcome write waiting for a ride. Its
// zero value is ready for use.
type rides struct {
	waiting atomic.Pointer[outcomeRide]
	// lastIngest is when the last ingest transaction that could carry a
	// ride began, in unix nanoseconds.
	lastIngest atomic.Int64
	// wait is rideWait unless a test sets it.
	wait time.Duration
	// offered, when set (by tests), runs once a ride is offered.
	offered func()
}

// ride offers an outcome write's statements for n outcomes, queued by
// build, to the next ingest, and reports whether one took them and, if
// so, its transaction's error (nil: the write committed). It does not
// offer more than maxRiders outcomes, nor when no ingest began lately, or
// another write waits already; build is called only when it offers.
func (s *Store) ride(ctx context.Context, n int, build func() *pgx.Batch) (carried bool, err error) {
	wait := s.rides.wait
	if wait == 0 {
		wait = rideWait
	}
	if n > maxRiders || time.Since(time.Unix(0, s.rides.lastIngest.Load())) > wait || s.rides.waiting.Load() != nil {
		return false, nil
	}
	r := &outcomeRide{queries: build().QueuedQueries, done: make(chan error, 1)}
	if !s.rides.waiting.CompareAndSwap(nil, r) {
		return false, nil
	}
	if s.rides.offered != nil {
		s.rides.offered()
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case err := <-r.done:
		return true, err
	case <-timer.C:
	case <-ctx.Done():
	}
	if s.rides.waiting.CompareAndSwap(r, nil) {
		return false, nil
	}
	// Taken meanwhile: its ingest decides.
	return true, <-r.done
}

// takeRide takes the outcome write waiting for a ride, if any, for an
// ingest transaction that begins now.
func (s *Store) takeRide() *outcomeRide {
	s.rides.lastIngest.Store(time.Now().UnixNano())
	if s.rides.waiting.Load() == nil {
		return nil
	}
	return s.rides.waiting.Swap(nil)
}

// carrying runs write, an ingest in a batchTx of its own, carrying the
// outcome write waiting for a ride, if any, and tells that write whether
// its transaction surely committed. If the transaction failed with the
// rider on board and surely did not commit (a statement or the COMMIT
// refused; the rider's own failing, or its lock not to be had at once,
// among them), the ingest is written again without it.
func (s *Store) carrying(write func(r *outcomeRide) error) error {
	r := s.takeRide()
	if r == nil {
		return write(nil)
	}
	err := errRideAbandoned
	func() {
		// Sent whatever happens, so that the outcome write never waits
		// for an ingest that will not answer.
		defer func() { r.done <- riderFate(err) }()
		err = write(r)
	}()
	if notCommitted(err) {
		if isLockNotAvailable(err) {
			s.lockConflicts.Add(1)
		}
		return write(nil)
	}
	return err
}

// isLockNotAvailable says whether err is PostgreSQL's lock_not_available
// (55P03): a NOWAIT lock another transaction held.
func isLockNotAvailable(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "55P03"
}

var _ store.LockCounter = (*Store)(nil)

// LockConflicts implements store.LockCounter: the outcome writes riding
// an ingest that found an endpoint's row held (plainSuccessRidingSQL's
// NOWAIT) and were written again apart, the ingest without them.
func (s *Store) LockConflicts() int64 { return s.lockConflicts.Load() }

// errRideAbandoned is a ride's fate if its ingest never returned.
var errRideAbandoned = errors.New("the ingest carrying the outcomes did not finish")

// riderFate is what a rider is told of its ingest's error: nil if the
// transaction committed, err otherwise (then the rider writes itself
// again: if the COMMIT's fate is unknown, that may record its attempts
// twice, as an outcome write of its own whose COMMIT is lost does).
func riderFate(err error) error {
	var afterCommit errAfterCommit
	if errors.As(err, &afterCommit) {
		return nil
	}
	return err
}

// notCommitted says whether err, the failure of a batchTx's ingest, means
// its transaction surely did not commit: the endpoints read had changed,
// the COMMIT answered a rollback, or the database refused a statement or
// the COMMIT for a reason of the transaction's own. A failure of the
// connection, or the server's (PostgreSQL's classes 08, 57, 58 and XX),
// leaves a COMMIT sent with the statements unknown; so does any error
// that is not the database's answer.
func notCommitted(err error) bool {
	var afterCommit errAfterCommit
	if err == nil || errors.As(err, &afterCommit) {
		return false
	}
	if errors.Is(err, errEndpointsChanged) || errors.Is(err, pgx.ErrTxCommitRollback) {
		return true
	}
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || len(pgErr.Code) < 2 {
		return false
	}
	switch pgErr.Code[:2] {
	case "08", "57", "58", "XX":
		return false
	}
	return true
}

// carry makes r's statements go right after the transaction's BEGIN,
// before its own; their results are read, and skipped, with the BEGIN's.
// nil carries nothing. The statements are queued afresh, as a pgx batch's
// are sent once: an ingest written again (on changed endpoints) carries
// them again.
func (t *batchTx) carry(r *outcomeRide) {
	if r == nil {
		return
	}
	t.riders = make([]*pgx.QueuedQuery, len(r.queries))
	for i, q := range r.queries {
		t.riders[i] = &pgx.QueuedQuery{SQL: q.SQL, Arguments: q.Arguments}
	}
}
