package pgstore

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/heraldhooks/herald"
	"github.com/heraldhooks/herald/internal/ratelimit"
	"github.com/heraldhooks/herald/internal/store"
)

// A claim runs in one transaction, in steps:
//
//  1. candidatesSQL locks, in random order and skipping those another
//     claimer holds, endpoints that may have work: enabled, not blocked
//     (blocked_until, the Retry-After pause or the open breaker's probe
//     time), with a due delivery (for a FIFO endpoint, a due head). The
//     lock is what makes the token bucket, the probe and a FIFO head
//     exact across nodes: only one claimer at a time decides for an
//     endpoint. It is FOR NO KEY UPDATE, after a try of the endpoint's gate
//     (gate.go): it keeps out other claims and the writers that take the
//     gate and lock FOR UPDATE (the breaker's path, changes of settings,
//     disabling, deleting), but not leasing ingests or the outcome writes of plain
//     successes (FOR KEY SHARE): a claim writes no health they read (a
//     probe goes only where the breaker is open, which is neither
//     leasable nor plain), and the once-a-second write of a last success
//     skips a row a claim holds. It also counts each endpoint's leased
//     deliveries, as its snapshot, taken before the lock, saw them: an
//     estimate.
//  2. In Go, breaker.GateAt and ratelimit.Allowance (on the estimate) say
//     how many each endpoint may start, and the claim's limit is dealt out
//     one delivery per endpoint per round, in the random order.
//  3. takeSQL leases each endpoint's share, cut to the room of a shard
//     of its in-flight cap that it takes (migration 0024: the cap is
//     dealt over up to four shards, each a lock that one writer, claim or
//     leasing ingest, holds at a time), counted once the shard's lock is
//     held, so that it sees every writer that held it before (and the
//     leases of this claim's earlier rounds). What an endpoint could not
//     fill is dealt again to those that filled theirs.
//  4. The token buckets spent and the probes sent are written back.
//
// Claims never wait for a lock (SKIP LOCKED everywhere), so they cannot
// deadlock with each other or with the writers that lock an endpoint and
// then its deliveries.
//
// Every step finds its rows by key: the due marks by endpoint_queue's due
// index, endpoints by id, live deliveries by delivery_queue's indexes of
// one endpoint, deliveries and events by id. No step's best plan depends
// on the tables' sizes, so the claim runs on generic plans (inGenericTx),
// made once per connection and kept, not planned afresh on every claim.

// candidatesSQL locks up to $2 endpoints that may have due work, in random
// order, leaving out those in $4. It starts from the due rows of
// endpoint_queue (migration 0007), so endpoints with nothing due, however
// many, cost it nothing: the due marks are read first, into an array, and
// the endpoints fetched by id, so that no plan (stale statistics, a small
// table) can turn it into a walk of every endpoint. A non-FIFO endpoint
// qualifies with a due delivery, new or retry (two probes of
// delivery_queue's claim index, migration 0017); a FIFO one with a due
// head. Endpoints whose leased deliveries already reach their configured
// in-flight cap ($3 when it is 0; 1 for FIFO) are left out early: the cap a
// claim applies (ratelimit.MaxInFlight) is never higher, so they could
// start nothing. Only live deliveries are read, never deliveries' history.
// The last columns are the claim's now and the endpoint's leased
// deliveries (up to its cap) as this statement's snapshot saw them.
var candidatesSQL = `
SELECT ` + qualify("e", endpointCols) + `, coalesce($1::timestamptz, now()),
	(SELECT count(*) FROM (
		SELECT 1 FROM delivery_queue l
		WHERE l.endpoint_id = e.id AND l.leased
			AND l.due_at > coalesce($1::timestamptz, now())
		LIMIT CASE WHEN e.ordering = 'fifo' THEN 1
			WHEN e.max_in_flight > 0 THEN e.max_in_flight ELSE $3::int END
	) AS leased)
FROM endpoints e
WHERE e.id = ANY(ARRAY(
		SELECT q.endpoint_id FROM endpoint_queue q
		WHERE q.due_at <= coalesce($1::timestamptz, now())))
	AND e.enabled
	AND (e.blocked_until IS NULL OR e.blocked_until <= coalesce($1::timestamptz, now()))
	AND NOT e.id = ANY($4::text[])
	AND ` + gateTryShared("e.id") + `
	AND CASE WHEN e.ordering = 'fifo' THEN coalesce((
			SELECT h.due_at <= coalesce($1::timestamptz, now())
			FROM delivery_queue h
			WHERE h.endpoint_id = e.id
			ORDER BY h.seq
			LIMIT 1), false)
		ELSE EXISTS (
			SELECT 1 FROM (VALUES (0), (1)) AS k(kind)
			CROSS JOIN LATERAL (
				SELECT 1 FROM delivery_queue d
				WHERE d.endpoint_id = e.id AND d.kind = k.kind
					AND d.due_at <= coalesce($1::timestamptz, now())
				LIMIT 1) AS due)
		END
	AND (SELECT count(*) FROM (
			SELECT 1 FROM delivery_queue l
			WHERE l.endpoint_id = e.id AND l.leased
				AND l.due_at > coalesce($1::timestamptz, now())
			LIMIT CASE WHEN e.ordering = 'fifo' THEN 1
				WHEN e.max_in_flight > 0 THEN e.max_in_flight ELSE $3::int END
		) AS leased) < CASE WHEN e.ordering = 'fifo' THEN 1
			WHEN e.max_in_flight > 0 THEN e.max_in_flight ELSE $3::int END
ORDER BY random()
LIMIT $2
FOR NO KEY UPDATE OF e SKIP LOCKED`

