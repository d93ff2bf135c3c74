package pgstore

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/heraldhooks/herald"
	"github.com/heraldhooks/herald/internal/filter"
	"github.com/heraldhooks/herald/internal/ratelimit"
	"github.com/heraldhooks/herald/internal/store"
)

// enabledEndpointsSQL reads the enabled endpoints of the consumers in $1,
// oldest first.
const enabledEndpointsSQL = `
SELECT id, consumer_id, event_types, filter FROM endpoints
WHERE enabled AND consumer_id = ANY($1::text[])
ORDER BY id`

// enabledEndpointsWholeSQL is enabledEndpointsSQL reading the whole rows
// and their config_version, for an ingest that may lease (leasing.go) or
// remember them (endpointcache.go).
const enabledEndpointsWholeSQL = `
SELECT ` + endpointCols + `, config_version FROM endpoints
WHERE enabled AND consumer_id = ANY($1::text[])
ORDER BY id`

// insertUnkeyedEventsSQL inserts events in the order given and returns
// the id and created_at of each. It is for events without idempotency
// keys, which nothing can conflict with; insertEventsSQL is for the
// others.
const insertUnkeyedEventsSQL = `
INSERT INTO events (id, consumer_id, event_type, payload, idempotency_key, created_at)
SELECT u.id, u.consumer_id, u.event_type, u.payload, nullif(u.key, ''),
	coalesce($6::timestamptz, now())
FROM unnest($1::text[], $2::text[], $3::text[], $4::bytea[], $5::text[])
	WITH ORDINALITY AS u(id, consumer_id, event_type, payload, key, n)
ORDER BY u.n
RETURNING id, created_at`

// insertEventsSQL is insertUnkeyedEventsSQL skipping the events whose
// idempotency key is taken: it returns the id and created_at of each it
// inserted. It is an upsert, and an upsert inserts each row
// speculatively (the row, then its confirmation, in the WAL), which is
// why events without keys go in by insertUnkeyedEventsSQL.
var insertEventsSQL = keyed(insertUnkeyedEventsSQL)

// keyed is an events insert skipping the events whose idempotency key is
// taken.
func keyed(insert string) string {
	return strings.Replace(insert, "RETURNING",
		"ON CONFLICT (consumer_id, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING\nRETURNING", 1)
}

// insertUnkeyedTracedEventsSQL and insertTracedEventsSQL are the events
// inserts writing, in $7, the ingest's span context with each event
// (migration 0029). They run only when tracing is on: off, the
// statements and rows are as they were.
var (
	insertUnkeyedTracedEventsSQL = traced(insertUnkeyedEventsSQL)
	insertTracedEventsSQL        = keyed(insertUnkeyedTracedEventsSQL)
)

// traced is an events insert that writes trace_context from $7.
func traced(insert string) string {
	for _, r := range [][2]string{
		{"idempotency_key, created_at)", "idempotency_key, created_at, trace_context)"},
		{"coalesce($6::timestamptz, now())\n", "coalesce($6::timestamptz, now()), u.trace\n"},
		{"$5::text[])", "$5::text[], $7::bytea[])"},
		{"u(id, consumer_id, event_type, payload, key, n)", "u(id, consumer_id, event_type, payload, key, trace, n)"},
	} {
		if !strings.Contains(insert, r[0]) {
			panic("pgstore: traced events insert: no " + r[0])
		}
		insert = strings.Replace(insert, r[0], r[1], 1)
	}
	return insert
}

// insertDeliveriesSQL inserts deliveries, pending and due now, with their
// rows in the delivery queue (migration 0017) and, for each endpoint whose
// mark in the endpoint queue (migration 0007) is later than now or
// missing, the mark at now: what the triggers on inserts into deliveries
// write for other writers (migration 0020). ingestLockSQL goes before it,
// in a statement of its own, so that this one reads the marks as they are
// once the locks are held.
var insertDeliveriesSQL = `
WITH n AS (
	SELECT coalesce($6::timestamptz, now()) AS t
), ins AS (
	INSERT INTO deliveries (id, event_id, endpoint_id, consumer_id, event_type,
		status, due_at, created_at, updated_at)
	SELECT u.id, u.event_id, u.endpoint_id, u.consumer_id, u.event_type,
		'pending', n.t, n.t, n.t
	FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[])
		AS u(id, event_id, endpoint_id, consumer_id, event_type), n
	RETURNING id, endpoint_id, consumer_id, seq, due_at, status
), ` + ingestQueuesCTEs + `
SELECT count(*) FROM ins`

// ingestQueuesCTEs are the queue writes of an ingest's deliveries insert,
// which follow its CTE ins (the deliveries inserted, with their id,
// endpoint_id, consumer_id, seq, due_at and status): each delivery's row
// in delivery_queue (leased if a lease was taken at ingest, leasing.go),
// and each endpoint's due mark, no later than its earliest due delivery
// (now for one queued, the lease's expiry for one leased).
var ingestQueuesCTEs = ingestQueuesCTEsSharded("0")

