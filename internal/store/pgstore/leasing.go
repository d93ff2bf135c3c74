package pgstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/heraldhooks/herald"
	"github.com/heraldhooks/herald/internal/logkey"
	"github.com/heraldhooks/herald/internal/ratelimit"
	"github.com/heraldhooks/herald/internal/store"
)

// Leasing at ingest. With a taker (SetTaker: this node's dispatcher), an
// ingest leases to it, in its own transaction, the deliveries a claim
// would take at once, and hands them over after the commit: they go out
// without a claim, its transaction and its update of each delivery and
// queue row, and without waking any node. The rest is queued as ever.
//
// Go picks the endpoints a claim could start work for now, from the rows
// ingest reads anyway (read whole when there is a taker): not FIFO, no
// rate limit, breaker closed, not paused, with room under the in-flight
// cap (ratelimit.Allowance). In the database, in the batch that commits:
//
//  1. ingestLeasingSQL (ingestLockSQL's queue settings and locks, but
//     not the wake-up) holds those endpoints FOR KEY SHARE, skipping any
//     that a writer of its health or state holds (the breaker's path,
//     disabling, deleting: SKIP LOCKED, never waiting), and takes, of
//     each, shards of its in-flight cap with room enough (migration 0024:
//     each shard a lock one writer, ingest or claim, holds at a time,
//     never waited for), and names them for the statement that follows
//     (herald.leasing). Other ingests and claims leasing to the same
//     endpoint take other shards, side by side; an endpoint whose shards
//     are all held gets its deliveries queued;
//  2. insertLeasingDeliveriesSQL, a statement after the lock, leases, in
//     ingest order, up to the room the shards had when taken, less the
//     endpoint's new deliveries already due (a claim will take those,
//     first: they keep their room, as far as these shards go), and the
//     slots reserved in all; each lease's queue row names its shard;
//  3. the wake-up is sent, by the same statement, when something was
//     queued, or when an endpoint it leased to has work due now that is
//     not leased: a claim meanwhile may have found the shards this
//     transaction held, and would otherwise leave the work to its next
//     poll.
//
// A delivery leased at ingest is a delivering row with lease token 1 and
// the lease's expiry as its due time, like one a claim leased; its
// endpoint's due mark is no later than that expiry, so that claims find
// it should the lease run out.

// ingestLeasingSQL is ingestLockSQL without the wake-up (the endpoints
// of the deliveries in $1), which also takes, of each endpoint in $2 that
// no writer of its health or state holds, shards of its in-flight cap
// ($5) with room for the $6 deliveries this ingest has for it and for
// the endpoint's new deliveries already due, which the next statement
// leaves their room (herald_take_shards, migration 0024), and names them
// with their rooms, for the rest of the transaction, in herald.leasing
// ("endpoint:shard:room,..."). Where those already due are as many as
// the cap has room for, as this statement's snapshot counts them, it
// takes none: it could lease nothing, and the shards it held would keep
// the claim that comes for them from the room they need.
// The queue's advisory locks come first: a writer that holds one of them
// never waits for an endpoint's row or a shard.
//
// Go chose the endpoints on rows read before the lock; the lock takes
// only those that are still as read where the choice depends on it,
// checked on the row locked: configuration unchanged since the read ($3,
// updated_at, which every change of an endpoint's settings, secrets or
// state moves), enabled, breaker closed, not blocked at the ingest's now
// $4 (blocked_until: a pause or the breaker's probe time, on the
// database's clock), and not slowed down by 429s (rate factor 1: the cap
// Go computed holds). Its gate is held shared and its row FOR KEY SHARE
// (gate.go): the writers that change those (the gate, then FOR UPDATE)
// wait for this transaction, or it skips the endpoint, as it does while
// one waits; claims, other ingests and outcome writes go on beside it.
var ingestLeasingSQL = "SELECT " + ingestQueuesCols("$1") + `, (
	SELECT set_config('herald.leasing', coalesce(string_agg(l.id || ':' || s.shard || ':' || s.room, ','), ''), true)
	FROM (
		SELECT e.id, r.cap, r.want FROM endpoints e
		JOIN unnest($2::text[], $3::timestamptz[], $5::int[], $6::int[]) AS r(id, updated_at, cap, want)
			ON r.id = e.id AND r.updated_at = e.updated_at
		WHERE e.id = ANY($2::text[])
			AND e.enabled
			AND (e.blocked_until IS NULL OR e.blocked_until <= coalesce($4::timestamptz, now()))
			AND coalesce(e.health->>'breaker_state', '') IN ('', 'closed')
			AND coalesce((e.health->>'rate_factor')::float8, 1) >= 1
			AND ` + gateTryShared("e.id") + `
		ORDER BY e.id
		FOR KEY SHARE OF e SKIP LOCKED) AS l
	CROSS JOIN LATERAL (
		SELECT (
			SELECT count(*) FROM (
				SELECT 1 FROM delivery_queue w
				WHERE w.endpoint_id = l.id AND w.kind = 0 AND w.due_at <= coalesce($4::timestamptz, now())
				LIMIT l.cap) AS w)::int AS waiting, (
			SELECT count(*) FROM (
				SELECT 1 FROM delivery_queue f
				WHERE f.endpoint_id = l.id AND f.leased AND f.due_at > coalesce($4::timestamptz, now())
				LIMIT l.cap) AS f)::int AS leased
		OFFSET 0) AS q
	CROSS JOIN LATERAL herald_take_shards(l.id, l.cap, coalesce($4::timestamptz, now()),
		CASE WHEN q.waiting < l.cap - q.leased THEN l.want + q.waiting ELSE 0 END) AS s)`