// takeSQL leases deliveries: for each endpoint of $2 up to its share $3 of
// due ones, and no more than the room of the shards of its in-flight cap
// $7 that it takes, as many as its share needs (herald_take_shards,
// migration 0024: a shard's part of the cap less its leased deliveries,
// lease not expired, bounded by what the cap leaves; a shard another
// writer holds is left to it), new before retries, then
// oldest due first, then in ingest order; for each FIFO endpoint of $5 its head (its live delivery of
// lowest seq), if that is due. The choice is read from delivery_queue (one
// range of its claim index for each kind, a few more than the share, in
// case some are locked by another writer), and the deliveries are then
// locked by id, skipping those another writer holds: a FIFO head held so
// is not taken, and nothing after it is. Rows are rechecked once locked.
// Each shard's room counts the endpoint's leases with four plain index
// scans of delivery_queue_leased_idx (one range per shard), each stopped
// at the cap: every finished delivery leaves a dead entry in it until the
// queue's next vacuum, and a plain scan marks such entries dead as it
// passes. A leased delivery's queue row names its shard.
// Each lease lasts its endpoint's $4 or $6 microseconds. It returns the
// leased deliveries with their events, their due time before the claim,
// their seq, whether each was taken from an expired lease (lost: a
// delivering row is due only once its lease has run out), and its lost
// leases counted with this one (migration 0030).
var takeSQL = `
WITH taken AS MATERIALIZED (
	-- The shards taken, each with the last place (upto) of its endpoint's
	-- deliveries leased here that its room holds.
	SELECT c.endpoint_id, s.shard,
		sum(s.room) OVER (PARTITION BY c.endpoint_id ORDER BY s.ord) AS upto
	FROM unnest($2::text[], $3::int[], $7::int[]) AS c(endpoint_id, share, cap)
	CROSS JOIN LATERAL herald_take_shards(c.endpoint_id, c.cap, coalesce($1::timestamptz, now()), c.share)
		WITH ORDINALITY AS s(shard, room, ord)
), normal AS (
	SELECT y.id, y.due_at, y.seq, y.lost, c.lease_us, c.endpoint_id
	FROM unnest($2::text[], $3::int[], $4::bigint[]) AS c(endpoint_id, share, lease_us)
	CROSS JOIN LATERAL (
		SELECT greatest(least(c.share, coalesce((
			SELECT max(t.upto) FROM taken t WHERE t.endpoint_id = c.endpoint_id), 0)), 0) AS room
		OFFSET 0 -- once, not at each use
	) AS r
	CROSS JOIN LATERAL (
		SELECT d.id, d.due_at, d.seq, d.status = 'delivering' AS lost
		FROM deliveries d
		WHERE d.id = ANY(ARRAY(
				SELECT z.delivery_id
				FROM (VALUES (0), (1)) AS k(kind)
				CROSS JOIN LATERAL (
					SELECT q.delivery_id
					FROM delivery_queue q
					WHERE q.endpoint_id = c.endpoint_id AND q.kind = k.kind
						AND q.due_at <= coalesce($1::timestamptz, now())
					ORDER BY q.due_at, q.seq
					LIMIT r.room + 8
				) AS z))
			-- Live, said so that no index of status serves it: the ids
			-- are the way in.
			AND d.status NOT IN ('delivered', 'dead', 'cancelled')
			AND d.due_at <= coalesce($1::timestamptz, now())
		ORDER BY least(d.attempt_count, 1), d.due_at, d.seq
		LIMIT r.room
		FOR UPDATE OF d SKIP LOCKED
	) AS y
), sharded AS (
	-- Each delivery leased of an endpoint in the room of one shard.
	SELECT x.id, x.due_at, x.seq, x.lost, x.lease_us, (
		SELECT t.shard FROM taken t
		WHERE t.endpoint_id = x.endpoint_id AND t.upto >= x.k
		ORDER BY t.upto LIMIT 1) AS shard
	FROM (
		SELECT n.*, row_number() OVER (PARTITION BY n.endpoint_id ORDER BY n.id) AS k
		FROM normal n) AS x
), fifo AS (
	SELECT h.id, h.due_at, h.seq, h.lost, c.lease_us, 0 AS shard
	FROM unnest($5::text[], $6::bigint[]) AS c(endpoint_id, lease_us)
	CROSS JOIN LATERAL (
		SELECT d.id, d.due_at, d.seq, d.status = 'delivering' AS lost
		FROM deliveries d
		WHERE d.id = (
				SELECT q.delivery_id FROM delivery_queue q
				WHERE q.endpoint_id = c.endpoint_id
				ORDER BY q.seq
				LIMIT 1)
			AND d.status NOT IN ('delivered', 'dead', 'cancelled')
			-- A queue emptied by a crash may lack the head (migrations 0032, 0033).
			AND ` + queueBuiltSQL + `
		FOR UPDATE OF d SKIP LOCKED
	) AS h
	WHERE h.due_at <= coalesce($1::timestamptz, now())
), picked AS (
	SELECT * FROM sharded UNION ALL SELECT * FROM fifo
), leased AS (
	UPDATE deliveries d SET
		status = 'delivering',
		lease_token = d.lease_token + 1,
		due_at = coalesce($1::timestamptz, now()) + p.lease_us * interval '1 microsecond',
		updated_at = coalesce($1::timestamptz, now()),
		lease_losses = d.lease_losses + CASE WHEN p.lost THEN 1 ELSE 0 END
	FROM picked p
	WHERE d.id = ANY(ARRAY(SELECT id FROM picked)) AND d.id = p.id
	RETURNING ` + qualify("d", deliveryCols) + `, d.lease_losses
), queued AS (
	-- The leased deliveries' rows in delivery_queue, which the triggers
	-- of migration 0021 leave to the claim (claimQueuesSQL).
	UPDATE delivery_queue q SET
		kind = least(l.attempt_count, 1), leased = true, due_at = l.due_at, shard = p.shard
	FROM leased l
	JOIN picked p ON p.id = l.id
	WHERE q.delivery_id = l.id
)
SELECT ` + qualify("l", deliveryCols) + `, p.due_at, p.seq, p.lost, l.lease_losses, ` + qualify("ev", eventCols) + `
FROM leased l
JOIN picked p ON p.id = l.id
CROSS JOIN LATERAL (SELECT * FROM events WHERE id = l.event_id OFFSET 0) AS ev`

