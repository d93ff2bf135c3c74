package dispatch

import (
	"context"
	"sync"
	"time"

	"github.com/heraldhooks/herald/internal/logkey"
	"github.com/heraldhooks/herald/internal/store"
)

var _ store.Taker = (*Dispatcher)(nil)

// taking is where deliveries leased at ingest go: the slots and the jobs
// of a Run.
type taking struct {
	slots chan struct{}
	jobs  chan<- job
	spawn func() // starts a worker in the place of an attempt turned long
}

// takeFrom sets where Take hands its deliveries: t while a Run is under
// way, nil once it stops taking work.
func (d *Dispatcher) takeFrom(t *taking) {
	d.takerMu.Lock()
	defer d.takerMu.Unlock()
	d.taking = t
}

// takeBusyMax is how many deliveries a node may have handed to its
// workers (claimed, or leased at ingest) over the last takeBusyWindow and
// still take work leased at ingest through Reserve (ReserveBatch has no
// such bound). Past it, deliveries arrive faster than one at a time, and
// claims, which take them many to a statement, cost less per delivery
// than leasing each ingest's few. What counts is how fast work arrives,
// not how much is under way: attempts waiting on slow receivers cost the
// node nothing, and counted, they turned a node with receivers answering
// in 250 ms from leasing to claims at a few hundred deliveries a second,
// and its latency from an ingest's own to the claim loop's.
const takeBusyMax = 48

// takeBusyWindow is the span over which takeBusyMax counts: 48 in 20 ms
// is 2,400 deliveries a second.
const takeBusyWindow = 20 * time.Millisecond

// begunWindow counts what was handed to workers over the last
// takeBusyWindow, in buckets of a millisecond of the dispatcher's clock.
// Its zero value is ready for use.
type begunWindow struct {
	mu      sync.Mutex
	buckets [32]struct {
		ms int64
		n  int
	}
}

// add counts n deliveries handed to workers at now.
func (w *begunWindow) add(now time.Time, n int) {
	if n <= 0 {
		return
	}
	ms := now.UnixMilli()
	w.mu.Lock()
	defer w.mu.Unlock()
	b := &w.buckets[ms%int64(len(w.buckets))]
	if b.ms != ms {
		b.ms, b.n = ms, 0
	}
	b.n += n
}

// count is how many were handed to workers over the takeBusyWindow
// before now.
func (w *begunWindow) count(now time.Time) int {
	ms := now.UnixMilli()
	span := takeBusyWindow.Milliseconds()
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, b := range w.buckets {
		if b.ms > ms-span && b.ms <= ms {
			n += b.n
		}
	}
	return n
}

// Reserve implements store.Taker: it takes up to n free slots without
// waiting, as the claim loop does, so that what an ingest leases to this
// node starts at once; none while more than takeBusyMax deliveries were
// handed to workers over the last takeBusyWindow. Slots reserved are not
// claimed for meanwhile.
func (d *Dispatcher) Reserve(n int) store.Reservation {
	return d.reserve(n, true)
}

// ReserveBatch implements store.Taker: Reserve for an ingest that
// leases many deliveries to a statement, as cheaply as a claim would,
// whatever the number of attempts under way.
func (d *Dispatcher) ReserveBatch(n int) store.Reservation {
	return d.reserve(n, false)
}

// reserve takes up to n free slots, none while the node is busy (see
// takeBusyMax) if busyBound.
func (d *Dispatcher) reserve(n int, busyBound bool) store.Reservation {
	r := store.Reservation{From: d.cfg.Clock.Now(), LeaseMargin: d.cfg.LeaseMargin}
	d.takerMu.Lock()
	defer d.takerMu.Unlock()
	if d.taking == nil || n <= 0 {
		return r
	}
	if busyBound && d.begun.count(r.From) > takeBusyMax {
		return r
	}
	r.Slots = takeFree(d.taking.slots, n)
	if r.Slots < n {
		// Attempts that have run LongAfter give their slots here too,
		// not only when the claim loop waits for one: while it sleeps
		// (nothing due), receivers that hang would otherwise hold every
		// slot, and each ingest's deliveries wait for a claim.
		r.Slots += d.turnLong(n-r.Slots, d.taking.spawn)
	}
	r.Ref = d.taking
	return r
}

// Take implements store.Taker: each delivery leased at ingest goes to a
// worker, with its lease counted from r.From, and the slots left over go
// back. Deliveries that come after this node stopped taking work (a Run
// that ended between the reservation and the commit) have their leases
// handed back, so that a claim takes them at once.
func (d *Dispatcher) Take(r store.Reservation, claimed []*store.ClaimedDelivery) {
	if r.Slots == 0 {
		return
	}
	d.takerMu.Lock()
	if d.taking == nil || r.Ref != d.taking {
		d.takerMu.Unlock()
		d.handBack(claimed) // the database, outside the lock
		return
	}
	defer d.takerMu.Unlock()
	params := store.DeliveryClaimParams{LeaseMargin: r.LeaseMargin}
	d.begun.add(d.cfg.Clock.Now(), len(claimed))
	for _, c := range claimed {
		d.taking.jobs <- job{c: c, leaseEnd: r.From.Add(params.LeaseFor(&c.Endpoint))}
	}
	for range r.Slots - len(claimed) {
		d.taking.slots <- struct{}{}
	}
}

// handBack hands back the leases of deliveries this node will not attempt
// (leased at ingest after its Run ended, or suspects beside the one it
// runs), fenced by their tokens.
func (d *Dispatcher) handBack(claimed []*store.ClaimedDelivery) {
	if len(claimed) == 0 {
		return
	}
	leases := make([]store.Lease, len(claimed))
	for i, c := range claimed {
		leases[i] = store.Lease{DeliveryID: c.Delivery.ID, LeaseToken: c.LeaseToken}
	}
	ctx, cancel := context.WithTimeout(context.Background(), defaultOutcomeRetryFor)
	defer cancel()
	err := d.cfg.Store.DeliveryRelease(ctx, &store.DeliveryReleaseParams{Leases: leases, Now: d.cfg.Clock.StoreNow()})
	if err != nil {
		// The leases run out by themselves, and the deliveries are
		// claimed then.
		d.log.Warn("hand back deliveries", logkey.Error, err, logkey.Deliveries, len(leases))
	}
}