// ingestQueuesCTEsSharded is ingestQueuesCTEs whose leased rows name the
// shard of their endpoint's in-flight cap given by shard, an expression
// over ins (migration 0024).
func ingestQueuesCTEsSharded(shard string) string {
	return `live AS (
	INSERT INTO delivery_queue (delivery_id, endpoint_id, consumer_id, seq, kind, leased, due_at, shard)
	SELECT id, endpoint_id, consumer_id, seq, 0, status = 'delivering', due_at,
		CASE WHEN status = 'delivering' THEN ` + shard + ` ELSE 0 END
	FROM ins
	ORDER BY id
), mark AS (
	INSERT INTO endpoint_queue AS q (endpoint_id, due_at)
	SELECT m.endpoint_id, m.due_at
	FROM (SELECT endpoint_id, min(due_at) AS due_at FROM ins GROUP BY endpoint_id) AS m
	-- A probe of each endpoint's mark (a subquery, which no plan turns
	-- into a join that walks the queue).
	WHERE coalesce((
		SELECT x.due_at > m.due_at FROM endpoint_queue x
		WHERE x.endpoint_id = m.endpoint_id), true)
	ORDER BY m.endpoint_id
	ON CONFLICT (endpoint_id) DO UPDATE SET due_at = excluded.due_at
		WHERE q.due_at > excluded.due_at
)`
}

// ingestLockSQL wakes the dispatchers of every node once the transaction
// commits; says, for the rest of the transaction, that ingest writes the
// queue rows of the deliveries it inserts (the triggers of migration 0020
// then leave them be); and takes the endpoint queue's shared lock of each
// endpoint in $2 (distinct), or past 32 the one lock of them all, as every
// writer of the queue does before it reads a mark (migration 0007).
var ingestLockSQL = "SELECT pg_notify($1, ''), " + ingestQueuesCols("$2")

// ingestQueuesCols are the columns of ingestLockSQL but the wake-up, the
// endpoints in the parameter named.
func ingestQueuesCols(endpoints string) string {
	return `set_config('herald.ingest_queues', 'on', true), (
	SELECT count(*) FROM (
		SELECT pg_advisory_xact_lock_shared(1213353041, CASE WHEN cardinality(` + endpoints + `::text[]) > 32
			THEN hashtext(current_schema()) ELSE hashtext(current_schema() || ':' || i) END)
		FROM unnest(CASE WHEN cardinality(` + endpoints + `::text[]) > 32 THEN ARRAY[''] ELSE ` + endpoints + `::text[] END) AS i
	) AS l)`
}

// duplicateEventsSQL reads the events that hold the idempotency keys of
// the consumers in $1 and $2 (one key each), a probe of the key's index
// for each (the subquery is kept apart, OFFSET 0, so that no plan joins
// the keys with every keyed event instead).
var duplicateEventsSQL = `
SELECT ` + qualify("e", eventCols) + `
FROM unnest($1::text[], $2::text[]) AS k(consumer_id, key)
CROSS JOIN LATERAL (
	SELECT * FROM events x
	WHERE x.consumer_id = k.consumer_id AND x.idempotency_key = k.key
	OFFSET 0) AS e`

// duplicateDeliveriesSQL reads the deliveries of the events in $1.
const duplicateDeliveriesSQL = `
SELECT id, endpoint_id, event_id FROM deliveries
WHERE event_id = ANY($1::text[]) ORDER BY id`

// idempotencyKey is an idempotency key in the scope it is unique in.
type idempotencyKey struct {
	consumerID string
	key        string
}

// ingestItem is one event of an ingest call that is not a duplicate of an
// earlier one in the same call.
type ingestItem struct {
	index int // into p.Events and the results
	id    string
	item  *store.EventIngestItem
}

// leaseSlotsPerEvent is how many slots an ingest that may lease reserves
// for each event, before it knows how many endpoints each goes to: those
// it leaves free go back at the end of the ingest.
const leaseSlotsPerEvent = 4

// maxLeaseSlots bounds the slots one ingest reserves, so that a batch
// never holds the claim loop off the node's free slots.
const maxLeaseSlots = 32

// matcher is the part of an endpoint that decides whether it gets an event,
// and, read whole for an ingest that may lease, the endpoint.
type matcher struct {
	id         string
	eventTypes []string
	ep         *herald.Endpoint // nil unless read whole
	bucket     ratelimit.Bucket
	sealed     bool
	// configVersion is the endpoint's config_version, when read whole.
	configVersion int64
	// filter is the endpoint's filter compiled (nil: none), from the
	// store's cache: a read of an endpoint whose filter is unchanged does
	// not compile it again.
	filter *filter.Program
}

// sortedIDs makes n ids and sorts them, so that rows made by one call, taken
// in order, also sort in that order (ids alone order only to the
// millisecond).
func sortedIDs(prefix string, t time.Time, n int) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = herald.NewID(prefix, t)
	}
	slices.Sort(ids)
	return ids
}