// insertLeasingDeliveriesSQL is insertDeliveriesSQL leasing what it may:
// $7 the endpoints Go found could start work, $8 their in-flight caps, $9
// their lease lengths in microseconds, $10 the slots reserved, $11 the
// channel that wakes the dispatchers. Of those, it leases only to the
// endpoints ingestLeasingSQL named in herald.leasing, each up to the room
// of the shard taken there, and its queue rows name that shard. It returns the deliveries leased,
// and wakes every node at the commit unless every delivery was and the
// endpoints it locked have no other work due (woke, a CTE the insert
// reads, so that it runs once whatever is returned).
var insertLeasingDeliveriesSQL = `
WITH n AS (
	SELECT coalesce($6::timestamptz, now()) AS t
), u AS (
	SELECT u.*, row_number() OVER (PARTITION BY u.endpoint_id ORDER BY u.ord) AS k
	FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[])
		WITH ORDINALITY AS u(id, event_id, endpoint_id, consumer_id, event_type, ord)
), held AS (
	-- The shards taken, each with the last place (upto) of the deliveries
	-- of its endpoint, in ingest order, that its room holds.
	SELECT h.endpoint_id, h.shard,
		sum(h.room) OVER (PARTITION BY h.endpoint_id ORDER BY h.ord) AS upto
	FROM (
		SELECT split_part(z.x, ':', 1) AS endpoint_id, split_part(z.x, ':', 2)::int AS shard,
			split_part(z.x, ':', 3)::int AS room, z.ord
		FROM unnest(string_to_array(current_setting('herald.leasing'), ',')) WITH ORDINALITY AS z(x, ord)
	) AS h
), locked AS (
	SELECT x.endpoint_id, x.lease_us,
		(SELECT max(h.upto) FROM held h WHERE h.endpoint_id = x.endpoint_id) AS room, (
		SELECT count(*) FROM (
			SELECT 1 FROM delivery_queue w
			WHERE w.endpoint_id = x.endpoint_id AND w.kind = 0 AND w.due_at <= n.t
			LIMIT x.cap) AS waiting) AS waiting,
		EXISTS (
			SELECT 1 FROM delivery_queue r
			WHERE r.endpoint_id = x.endpoint_id AND r.kind = 1 AND r.due_at <= n.t) AS retries
	FROM unnest($7::text[], $8::int[], $9::bigint[]) AS x(endpoint_id, cap, lease_us), n
	WHERE x.endpoint_id IN (SELECT endpoint_id FROM held)
), pick AS (
	SELECT u.id, l.lease_us, (
		SELECT h.shard FROM held h
		WHERE h.endpoint_id = u.endpoint_id AND h.upto >= u.k
		ORDER BY h.upto LIMIT 1) AS shard
	FROM u JOIN locked l ON l.endpoint_id = u.endpoint_id
	WHERE u.k <= l.room - l.waiting
	ORDER BY u.ord
	LIMIT $10
), woke AS MATERIALIZED (
	SELECT count(*) AS n FROM (
		SELECT pg_notify($11, '')
		WHERE (SELECT count(*) FROM u) > (SELECT count(*) FROM pick)
			OR EXISTS (SELECT 1 FROM locked WHERE waiting > 0 OR retries)) AS z
), ins AS (
	INSERT INTO deliveries (id, event_id, endpoint_id, consumer_id, event_type,
		status, lease_token, due_at, created_at, updated_at)
	SELECT u.id, u.event_id, u.endpoint_id, u.consumer_id, u.event_type,
		CASE WHEN p.id IS NULL THEN 'pending' ELSE 'delivering' END,
		CASE WHEN p.id IS NULL THEN 0 ELSE 1 END,
		CASE WHEN p.id IS NULL THEN n.t ELSE n.t + p.lease_us * interval '1 microsecond' END,
		n.t, n.t
	FROM u CROSS JOIN n CROSS JOIN woke LEFT JOIN pick p ON p.id = u.id
	ORDER BY u.ord
	RETURNING ` + deliveryCols + `, seq
), ` + ingestQueuesCTEsSharded("(SELECT p.shard FROM pick p WHERE p.id = ins.id)") + `
SELECT ` + qualify("ins", deliveryCols) + `
FROM ins
WHERE status = 'delivering'
ORDER BY ins.seq`

// SetTaker makes ingests on this store lease what they may to t, this
// node's dispatcher (see store.Taker); nil stops it.
func (s *Store) SetTaker(t store.Taker) { s.taker.Set(t) }