// writeBackSQL stores the health, blocked_until and token bucket of the
// endpoints a claim spent tokens of or sent a probe to.
const writeBackSQL = `
UPDATE endpoints e SET
	health = u.health::jsonb, blocked_until = u.blocked_until,
	bucket_tokens = u.tokens, bucket_at = u.bucket_at
FROM unnest($1::text[], $2::text[], $3::timestamptz[], $4::float8[], $5::timestamptz[])
	AS u(id, health, blocked_until, tokens, bucket_at)
WHERE e.id = u.id`

// maxCandidateRounds bounds how often one claim looks for more endpoints
// when those it locked cannot use its whole limit.
const maxCandidateRounds = 3

// maxTakeRounds bounds how often one claim deals out what endpoints could
// not fill.
const maxTakeRounds = 4

// candidate is an endpoint locked by a claim, and what the claim does
// with it.
type candidate struct {
	ep       *herald.Endpoint
	bucket   ratelimit.Bucket
	inFlight int  // its leased deliveries, as the candidates' snapshot saw them
	allow    int  // deliveries it may start now
	probe    bool // the breaker lets one probe go
	share    int  // dealt to it in this take round
	got      int  // taken so far
	done     bool // it gave less than its share: nothing more is due
	leaseUS  int64
	lease    time.Time // the lease expiry of its probe
	// sealed says whether ep's secrets are sealed, opened once it
	// has a delivery claimed.
	sealed, opened bool
}