// EventIngest writes the events and their deliveries in one transaction,
// and wakes the dispatchers of every node when it commits. An event whose
// idempotency key its consumer used before, or earlier in the same call,
// creates nothing and comes back as the first event, with its deliveries,
// marked Duplicate. Two calls racing with one key give one event: the
// second insert waits for the first transaction and then finds its event.
//
// The endpoints are read without a lock, so that a busy endpoint's row is
// not share-locked by every ingest. The price: an ingest that commits just
// after an endpoint is disabled may leave a pending delivery to it, which
// no claim takes while the endpoint is disabled and which goes out once it
// is enabled again; nothing is lost.
//
// Calls that overlap share a transaction (groupcommit.go), each in a
// savepoint of its own: a call returns once its group has committed, fails
// alone if its own events fail, and fails with the group if the commit
// does. A call whose ctx ends while it waits for its group is not written.
func (s *Store) EventIngest(ctx context.Context, p *store.EventIngestParams) ([]store.EventIngestResult, error) {
	if len(p.Events) == 0 {
		return []store.EventIngestResult{}, nil
	}
	c := &ingestCall{ctx: ctx, items: p.Events, now: p.Now}
	s.groupIngest(c)
	if c.err != nil {
		return nil, fmt.Errorf("ingest events: %w", c.err)
	}
	return c.results, nil
}

// ingest writes events and their deliveries in tx, as EventIngest
// describes, and has the dispatchers woken when tx commits if it made
// deliveries. DeliveryCompleteMany ingests its notifications through it
// too, so they fan out exactly as the operator's events do.
func (s *Store) ingest(ctx context.Context, tx queryer, events []store.EventIngestItem, now time.Time) ([]store.EventIngestResult, error) {
	return s.ingestOn(ctx, tx, nil, events, now)
}

// ingestAlone writes events and their deliveries in a transaction of
// their own, as EventIngest describes, in two round trips: the BEGIN
// goes out with the endpoints read and the events insert, the COMMIT
// with the deliveries insert and the wake-up (a batchTx). A pgx
// transaction would take one more for each, and each round trip costs
// both this process and the database's backend more than a single
// event's rows do. A call is answered success only once its COMMIT has.
//
// With its consumers' endpoints remembered, it takes one round trip; if
// they changed since, it is written again in a new transaction, reading
// them (endpointcache.go). It carries an outcome write waiting for a ride
// (rides.go).
func (s *Store) ingestAlone(ctx context.Context, events []store.EventIngestItem, now time.Time) ([]store.EventIngestResult, error) {
	var results []store.EventIngestResult
	err := s.inIngestTx(ctx, func(tx *batchTx) error {
		var err error
		results, err = s.ingestOn(ctx, tx, tx, events, now)
		return err
	})
	return results, err
}

// inIngestTx runs write, an ingest, in a batchTx of its own, which
// carries the outcome write waiting for a ride, if any (rides.go), and
// runs it again, in a new one, if it failed on remembered endpoints that
// had changed (errEndpointsChanged): they are forgotten by then, so the
// second run reads them.
func (s *Store) inIngestTx(ctx context.Context, write func(tx *batchTx) error) error {
	return s.carrying(func(r *outcomeRide) error {
		once := func() error {
			tx, err := s.beginBatched(ctx)
			if err != nil {
				return err
			}
			defer tx.end(ctx)
			tx.carry(r)
			return write(tx)
		}
		if err := once(); !errors.Is(err, errEndpointsChanged) {
			return err
		}
		return once()
	})
}

// ingestOn is ingest on q, which commits tx (q itself) with its last
// statements if tx is not nil. Its statements go in two batches,
// one round trip each, since those of a batch do not depend on each
// other: the endpoints read and the events insert; then the deliveries
// insert and the wake-up, which need what the first two returned. An
// event whose idempotency key was taken costs the two reads of
// existingEvents between them. A failed COMMIT is an errCommit.
//
// With tx, an ingest whose consumers' endpoints this node read lately
// fans out from that read instead, and goes in one batch, one round trip,
// that checks the endpoints are still as read (endpointcache.go). If they
// are not, nothing is written and the error is errEndpointsChanged: the
// caller writes the ingest again, in a new transaction, which reads them.
//
// It goes by phase: dedupe (within the call), the events insert (with
// the endpoints read, or queued in the batch that commits), the fan-out
// planned (planFanOut), the deliveries written (writeFanOut), and the
// answer (answer).
func (s *Store) ingestOn(ctx context.Context, q queryer, tx *batchTx, events []store.EventIngestItem, now time.Time) ([]store.EventIngestResult, error) {
	r := dedupe(events, now)
	if tx != nil {
		if eps, versions, ok := s.endpoints.recall(r.consumers, time.Now()); ok {
			r.endpoints = eps
			r.check = &endpointsCheck{consumers: r.consumers, versions: versions, keyed: r.keyed}
		}
	}
	// An ingest that may lease reserves its slots first (leasing.go).
	lease := s.reserve(tx, min(leaseSlotsPerEvent*len(r.unique), maxLeaseSlots))
	if lease != nil {
		defer lease.done()
	}
	if err := s.insertEvents(ctx, q, tx, r, now); err != nil {
		return nil, err
	}
	r.planFanOut()
	if err := existingEvents(ctx, q, r.conflicted, r.results); err != nil {
		return nil, err
	}
	if err := s.writeFanOut(ctx, q, tx, r, lease, now); err != nil {
		return nil, err
	}
	return r.answer(ctx, q)
}

