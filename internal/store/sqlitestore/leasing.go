package sqlitestore

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/heraldhooks/herald"
	"github.com/heraldhooks/herald/internal/ratelimit"
	"github.com/heraldhooks/herald/internal/store"
)

// Leasing at ingest, as on PostgreSQL. With a taker (SetTaker: this
// node's dispatcher), an ingest group leases to it, in the transaction
// that inserts them, the deliveries a claim would take at once, and hands
// them over after the commit: they go out without a claim, its write
// transaction and its rewrite of each delivery row and of the index
// entries that move with its status and due time. The rest is queued, and
// the dispatchers woken, as ever.
//
// What a claim would take at once is decided as a claim decides it
// (store.LeasableAtIngest, on the endpoint's row read in the transaction):
// not FIFO, no rate limit, breaker closed, not paused, not slowed down,
// within the room under the endpoint's in-flight cap left by its leases
// and by its new deliveries already due (a claim takes those first). The
// transaction holds SQLite's one writer, so what it reads stays true until
// it commits: each endpoint's room is counted once per group, then kept
// in memory as the group leases.
//
// A delivery leased at ingest is a delivering row with lease token 1 and
// the lease's expiry as its due time, like one a claim leased; the insert
// trigger marks its endpoint due no later than that expiry, so that
// claims find it should the lease run out.

// SetTaker makes ingests on this store lease what they may to t, this
// node's dispatcher (see store.Taker); nil stops it.
func (s *Store) SetTaker(t store.Taker) { s.taker.Set(t) }

// leaseSlotsPerEvent is how many of the taker's slots a group reserves
// for each event, before it knows how many endpoints each goes to;
// maxLeaseSlots bounds a group's, so that a burst never holds the claim
// loop off the node's free slots. What a group leaves free goes back when
// it has committed.
const (
	leaseSlotsPerEvent = 4
	maxLeaseSlots      = 64
)

// groupLeasing is what an ingest group may lease: the taker's slots
// reserved for it, and what the group learnt of each endpoint.
type groupLeasing struct {
	taker store.Taker
	r     store.Reservation
	// sec opens the secrets of the endpoints leased to.
	sec store.Secrets
	// from is r.From to the microsecond above: a lease the group writes
	// runs out no earlier than the taker counts it to.
	from time.Time
	// slots are those of r not yet leased in the group.
	slots   int
	targets map[string]*leaseTarget
	// endpoints holds the endpoints read whole, when synced in the group's
	// transaction (endpointcache.go); nil otherwise.
	endpoints *endpointCache
}

// leaseTarget is what a group knows of an endpoint it ingests for.
type leaseTarget struct {
	id         string
	eventTypes []string
	// ep is the endpoint with its secrets open, nil when a claim would not
	// start its deliveries now (store.LeasableAtIngest).
	ep *herald.Endpoint
	// cap is its in-flight cap, and lease how long a lease of it lasts.
	cap   int
	lease time.Duration
	// room is how many more of its deliveries the group may lease; -1
	// until counted.
	room int
}

// reserveGroup reserves slots of the taker for a group of items events,
// or returns nil: no taker, or no slot free. The caller hands over (done)
// once the group has committed or failed.
func (s *Store) reserveGroup(items int) *groupLeasing {
	taker := s.taker.Get()
	if taker == nil {
		return nil
	}
	// Leases in the group's transaction cost less than a claim.
	r := taker.ReserveBatch(min(leaseSlotsPerEvent*items, maxLeaseSlots))
	if r.Slots == 0 {
		taker.Take(r, nil)
		return nil
	}
	from := r.From.Truncate(time.Microsecond)
	if from.Before(r.From) {
		from = from.Add(time.Microsecond)
	}
	return &groupLeasing{taker: taker, r: r, sec: s.secrets, from: from.UTC(), slots: r.Slots, targets: map[string]*leaseTarget{}}
}