// claimed is one delivery leased by a take, with what orders the answer
// and its lost leases (store.LeaseLossesEnd).
type claimed struct {
	c      *store.ClaimedDelivery
	dueAt  time.Time
	seq    int64
	losses int
}

// DeliveryClaim takes up to p.Limit due deliveries under a new lease, as
// store.Store describes: per endpoint no more than the breaker, the
// Retry-After pause, the in-flight cap and the token bucket allow, shared
// fairly between endpoints. Concurrent claimers, on this node or others,
// never get the same delivery, and never together exceed an endpoint's
// limits: each endpoint is decided by one claimer at a time.
func (s *Store) DeliveryClaim(ctx context.Context, p *store.DeliveryClaimParams) ([]*store.ClaimedDelivery, error) {
	if p.Limit <= 0 {
		return []*store.ClaimedDelivery{}, nil
	}
	s.queueReady(ctx)
	out, err := s.claimTx(ctx, p)
	if err != nil {
		return nil, fmt.Errorf("claim deliveries: %w", err)
	}
	if len(out) == p.Limit {
		// A node working through a backlog claims full batches and never
		// tidies, where the queues are otherwise vacuumed.
		s.vacuumQueueBehind()
	}
	return out, nil
}

// claimQueuesSQL says, for the rest of a claim's transaction, that the
// claim updates the delivery queue's rows of the deliveries it leases
// (takeSQL): the triggers on updates of deliveries then leave them be
// (migration 0021).
const claimQueuesSQL = "SELECT set_config('herald.claim_queues', 'on', true)"

// claimSettingsSQL is genericPlansSQL and claimQueuesSQL in one statement,
// for claims on generic plans.
const claimSettingsSQL = genericPlansSQL + ", set_config('herald.claim_queues', 'on', true)"

// claimTx runs a claim in a batchTx: its BEGIN goes with the first
// candidates read, its COMMIT with the write-back of the endpoints'
// limits. A claim that finds nothing takes two round trips.
func (s *Store) claimTx(ctx context.Context, p *store.DeliveryClaimParams) ([]*store.ClaimedDelivery, error) {
	tx, err := s.beginBatched(ctx)
	if err != nil {
		return nil, err
	}
	if tx.begin[len(tx.begin)-1] == genericPlansSQL {
		tx.begin[len(tx.begin)-1] = claimSettingsSQL
	} else {
		tx.begin = append(tx.begin, claimQueuesSQL)
	}
	defer tx.end(ctx)
	later := &pgx.Batch{}
	var notes []herald.Notification
	out, err := s.claim(ctx, tx, later, p, &notes)
	if err != nil {
		return nil, err
	}
	if err := tx.commit(ctx, later); err != nil {
		return nil, err
	}
	if p.Notify != nil {
		for _, n := range notes {
			p.Notify(n)
		}
	}
	return out, nil
}