// ingestRun is one call of ingestOn on its way through the phases: what
// each phase found, for the next.
type ingestRun struct {
	// results are the answer, one for each event of the call.
	results []store.EventIngestResult
	// dupOf is, for each event, the index of the first of the call with
	// its idempotency key, or -1 for that first one and events without.
	dupOf []int
	// unique are the events that are not such duplicates, with their ids.
	unique []*ingestItem
	// keyed is whether an event has an idempotency key.
	keyed bool
	// idAt is the time the ids of the call's rows are made at.
	idAt time.Time
	// consumers are those the events name, each once.
	consumers []string

	// endpoints are the enabled endpoints of the consumers, by consumer,
	// read in the first round trip or remembered; check is not nil if
	// remembered (ingestcache.go).
	endpoints map[string][]matcher
	check     *endpointsCheck
	// batch is the batch that writes the deliveries (and commits);
	// with check, it inserts the events first.
	batch *pgx.Batch
	// inserted is the created_at of each event id inserted; with check,
	// known once batch is sent, and insertErr is its insert's failure.
	inserted  map[string]time.Time
	insertErr error

	// fresh are the events that get deliveries (all of them, with check,
	// until answer); conflicted are those whose idempotency key was taken
	// by an event before the call.
	fresh, conflicted []*ingestItem
	// d are the deliveries of the fresh events; refs, the same by event id.
	d    deliveryInsert
	refs map[string][]store.DeliveryRef
	// skips are the endpoints the fresh events' filters skipped, by event
	// id, and s the same as columns for their insert.
	skips map[string][]store.EventSkip
	s     skipInsert
}

// dedupe begins the ingest of events: an event whose idempotency key an
// earlier one of the call has points at that one (dupOf); the others are
// unique, each with a new id, sorted in call order.
func dedupe(events []store.EventIngestItem, now time.Time) *ingestRun {
	r := &ingestRun{
		results: make([]store.EventIngestResult, len(events)),
		dupOf:   make([]int, len(events)),
		idAt:    idTime(now),
	}
	firstWithKey := map[idempotencyKey]int{}
	for i := range events {
		it := &events[i]
		r.dupOf[i] = -1
		if it.IdempotencyKey != "" {
			r.keyed = true
			k := idempotencyKey{it.ConsumerID, it.IdempotencyKey}
			if first, ok := firstWithKey[k]; ok {
				r.dupOf[i] = first
				continue
			}
			firstWithKey[k] = i
		}
		r.unique = append(r.unique, &ingestItem{index: i, item: it})
	}
	for i, id := range sortedIDs(herald.PrefixEvent, r.idAt, len(r.unique)) {
		r.unique[i].id = id
	}
	r.consumers = consumersOf(r.unique)
	return r
}

// insertEvents inserts r's unique events. Without remembered endpoints,
// the first round trip reads them (whole with tx: to lease, and to be
// remembered) and inserts the events; with them, the events insert is
// queued in r.batch, which commits.
func (s *Store) insertEvents(ctx context.Context, q queryer, tx *batchTx, r *ingestRun, now time.Time) error {
	r.batch = &pgx.Batch{}
	args := insertEventsArgs(r.unique, now, s.compress)
	if r.check != nil {
		r.inserted = make(map[string]time.Time, len(r.unique))
		r.batch.Queue(insertSQL(r.unique), args...).Query(func(rows pgx.Rows) error {
			r.insertErr = readInsertedRows(rows, r.inserted)
			return r.insertErr
		})
		return nil
	}
	readAt := time.Now()
	var err error
	r.endpoints, r.inserted, err = readAndInsert(ctx, q, r.unique, args, r.consumers, tx != nil, &s.filters)
	if err != nil {
		return err
	}
	if tx != nil {
		s.endpoints.remember(r.consumers, r.endpoints, readAt)
	}
	return nil
}