// leasing is what an ingest may lease: the slots reserved, and the
// endpoints that could start work now, whole and with their secrets open.
type leasing struct {
	taker     store.Taker
	r         store.Reservation
	handed    bool
	ids       []string
	updatedAt []time.Time // as read: the lock takes endpoints still so
	caps      []int32
	wants     []int32 // the ingest's deliveries to each endpoint
	leaseUS   []int64
	byID      map[string]*herald.Endpoint
}

// reserve reserves slots of the taker for an ingest of n events that
// commits tx, and returns them, or nil: no taker, no batchTx (an ingest on
// a pgx transaction, or the notifications of an outcome write), or no
// slot free. The caller calls done when the ingest is over.
func (s *Store) reserve(tx *batchTx, n int) *leasing {
	taker := s.taker.Get()
	if taker == nil || tx == nil {
		return nil
	}
	r := taker.Reserve(n)
	if r.Slots == 0 {
		taker.Take(r, nil)
		return nil
	}
	return &leasing{taker: taker, r: r}
}

// handOver gives the taker what the ingest leased, and the slots left.
func (l *leasing) handOver(claimed []*store.ClaimedDelivery) {
	l.handed = true
	l.taker.Take(l.r, claimed)
}

// done gives the slots back if nothing was handed over (the ingest
// failed, or queued everything).
func (l *leasing) done() {
	if !l.handed {
		l.handOver(nil)
	}
}

// planLeasing finds, among the ingest's endpoints (read whole), those the
// deliveries of d may be leased to, and says whether there are any.
func (s *Store) planLeasing(l *leasing, d *deliveryInsert, endpoints map[string][]matcher, now time.Time) bool {
	now = idTime(now)
	count := map[string]int{}
	for _, id := range d.endpointIDs {
		count[id]++
	}
	l.byID = map[string]*herald.Endpoint{}
	params := store.DeliveryClaimParams{LeaseMargin: l.r.LeaseMargin}
	for _, ms := range endpoints {
		for _, m := range ms {
			ep := m.ep
			if ep == nil || count[m.id] == 0 || !store.LeasableAtIngest(ep, m.bucket, now) {
				continue
			}
			opened := *ep
			if err := s.secrets.OpenEndpoint(&opened, m.sealed); err != nil {
				continue // a claim meets the same, and says so
			}
			l.byID[ep.ID] = &opened
			l.ids = append(l.ids, ep.ID)
			l.updatedAt = append(l.updatedAt, ep.UpdatedAt)
			l.caps = append(l.caps, int32(ratelimit.MaxInFlight(ep, &ep.Health)))
			l.wants = append(l.wants, int32(count[m.id]))
			l.leaseUS = append(l.leaseUS, micros(params.LeaseFor(ep)))
		}
	}
	return len(l.ids) > 0
}

// writeLeasing is writeDeliveries for an ingest that may lease (l): it
// inserts the deliveries of d, leasing what it may, queues the rest, and
// commits tx, in one batch (b, after what it holds). It returns the deliveries leased, with their
// events (by id in events) and endpoints, for l's taker.
func (s *Store) writeLeasing(ctx context.Context, tx *batchTx, b *pgx.Batch, d *deliveryInsert, check *endpointsCheck,
	l *leasing, events map[string]*herald.Event, now time.Time,
) ([]*store.ClaimedDelivery, error) {
	var leased []*store.ClaimedDelivery
	var readErr error
	if check != nil {
		b.Queue(ingestLeasingCheckedSQL, d.endpoints(), l.ids, l.updatedAt, nowArg(now), l.caps, l.wants, check.consumers, check.versions)
	} else {
		b.Queue(ingestLeasingSQL, d.endpoints(), l.ids, l.updatedAt, nowArg(now), l.caps, l.wants)
	}
	b.Queue(check.deliveriesSQL(insertLeasingDeliveriesSQL, insertLeasingDeliveriesKeyedSQL), d.ids, d.eventIDs, d.endpointIDs, d.consumerIDs, d.eventTypes,
		nowArg(now), l.ids, l.caps, l.leaseUS, l.r.Slots, s.channel).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var r deliveryRow
			if err := rows.Scan(r.dest()...); err != nil {
				readErr = err
				return err
			}
			dl := r.delivery()
			leased = append(leased, &store.ClaimedDelivery{
				Delivery:       *dl,
				Event:          *events[dl.EventID],
				Endpoint:       *l.byID[dl.EndpointID],
				LeaseToken:     r.leaseToken,
				LeaseExpiresAt: r.dueAt.UTC(),
			})
		}
		return rows.Err()
	})
	if err := tx.commit(ctx, b); err != nil {
		var failedCommit errCommit
		if !errors.As(err, &failedCommit) {
			err = fmt.Errorf("insert deliveries: %w", err)
		}
		return nil, err
	}
	if readErr != nil {
		// Committed: the deliveries not read are claimed when their
		// leases run out.
		s.logger.Warn("read the deliveries leased at ingest", logkey.Error, readErr)
	}
	return leased, nil
}