// claim runs the steps of a claim in tx, the last (writeBack) queued in
// later, for the COMMIT's batch. The deliveries whose leases were lost
// too often (store.LeaseLossesEnd) are ended dead rather than handed out,
// and the notifications that follows are set in notes.
func (s *Store) claim(ctx context.Context, tx queryer, later *pgx.Batch, p *store.DeliveryClaimParams, notes *[]herald.Notification) ([]*store.ClaimedDelivery, error) {
	var (
		cands []*candidate
		now   time.Time
		allow int
		seen  = []string{}
	)
	for round := 0; round < maxCandidateRounds && allow < p.Limit; round++ {
		want := p.Limit - allow
		more, t, err := lockCandidates(ctx, tx, p.Now, want, seen)
		if err != nil {
			return nil, err
		}
		if len(more) == 0 {
			break
		}
		now = t
		for _, c := range more {
			seen = append(seen, c.ep.ID)
			c.allow, c.probe = store.ClaimAllowance(c.ep, c.bucket, c.inFlight, now)
			if c.allow > 0 {
				cands = append(cands, c)
				allow += c.allow
			}
		}
		if len(more) < want {
			break // every endpoint with work is in hand
		}
	}
	if len(cands) == 0 {
		return []*store.ClaimedDelivery{}, nil
	}
	for _, c := range cands {
		c.leaseUS = micros(p.LeaseFor(c.ep))
	}

	var all []claimed
	left := p.Limit
	for round := 0; round < maxTakeRounds && left > 0; round++ {
		if !deal(cands, left) {
			break
		}
		got, err := take(ctx, tx, p.Now, cands)
		if err != nil {
			return nil, err
		}
		all = append(all, got...)
		left -= len(got)
	}
	all, ended := splitLeaseLost(all, p.MaxLeaseLosses, cands)
	if len(ended) > 0 {
		ns, err := s.endLeaseLost(ctx, tx, ended, p.Now)
		if err != nil {
			return nil, err
		}
		*notes = ns
	}

	writeBack(later, cands, now)
	byID := make(map[string]*candidate, len(cands))
	for _, c := range cands {
		byID[c.ep.ID] = c
	}
	slices.SortFunc(all, func(a, b claimed) int {
		return cmp.Or(a.dueAt.Compare(b.dueAt), cmp.Compare(a.seq, b.seq))
	})
	out := make([]*store.ClaimedDelivery, len(all))
	for i, cl := range all {
		c := byID[cl.c.Delivery.EndpointID]
		// Only endpoints with a delivery claimed need their secrets,
		// opened once each: the sender signs with them.
		if !c.opened {
			if err := s.secrets.OpenEndpoint(c.ep, c.sealed); err != nil {
				return nil, err
			}
			c.opened = true
		}
		cl.c.Endpoint = *c.ep
		out[i] = cl.c
	}
	return out, nil
}

// lockCandidates locks up to limit endpoints that may have due work,
// leaving out those in seen, and returns them and the claim's now.
func lockCandidates(ctx context.Context, tx queryer, now time.Time, limit int, seen []string) ([]*candidate, time.Time, error) {
	rows, err := tx.Query(ctx, candidatesSQL, nowArg(now), limit, herald.DefaultMaxInFlight, seen)
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("lock endpoints: %w", err)
	}
	defer rows.Close()
	var out []*candidate
	var t time.Time
	for rows.Next() {
		var r endpointRow
		var leased int64
		if err := rows.Scan(append(r.dest(), &t, &leased)...); err != nil {
			return nil, time.Time{}, fmt.Errorf("lock endpoints: %w", err)
		}
		ep, err := r.endpoint()
		if err != nil {
			return nil, time.Time{}, fmt.Errorf("lock endpoints: %w", err)
		}
		out = append(out, &candidate{ep: ep, bucket: r.bucket(), sealed: r.sealed, inFlight: int(leased)})
	}
	if err := rows.Err(); err != nil {
		return nil, time.Time{}, fmt.Errorf("lock endpoints: %w", err)
	}
	return out, t.UTC(), nil
}