// planFanOut gives each new event its deliveries, one to each endpoint
// it targets; the others were there before (conflicted). With remembered
// endpoints, which events are new is known only once they are written:
// every event gets its deliveries in d, and the deliveries insert keeps
// those of the events inserted.
func (r *ingestRun) planFanOut() {
	// goes are, for each fresh event in order, the endpoints it goes to:
	// those it targets whose filter, if any, passes (filter.Decide, with
	// the payload parsed once for the event, and only if one has a filter).
	goes := make([][]*matcher, 0, len(r.unique))
	nDeliveries := 0
	for _, u := range r.unique {
		if _, ok := r.inserted[u.id]; !ok && r.check == nil {
			r.conflicted = append(r.conflicted, u)
			continue
		}
		r.fresh = append(r.fresh, u)
		var fev *filter.Event
		eps := r.endpoints[u.item.ConsumerID]
		to := make([]*matcher, 0, len(eps))
		for i := range eps {
			ep := &eps[i]
			if !targets(u.item, *ep) {
				continue
			}
			if ep.filter != nil && u.item.EndpointID == "" {
				if fev == nil {
					fev = &filter.Event{EventType: u.item.EventType, ConsumerID: u.item.ConsumerID, Payload: u.item.Payload}
				}
				if reason := filter.Decide(ep.filter, fev); reason != "" {
					r.skip(u, ep.id, reason)
					continue
				}
			}
			to = append(to, ep)
		}
		goes = append(goes, to)
		nDeliveries += len(to)
	}
	dlvIDs := sortedIDs(herald.PrefixDelivery, r.idAt, nDeliveries)
	r.refs = make(map[string][]store.DeliveryRef, len(r.fresh))
	for i, u := range r.fresh {
		refs := []store.DeliveryRef{}
		for _, ep := range goes[i] {
			ref := store.DeliveryRef{ID: dlvIDs[len(r.d.ids)], EndpointID: ep.id}
			r.d.add(ref, u)
			refs = append(refs, ref)
		}
		r.refs[u.id] = refs
	}
}

// skip records that u's filter skipped endpoint id for reason.
func (r *ingestRun) skip(u *ingestItem, id, reason string) {
	if r.skips == nil {
		r.skips = map[string][]store.EventSkip{}
	}
	r.skips[u.id] = append(r.skips[u.id], store.EventSkip{EndpointID: id, Reason: reason})
	r.s.eventIDs = append(r.s.eventIDs, u.id)
	r.s.endpointIDs = append(r.s.endpointIDs, id)
	r.s.reasons = append(r.s.reasons, reason)
}

// skipInsert gathers the skips of an ingest as columns for one insert.
type skipInsert struct {
	eventIDs, endpointIDs, reasons []string
}

// insertSkipsSQL records the endpoints filters skipped (migration 0027),
// for the events inserted only: with remembered endpoints, an event whose
// idempotency key was taken is in the plan but not in events.
const insertSkipsSQL = `
INSERT INTO event_skips (event_id, endpoint_id, reason)
SELECT u.event_id, u.endpoint_id, u.reason
FROM unnest($1::text[], $2::text[], $3::text[]) AS u(event_id, endpoint_id, reason)
WHERE EXISTS (SELECT 1 FROM events x WHERE x.id = u.event_id)`

// writeFanOut sends r.batch with the deliveries planned, leasing to
// lease's taker what it may (leasing.go), and commits tx if it is not
// nil; what was leased is handed over once committed. With remembered
// endpoints that changed, nothing is written, they are forgotten, and
// the error is errEndpointsChanged.
func (s *Store) writeFanOut(ctx context.Context, q queryer, tx *batchTx, r *ingestRun, lease *leasing, now time.Time) error {
	var err error
	var leased []*store.ClaimedDelivery
	if len(r.s.eventIDs) > 0 {
		// Only an ingest with a skip writes one more statement, in the
		// batch that writes its deliveries: no round trip of its own.
		r.batch.Queue(insertSkipsSQL, r.s.eventIDs, r.s.endpointIDs, r.s.reasons)
	}
	leasing := lease != nil && s.planLeasing(lease, &r.d, r.endpoints, now)
	if leasing {
		// The events as leased deliveries carry them; created_at is set
		// once written.
		events := make(map[string]*herald.Event, len(r.fresh))
		for _, u := range r.fresh {
			events[u.id] = newEvent(u, time.Time{})
		}
		leased, err = s.writeLeasing(ctx, tx, r.batch, &r.d, r.check, lease, events, now)
	} else {
		err = s.writeDeliveries(ctx, q, r.batch, &r.d, r.check, tx, now)
	}
	if r.insertErr != nil {
		err = fmt.Errorf("insert events: %w", r.insertErr)
	}
	if r.check != nil && isEndpointsChanged(err) {
		s.endpoints.forget(r.consumers)
		return errEndpointsChanged
	}
	if err != nil {
		return err
	}
	if leasing {
		for _, c := range leased {
			c.Event.CreatedAt = r.inserted[c.Event.ID]
		}
		lease.handOver(leased)
	}
	return nil
}

// answer is the result of each event of r, once written: a new event
// with its deliveries, or, marked Duplicate, the event that holds its
// idempotency key with that event's deliveries. With remembered
// endpoints, the events whose key was taken are found only now.
func (r *ingestRun) answer(ctx context.Context, q queryer) ([]store.EventIngestResult, error) {
	if r.check != nil {
		// Committed: the events whose idempotency key was taken are
		// read now, as the events that hold their keys are committed, on
		// the connection of the transaction, idle now.
		r.fresh = slices.DeleteFunc(r.fresh, func(u *ingestItem) bool {
			if _, ok := r.inserted[u.id]; !ok {
				r.conflicted = append(r.conflicted, u)
				return true
			}
			return false
		})
		if err := existingEvents(ctx, q, r.conflicted, r.results); err != nil {
			return nil, errAfterCommit{err}
		}
	}
	for _, u := range r.fresh {
		r.results[u.index] = store.EventIngestResult{Event: newEvent(u, r.inserted[u.id]), Deliveries: r.refs[u.id], Skips: r.skips[u.id]}
	}
	for i, first := range r.dupOf {
		if first < 0 {
			continue
		}
		ev := *r.results[first].Event
		r.results[i] = store.EventIngestResult{
			Event:      &ev,
			Duplicate:  true,
			Deliveries: slices.Clone(r.results[first].Deliveries),
		}
	}
	return r.results, nil
}