// done hands the taker what the group leased (nothing when it failed), and
// the slots it leaves free.
func (l *groupLeasing) done(leased []*store.ClaimedDelivery) {
	l.taker.Take(l.r, leased)
}

// target is what the group knows of ep, read now in its transaction with
// its token bucket; an endpoint met before keeps what was learnt.
func (l *groupLeasing) target(ep *herald.Endpoint, b ratelimit.Bucket, sealed bool, t time.Time) *leaseTarget {
	if tg, ok := l.targets[ep.ID]; ok {
		return tg
	}
	tg := &leaseTarget{id: ep.ID, eventTypes: ep.EventTypes, room: -1}
	l.targets[ep.ID] = tg
	if !store.LeasableAtIngest(ep, b, t) {
		return tg
	}
	opened := *ep
	if err := l.sec.OpenEndpoint(&opened, sealed); err != nil {
		return tg // a claim meets the same, and says so
	}
	tg.ep = &opened
	tg.cap = ratelimit.MaxInFlight(ep, &ep.Health)
	tg.lease = (&store.DeliveryClaimParams{LeaseMargin: l.r.LeaseMargin}).LeaseFor(ep)
	return tg
}

// roomQuery counts, up to a cap, an endpoint's unexpired leases and its
// new deliveries already due, which a claim takes before anything an
// ingest could lease. Arguments: endpoint id, now, the cap.
const roomQuery = `SELECT
	(SELECT count(*) FROM (SELECT 1 FROM deliveries INDEXED BY deliveries_in_flight
		WHERE endpoint_id = ?1 AND status = 'delivering' AND due_at > ?2 LIMIT CAST(?3 AS INTEGER))),
	(SELECT count(*) FROM (SELECT 1 FROM deliveries INDEXED BY deliveries_endpoint_queue
		WHERE endpoint_id = ?1 AND status IN ` + liveStatuses + ` AND (attempt_count > 0) = 0 AND due_at <= ?2
		LIMIT CAST(?3 AS INTEGER)))`

// lease says whether the group leases a delivery to tg at t, counting its
// room on first use through room (roomQuery bound to the transaction),
// and takes a slot and a place under the cap if so.
func (l *groupLeasing) lease(ctx context.Context, room *sql.Stmt, id string, tg *leaseTarget, t time.Time) (bool, error) {
	if tg.ep == nil || l.slots == 0 {
		return false, nil
	}
	if tg.room < 0 {
		var leased, waiting int
		if err := room.QueryRowContext(ctx, id, micros(t), tg.cap).Scan(&leased, &waiting); err != nil {
			return false, fmt.Errorf("count the room of endpoint %s: %w", id, err)
		}
		tg.room = max(tg.cap-leased-waiting, 0)
	}
	if tg.room == 0 {
		return false, nil
	}
	tg.room--
	l.slots--
	return true, nil
}

// reset forgets what the group learnt and leased, for a transaction
// written again (writeGroup): the slots reserved stay.
func (l *groupLeasing) reset() {
	if l == nil {
		return
	}
	l.slots = l.r.Slots
	clear(l.targets)
	l.endpoints = nil
}

// giveBack returns the slots and places of deliveries leased in a
// savepoint that was rolled back.
func (l *groupLeasing) giveBack(leased []*store.ClaimedDelivery) {
	for _, c := range leased {
		l.unlease(l.targets[c.Delivery.EndpointID])
	}
}

// unlease returns the slot and the place of one lease to tg not written.
func (l *groupLeasing) unlease(tg *leaseTarget) {
	l.slots++
	tg.room++
}

// leaseExpiry is when a lease of tg taken by an ingest at t runs out:
// counted from t, or from the reservation if that is later.
func (l *groupLeasing) leaseExpiry(tg *leaseTarget, t time.Time) time.Time {
	if l.from.After(t) {
		t = l.from
	}
	return t.Add(tg.lease)
}
