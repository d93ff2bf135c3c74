package dispatch

import (
	"context"
	"sync/atomic"

	"github.com/heraldhooks/herald/internal/logkey"
	"github.com/heraldhooks/herald/internal/store"
)

var _ store.Taker = (*Dispatcher)(nil)

// taking is where deliveries leased at ingest go: the slots and the jobs
// of a Run.
type taking struct {
	slots chan struct{}
	jobs  chan<- job
	// unwritten counts the slots taken by attempts that have ended,
	// whose outcomes wait to be written.
	unwritten *atomic.Int64
	// claiming counts the slots the claim loop holds for a claim under
	// way: no attempt runs in them.
	claiming *atomic.Int64
}

// takeFrom sets where Take hands its deliveries: t while a Run is under
// way, nil once it stops taking work.
func (d *Dispatcher) takeFrom(t *taking) {
	d.takerMu.Lock()
	defer d.takerMu.Unlock()
	d.taking = t
}

// takeBusyMax is how many attempts a node may have under way (slots
// taken, but for those of attempts that have ended and wait for their
// outcomes to be written, and those the claim loop holds for a claim
// under way) and still take work leased at ingest through
// Reserve (ReserveBatch has no such bound). Past it,
// deliveries arrive faster than one at a time, and claims, which take them
// many to a statement, cost less per delivery than leasing each ingest's
// few. Outcomes waiting to be written say how fast the database writes,
// not how fast deliveries come: counted, a slow outcome write turned a
// node from leasing to claims, and its latency from the attempt's own to
// the claim loop's.
const takeBusyMax = 48

// Reserve implements store.Taker: it takes up to n free slots without
// waiting, as the claim loop does, so that what an ingest leases to this
// node starts at once; none while more than takeBusyMax slots are taken.
// Slots reserved are not claimed for meanwhile.
func (d *Dispatcher) Reserve(n int) store.Reservation {
	return d.reserve(n, true)
}

// ReserveBatch implements store.Taker: Reserve for an ingest that
// leases many deliveries to a statement, as cheaply as a claim would,
// whatever the number of attempts under way.
func (d *Dispatcher) ReserveBatch(n int) store.Reservation {
	return d.reserve(n, false)
}

// reserve takes up to n free slots, none while more than takeBusyMax are
// taken if busyBound.
func (d *Dispatcher) reserve(n int, busyBound bool) store.Reservation {
	r := store.Reservation{From: d.cfg.Clock.Now(), LeaseMargin: d.cfg.LeaseMargin}
	d.takerMu.Lock()
	defer d.takerMu.Unlock()
	if d.taking == nil || n <= 0 {
		return r
	}
	under := cap(d.taking.slots) - len(d.taking.slots) - int(d.taking.unwritten.Load()) - int(d.taking.claiming.Load())
	if busyBound && under > takeBusyMax {
		return r
	}
	r.Slots = takeFree(d.taking.slots, n)
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
	for _, c := range claimed {
		d.taking.jobs <- job{c: c, leaseEnd: r.From.Add(params.LeaseFor(&c.Endpoint))}
	}
	for range r.Slots - len(claimed) {
		d.taking.slots <- struct{}{}
	}
}

// handBack hands back the leases of deliveries this node will not attempt.
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
		d.log.Warn("hand back deliveries leased at ingest", logkey.Error, err, logkey.Deliveries, len(leases))
	}
}