// newEvent is the event u inserted, created at created.
func newEvent(u *ingestItem, created time.Time) *herald.Event {
	payload := u.item.Payload
	if payload == nil {
		payload = []byte{}
	}
	return &herald.Event{
		ID:             u.id,
		ConsumerID:     u.item.ConsumerID,
		EventType:      u.item.EventType,
		Payload:        payload,
		IdempotencyKey: u.item.IdempotencyKey,
		CreatedAt:      created,
		TraceContext:   u.item.TraceContext,
	}
}

// endpointsCheck is what an ingest from remembered endpoints checks in the
// database: the versions of its consumers' endpoints as remembered; keyed
// is whether an event has an idempotency key, which may make it not
// inserted (its deliveries are then not inserted either).
type endpointsCheck struct {
	consumers, versions []string
	keyed               bool
}

// readAndInsert reads, once per call, the enabled endpoints of the
// consumers the items name (consumersOf), oldest first, and inserts the
// items (with args, insertEventsArgs), in one batch. It returns the
// endpoints by consumer and the created_at of each inserted id.
func readAndInsert(ctx context.Context, q queryer, items []*ingestItem, args []any, consumers []string, whole bool, filters *filter.Cache) (map[string][]matcher, map[string]time.Time, error) {
	b := &pgx.Batch{}
	if whole {
		b.Queue(enabledEndpointsWholeSQL, consumers)
	} else {
		b.Queue(enabledEndpointsSQL, consumers)
	}
	b.Queue(insertSQL(items), args...)
	br := q.SendBatch(ctx, b)
	endpoints, inserted, err := func() (map[string][]matcher, map[string]time.Time, error) {
		endpoints, err := readEndpoints(br, whole, filters)
		if err != nil {
			return nil, nil, fmt.Errorf("read endpoints: %w", err)
		}
		inserted, err := readInserted(br, len(items))
		if err != nil {
			return nil, nil, fmt.Errorf("insert events: %w", err)
		}
		return endpoints, inserted, nil
	}()
	if closeErr := br.Close(); err == nil && closeErr != nil {
		err = fmt.Errorf("insert events: %w", closeErr)
	}
	if err != nil {
		return nil, nil, err
	}
	return endpoints, inserted, nil
}

// insertSQL is the events insert for items: insertEventsSQL if one has an
// idempotency key, else insertUnkeyedEventsSQL; their traced twins if one
// has a span context (insertEventsArgs then gives $7).
func insertSQL(items []*ingestItem) string {
	key := slices.ContainsFunc(items, func(u *ingestItem) bool { return u.item.IdempotencyKey != "" })
	switch {
	case isTraced(items) && key:
		return insertTracedEventsSQL
	case isTraced(items):
		return insertUnkeyedTracedEventsSQL
	case key:
		return insertEventsSQL
	}
	return insertUnkeyedEventsSQL
}

// isTraced says whether an item carries a span context (tracing is on).
func isTraced(items []*ingestItem) bool {
	return slices.ContainsFunc(items, func(u *ingestItem) bool { return u.item.TraceContext != nil })
}

// writeDeliveries queues in b, after what it holds, the insert of the
// deliveries of d, if any, with their queue rows, and the wake-up, and
// sends b, committing tx if it is not nil. With check (an ingest from
// remembered endpoints), the lock statement also checks the endpoints,
// and only the deliveries of events inserted are. A failed COMMIT is an
// errCommit.
func (s *Store) writeDeliveries(ctx context.Context, q queryer, b *pgx.Batch, d *deliveryInsert, check *endpointsCheck, tx *batchTx, now time.Time) error {
	switch {
	case len(d.ids) > 0 && check != nil:
		b.Queue(ingestLockCheckedSQL, s.channel, d.endpoints(), check.consumers, check.versions)
		b.Queue(check.deliveriesSQL(insertDeliveriesSQL, insertDeliveriesKeyedSQL), d.args(now)...)
	case len(d.ids) > 0:
		b.Queue(ingestLockSQL, s.channel, d.endpoints())
		b.Queue(insertDeliveriesSQL, d.args(now)...)
	case check != nil:
		b.Queue(endpointsOnlyCheckSQL, check.consumers, check.versions)
	}
	var err error
	if tx != nil {
		err = tx.commit(ctx, b)
	} else {
		err = sendQueued(ctx, q, b)
	}
	var failedCommit errCommit
	if err != nil && !errors.As(err, &failedCommit) {
		return fmt.Errorf("insert deliveries: %w", err)
	}
	return err
}