// deal shares left out among the candidates that may take more, one per
// endpoint per round in their (random) order, and says whether it dealt
// anything. A candidate that gave less than its share last time has no
// more due deliveries and is dealt nothing.
func deal(cands []*candidate, left int) bool {
	for _, c := range cands {
		c.share = 0
	}
	dealt := false
	for left > 0 {
		progress := false
		for _, c := range cands {
			if left == 0 {
				break
			}
			if c.done || c.got+c.share >= c.allow {
				continue
			}
			c.share++
			left--
			progress = true
		}
		if !progress {
			break
		}
		dealt = true
	}
	return dealt
}

// take leases each candidate's share and records what each gave.
func take(ctx context.Context, tx queryer, now time.Time, cands []*candidate) ([]claimed, error) {
	var ids, fifoIDs []string
	var shares, caps []int32
	var leases, fifoLeases []int64
	byID := map[string]*candidate{}
	for _, c := range cands {
		if c.share == 0 {
			continue
		}
		byID[c.ep.ID] = c
		if c.ep.Ordering == herald.OrderingFIFO {
			fifoIDs = append(fifoIDs, c.ep.ID)
			fifoLeases = append(fifoLeases, c.leaseUS)
			continue
		}
		ids = append(ids, c.ep.ID)
		shares = append(shares, int32(c.share))
		leases = append(leases, c.leaseUS)
		caps = append(caps, int32(ratelimit.MaxInFlight(c.ep, &c.ep.Health)))
	}
	rows, err := tx.Query(ctx, takeSQL, nowArg(now), ids, shares, leases, fifoIDs, fifoLeases, caps)
	if err != nil {
		return nil, fmt.Errorf("lease deliveries: %w", err)
	}
	got, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (claimed, error) {
		var d deliveryRow
		var ev eventRow
		var cl claimed
		var lost bool
		var losses int32
		dest := slices.Concat(d.dest(), []any{&cl.dueAt, &cl.seq, &lost, &losses}, ev.dest())
		if err := row.Scan(dest...); err != nil {
			return cl, err
		}
		cl.c = &store.ClaimedDelivery{
			Delivery:       *d.delivery(),
			Event:          *ev.event(),
			LeaseToken:     d.leaseToken,
			LeaseExpiresAt: d.dueAt.UTC(),
			Redelivered:    lost,
			LeaseLosses:    int(losses),
		}
		cl.losses = int(losses)
		return cl, nil
	})
	if err != nil {
		return nil, fmt.Errorf("lease deliveries: %w", err)
	}
	taken := map[string]int{}
	for _, cl := range got {
		c := byID[cl.c.Delivery.EndpointID]
		taken[c.ep.ID]++
		if c.probe {
			c.lease = cl.c.LeaseExpiresAt
		}
	}
	for _, c := range byID {
		n := taken[c.ep.ID]
		c.got += n
		if n < c.share {
			c.done = true
		}
	}
	return got, nil
}

// writeBack queues in b the write that spends the tokens of what each
// rate-limited endpoint started and marks a sent probe (breaker.Probing):
// the breaker is half-open and the endpoint blocked until the probe's
// lease runs out.
func writeBack(b *pgx.Batch, cands []*candidate, now time.Time) {
	var ids, healths []string
	var blocked, bucketAt []*time.Time
	var tokens []float64
	for _, c := range cands {
		w := store.AfterClaim(c.ep, c.bucket, c.got, c.probe, c.lease, now)
		if w.Empty() {
			continue
		}
		if w.Bucket != nil {
			c.bucket = *w.Bucket
		}
		if w.Health != nil {
			c.ep.Health = *w.Health
		}
		h, until := encodeHealth(c.ep.Health)
		c.ep.Health = normalHealth(c.ep.Health)
		ids = append(ids, c.ep.ID)
		healths = append(healths, string(h))
		blocked = append(blocked, until)
		tokens = append(tokens, c.bucket.Tokens)
		var at *time.Time
		if !c.bucket.At.IsZero() {
			t := c.bucket.At
			at = &t
		}
		bucketAt = append(bucketAt, at)
	}
	if len(ids) > 0 {
		b.Queue(writeBackSQL, ids, healths, blocked, tokens, bucketAt)
	}
}