// targets reports whether item goes to ep: the one endpoint item names,
// or each whose filter matches.
func targets(item *store.EventIngestItem, ep matcher) bool {
	if item.EndpointID != "" {
		return ep.id == item.EndpointID
	}
	return herald.MatchAny(ep.eventTypes, item.EventType)
}

// consumersOf lists the consumers the items name, each once.
func consumersOf(items []*ingestItem) []string {
	consumers := make([]string, 0, len(items))
	seen := map[string]bool{}
	for _, u := range items {
		if !seen[u.item.ConsumerID] {
			seen[u.item.ConsumerID] = true
			consumers = append(consumers, u.item.ConsumerID)
		}
	}
	return consumers
}

// readEndpoints reads the answer to enabledEndpointsSQL: the endpoints
// by consumer, oldest first, their filters compiled through filters.
func readEndpoints(br pgx.BatchResults, whole bool, filters *filter.Cache) (map[string][]matcher, error) {
	rows, err := br.Query()
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string][]matcher{}
	for whole && rows.Next() {
		var r endpointRow
		var version int64
		if err := rows.Scan(append(r.dest(), &version)...); err != nil {
			return nil, err
		}
		ep, err := r.endpoint()
		if err != nil {
			return nil, err
		}
		m := matcher{id: ep.ID, eventTypes: ep.EventTypes, ep: ep, bucket: r.bucket(), sealed: r.sealed, configVersion: version,
			filter: filters.Program(ep.Filter)}
		out[ep.ConsumerID] = append(out[ep.ConsumerID], m)
	}
	for !whole && rows.Next() {
		var m matcher
		var consumer, src string
		if err := rows.Scan(&m.id, &consumer, &m.eventTypes, &src); err != nil {
			return nil, err
		}
		m.filter = filters.Program(src)
		out[consumer] = append(out[consumer], m)
	}
	return out, rows.Err()
}

// insertEventsArgs are the arguments of insertEventsSQL for items. Rows
// go in by consumer and key, so two calls that share several keys take
// them in the same order and cannot deadlock. Payloads go in as
// store.StoredPayload makes them, compressed if compress is set.
func insertEventsArgs(items []*ingestItem, now time.Time, compress bool) []any {
	ordered := slices.Clone(items)
	slices.SortStableFunc(ordered, func(a, b *ingestItem) int {
		return cmp.Or(
			cmp.Compare(a.item.ConsumerID, b.item.ConsumerID),
			cmp.Compare(a.item.IdempotencyKey, b.item.IdempotencyKey))
	})
	n := len(ordered)
	ids, consumers, types, keys := make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	payloads := make([][]byte, n)
	for i, u := range ordered {
		ids[i], consumers[i], types[i], keys[i] = u.id, u.item.ConsumerID, u.item.EventType, u.item.IdempotencyKey
		payloads[i] = store.StoredPayload(u.item.Payload, compress)
		if payloads[i] == nil {
			payloads[i] = []byte{}
		}
	}
	if isTraced(ordered) {
		traces := make([][]byte, n)
		for i, u := range ordered {
			traces[i] = u.item.TraceContext
		}
		return []any{ids, consumers, types, payloads, keys, nowArg(now), traces}
	}
	return []any{ids, consumers, types, payloads, keys, nowArg(now)}
}

// readInserted reads the answer to insertEventsSQL for n items: the
// created_at of each id inserted, skipping those whose idempotency key
// was taken.
func readInserted(br pgx.BatchResults, n int) (map[string]time.Time, error) {
	rows, err := br.Query()
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := make(map[string]time.Time, n)
	return out, readInsertedRows(rows, out)
}

// readInsertedRows reads the rows of insertEventsSQL into out.
func readInsertedRows(rows pgx.Rows, out map[string]time.Time) error {
	for rows.Next() {
		var id string
		var created time.Time
		if err := rows.Scan(&id, &created); err != nil {
			return err
		}
		out[id] = created.UTC()
	}
	return rows.Err()
}

// deliveryInsert gathers new deliveries as columns for one insert.
type deliveryInsert struct {
	ids, eventIDs, endpointIDs, consumerIDs, eventTypes []string
}

func (d *deliveryInsert) add(ref store.DeliveryRef, u *ingestItem) {
	d.ids = append(d.ids, ref.ID)
	d.eventIDs = append(d.eventIDs, u.id)
	d.endpointIDs = append(d.endpointIDs, ref.EndpointID)
	d.consumerIDs = append(d.consumerIDs, u.item.ConsumerID)
	d.eventTypes = append(d.eventTypes, u.item.EventType)
}

// endpoints are the distinct endpoints of d, in order.
func (d *deliveryInsert) endpoints() []string {
	ids := slices.Clone(d.endpointIDs)
	slices.Sort(ids)
	return slices.Compact(ids)
}

// args are the arguments of insertDeliveriesSQL.
func (d *deliveryInsert) args(now time.Time) []any {
	return []any{d.ids, d.eventIDs, d.endpointIDs, d.consumerIDs, d.eventTypes, nowArg(now)}
}

// existingEvents fills the results of items whose idempotency key was
// taken with the event that took it and its deliveries, marked Duplicate.
func existingEvents(ctx context.Context, q queryer, items []*ingestItem, results []store.EventIngestResult) error {
	if len(items) == 0 {
		return nil
	}
	consumers, keys := make([]string, len(items)), make([]string, len(items))
	for i, u := range items {
		consumers[i], keys[i] = u.item.ConsumerID, u.item.IdempotencyKey
	}
	rows, err := q.Query(ctx, duplicateEventsSQL, consumers, keys)
	if err != nil {
		return fmt.Errorf("read duplicate events: %w", err)
	}
	byKey := map[idempotencyKey]*herald.Event{}
	var eventIDs []string
	for rows.Next() {
		var r eventRow
		if err := rows.Scan(r.dest()...); err != nil {
			rows.Close()
			return fmt.Errorf("read duplicate events: %w", err)
		}
		ev := r.event()
		byKey[idempotencyKey{ev.ConsumerID, ev.IdempotencyKey}] = ev
		eventIDs = append(eventIDs, ev.ID)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read duplicate events: %w", err)
	}

	rows, err = q.Query(ctx, duplicateDeliveriesSQL, eventIDs)
	if err != nil {
		return fmt.Errorf("read duplicate deliveries: %w", err)
	}
	refs := map[string][]store.DeliveryRef{}
	for rows.Next() {
		var ref store.DeliveryRef
		var eventID string
		if err := rows.Scan(&ref.ID, &ref.EndpointID, &eventID); err != nil {
			rows.Close()
			return fmt.Errorf("read duplicate deliveries: %w", err)
		}
		refs[eventID] = append(refs[eventID], ref)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read duplicate deliveries: %w", err)
	}

	for _, u := range items {
		ev, ok := byKey[idempotencyKey{u.item.ConsumerID, u.item.IdempotencyKey}]
		if !ok {
			// The insert skipped the row, so an event holds the key.
			return fmt.Errorf("event %s: idempotency key taken but no event holds it", u.id)
		}
		r := refs[ev.ID]
		if r == nil {
			r = []store.DeliveryRef{}
		}
		results[u.index] = store.EventIngestResult{Event: ev, Duplicate: true, Deliveries: slices.Clone(r)}
	}
	return nil
}

// EventGet returns one event, or store.ErrNotFound.
func (s *Store) EventGet(ctx context.Context, id string) (*herald.Event, error) {
	var r eventRow
	err := s.pool.QueryRow(ctx, "SELECT "+eventCols+" FROM events WHERE id = $1", id).Scan(r.dest()...)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("get event %s: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get event %s: %w", id, err)
	}
	return r.event(), nil
}

// EventList lists events newest first, filtered by consumer, type and a
// created_at range [Since, Until).
func (s *Store) EventList(ctx context.Context, p *store.EventListParams) (*store.Page[*herald.Event], error) {
	limit := store.ClampLimit(p.Limit)
	var where []string
	var args []any
	add := func(cond string, v any) {
		args = append(args, v)
		where = append(where, cond+" $"+strconv.Itoa(len(args)))
	}
	if p.ConsumerID != "" {
		add("consumer_id =", p.ConsumerID)
	}
	if p.EventType != "" {
		add("event_type =", p.EventType)
	}
	if !p.Since.IsZero() {
		add("created_at >=", p.Since)
	}
	if !p.Until.IsZero() {
		add("created_at <", p.Until)
	}
	if p.Cursor != "" {
		add("id <", p.Cursor)
	}
	args = append(args, limit+1)
	rows, err := s.pool.Query(ctx, "SELECT "+eventCols+" FROM events"+whereClause(where)+
		" ORDER BY id DESC LIMIT $"+strconv.Itoa(len(args)), args...)
	if err != nil {
		return nil, fmt.Errorf("list events: %w", err)
	}
	items, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (*herald.Event, error) {
		var r eventRow
		if err := row.Scan(r.dest()...); err != nil {
			return nil, err
		}
		return r.event(), nil
	})
	if err != nil {
		return nil, fmt.Errorf("list events: %w", err)
	}
	return page(items, limit, func(e *herald.Event) string { return e.ID }), nil
}

// EventSkipList returns the endpoints the event's filters skipped.
func (s *Store) EventSkipList(ctx context.Context, eventID string) ([]store.EventSkip, error) {
	rows, err := s.pool.Query(ctx,
		"SELECT endpoint_id, reason FROM event_skips WHERE event_id = $1 ORDER BY endpoint_id", eventID)
	skips, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (store.EventSkip, error) {
		var k store.EventSkip
		err := row.Scan(&k.EndpointID, &k.Reason)
		return k, err
	})
	if err != nil {
		return nil, fmt.Errorf("list skips of event %s: %w", eventID, err)
	}
	return skips, nil
}
