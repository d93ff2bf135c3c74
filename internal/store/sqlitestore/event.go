package sqlitestore

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/heraldhooks/herald"
	"github.com/heraldhooks/herald/internal/filter"
	"github.com/heraldhooks/herald/internal/store"
)

// eventColumns are read by eventDest, in this order.
const eventColumns = `id, consumer_id, event_type, payload, idempotency_key, created_at, trace_context`

// eventDest returns scan destinations for eventColumns and a function that
// finishes ev once scanned.
func eventDest(ev *herald.Event) ([]any, func()) {
	var (
		key       sql.NullString
		createdAt int64
	)
	return []any{&ev.ID, &ev.ConsumerID, &ev.EventType, store.PayloadColumn{P: &ev.Payload}, &key, &createdAt, &ev.TraceContext}, func() {
		ev.IdempotencyKey = key.String
		ev.CreatedAt = fromMicros(createdAt)
		if ev.Payload == nil {
			ev.Payload = []byte{}
		}
	}
}

// scanEvent reads one row of eventColumns.
func scanEvent(sc scanner) (*herald.Event, error) {
	ev := &herald.Event{}
	dest, finish := eventDest(ev)
	if err := sc.Scan(dest...); err != nil {
		return nil, err
	}
	finish()
	return ev, nil
}

// fanOutTarget is what ingest needs of an endpoint.
type fanOutTarget struct {
	id         string
	eventTypes []string
	// filter is the endpoint's filter compiled (nil: none).
	filter *filter.Program
	// lease is what an ingest group that may lease knows of it.
	lease *leaseTarget
}

// EventIngest writes the events and their deliveries in one transaction
// (shared with concurrent calls: see groupIngest); an idempotency key seen
// before (in the store or earlier in this call) answers with the first
// event and creates nothing.
func (s *Store) EventIngest(ctx context.Context, p *store.EventIngestParams) ([]store.EventIngestResult, error) {
	if len(p.Events) == 0 {
		return []store.EventIngestResult{}, nil
	}
	t := now(p.Now)
	st, err := s.prepared(ctx)
	if err != nil {
		return nil, fmt.Errorf("ingest events: %w", err)
	}
	c := &ingestCall{ctx: ctx, items: p.Events, t: t}
	s.groupIngest(st, c)
	if c.err != nil {
		return nil, fmt.Errorf("ingest events: %w", c.err)
	}
	return c.results, nil
}

// ingested is what ingest wrote besides its results.
type ingested struct {
	// queued says whether a delivery was made pending, so that the caller
	// wakes the dispatchers once it has committed.
	queued bool
	// leased are the deliveries leased to the group's taker, in ingest
	// order, for the caller to hand over once it has committed.
	leased []*store.ClaimedDelivery
}

// ingest writes events and their deliveries inside tx: for EventIngest,
// and for the notifications an outcome emits. With l (an ingest group
// that may lease: leasing.go) and slots of it left, it leases what a
// claim would take at once, and queues the rest.
func ingest(ctx context.Context, tx *sql.Tx, st *statements, seq *seqCounter, items []store.EventIngestItem, t time.Time,
	l *groupLeasing,
) ([]store.EventIngestResult, ingested, error) {
	results := make([]store.EventIngestResult, len(items))
	var out ingested
	findKey := tx.StmtContext(ctx, st.findKey)
	listRefs := tx.StmtContext(ctx, st.listRefs)
	insertEvent := tx.StmtContext(ctx, st.insertEvent)
	insertDelivery := tx.StmtContext(ctx, st.insertDelivery)
	if l != nil && l.slots == 0 {
		l = nil // nothing more to lease in this group
	}
	var fanOut, room *sql.Stmt
	if l != nil {
		fanOut, room = tx.StmtContext(ctx, st.fanOutWhole), tx.StmtContext(ctx, st.room)
	} else {
		fanOut = tx.StmtContext(ctx, st.fanOut)
	}

	targets := map[string][]fanOutTarget{}
	for i, item := range items {
		if item.IdempotencyKey != "" {
			first, err := scanEvent(findKey.QueryRowContext(ctx, item.ConsumerID, item.IdempotencyKey))
			switch {
			case err == nil:
				refs, err := deliveryRefs(ctx, listRefs, first.ID)
				if err != nil {
					return nil, out, err
				}
				results[i] = store.EventIngestResult{Event: first, Duplicate: true, Deliveries: refs}
				continue
			case !errors.Is(err, sql.ErrNoRows):
				return nil, out, err
			}
		}

		eps, ok := targets[item.ConsumerID]
		if !ok {
			var err error
			if eps, err = fanOutTargets(ctx, fanOut, item.ConsumerID, l, t, &st.filters); err != nil {
				return nil, out, err
			}
			targets[item.ConsumerID] = eps
		}

		payload := item.Payload
		if payload == nil {
			payload = []byte{}
		}
		ev := &herald.Event{
			ID:             herald.NewID(herald.PrefixEvent, t),
			ConsumerID:     item.ConsumerID,
			EventType:      item.EventType,
			Payload:        bytes.Clone(payload), // never nil: the column is NOT NULL
			IdempotencyKey: item.IdempotencyKey,
			CreatedAt:      t,
			TraceContext:   item.TraceContext,
		}
		key := sql.NullString{String: ev.IdempotencyKey, Valid: ev.IdempotencyKey != ""}
		stored := store.StoredPayload(ev.Payload, st.compress)
		var err error
		if ev.TraceContext == nil {
			_, err = insertEvent.ExecContext(ctx, ev.ID, ev.ConsumerID, ev.EventType, stored, key, micros(t))
		} else { // tracing is on: the ingest's span context too
			_, err = tx.ExecContext(ctx, insertTracedEventQuery, ev.ID, ev.ConsumerID, ev.EventType, stored, key, micros(t), ev.TraceContext)
		}
		if err != nil {
			return nil, out, fmt.Errorf("event %d: %w", i, err)
		}
		refs := []store.DeliveryRef{}
		var skips []store.EventSkip
		var fev *filter.Event // the payload parsed once, if a filter needs it
		for _, ep := range eps {
			if !goesTo(item, ep.id, ep.eventTypes) {
				continue
			}
			if ep.filter != nil && item.EndpointID == "" {
				if fev == nil {
					fev = &filter.Event{EventType: ev.EventType, ConsumerID: ev.ConsumerID, Payload: ev.Payload}
				}
				if reason := filter.Decide(ep.filter, fev); reason != "" {
					if _, err := tx.ExecContext(ctx, insertSkipQuery, ev.ID, ep.id, reason); err != nil {
						return nil, out, fmt.Errorf("event %d: %w", i, err)
					}
					skips = append(skips, store.EventSkip{EndpointID: ep.id, Reason: reason})
					continue
				}
			}
			id := herald.NewID(herald.PrefixDelivery, t)
			n, err := seq.next(ctx)
			if err != nil {
				return nil, out, fmt.Errorf("event %d: %w", i, err)
			}
			status, due, token := herald.StatusPending, t, 0
			leased := false
			if ep.lease != nil { // read for a group that may lease: l is set
				if leased, err = l.lease(ctx, room, ep.id, ep.lease, t); err != nil {
					return nil, out, fmt.Errorf("event %d: %w", i, err)
				}
			}
			if leased {
				status, due, token = herald.StatusDelivering, l.leaseExpiry(ep.lease, t), 1
			}
			if _, err := insertDelivery.ExecContext(ctx, id, ev.ID, ep.id, ev.ConsumerID, ev.EventType,
				string(status), micros(due), token, micros(t), micros(t), n); err != nil {
				if leased {
					l.unlease(ep.lease)
				}
				return nil, out, fmt.Errorf("event %d: %w", i, err)
			}
			refs = append(refs, store.DeliveryRef{ID: id, EndpointID: ep.id})
			if !leased {
				out.queued = true
				continue
			}
			out.leased = append(out.leased, &store.ClaimedDelivery{
				Delivery: herald.Delivery{
					ID: id, EventID: ev.ID, EndpointID: ep.id, ConsumerID: ev.ConsumerID, EventType: ev.EventType,
					Status: herald.StatusDelivering, CreatedAt: t, UpdatedAt: t,
				},
				Event:          *ev,
				Endpoint:       *ep.lease.ep,
				LeaseToken:     1,
				LeaseExpiresAt: due,
			})
		}
		results[i] = store.EventIngestResult{Event: ev, Deliveries: refs, Skips: skips}
	}
	return results, out, nil
}

// goesTo reports whether item goes to the endpoint id with filter
// eventTypes: the one endpoint item names, or each whose filter matches.
func goesTo(item store.EventIngestItem, id string, eventTypes []string) bool {
	if item.EndpointID != "" {
		return id == item.EndpointID
	}
	return herald.MatchAny(eventTypes, item.EventType)
}

// seqCounter hands out delivery seq numbers inside one write transaction
// (each delivery takes the next as its seq: the ingest order, which FIFO
// endpoints follow): it reads the counter once, counts in memory, and the
// transaction writes the counter back (save) before it commits. SQLite has
// one writer, so no other transaction can take the same numbers
// meanwhile. Numbers taken by a call rolled back to its savepoint are
// skipped: seq orders, it does not count.
type seqCounter struct {
	read, write *sql.Stmt
	value       int64
	loaded      bool
	used        bool
}

// newSeqCounter is a seqCounter for tx.
func newSeqCounter(ctx context.Context, tx *sql.Tx, st *statements) *seqCounter {
	return &seqCounter{read: tx.StmtContext(ctx, st.seqRead), write: tx.StmtContext(ctx, st.seqWrite)}
}

func (c *seqCounter) next(ctx context.Context) (int64, error) {
	if !c.loaded {
		if err := c.read.QueryRowContext(ctx).Scan(&c.value); err != nil {
			return 0, fmt.Errorf("read delivery seq: %w", err)
		}
		c.loaded = true
	}
	c.value++
	c.used = true
	return c.value, nil
}

func (c *seqCounter) save(ctx context.Context) error {
	if !c.used {
		return nil
	}
	if _, err := c.write.ExecContext(ctx, c.value); err != nil {
		return fmt.Errorf("write delivery seq: %w", err)
	}
	return nil
}

// The statements of ingest.
const (
	findKeyQuery     = `SELECT ` + eventColumns + ` FROM events WHERE consumer_id = ? AND idempotency_key = ?`
	listRefsQuery    = `SELECT id, endpoint_id FROM deliveries WHERE event_id = ? ORDER BY id`
	insertEventQuery = `INSERT INTO events (id, consumer_id, event_type, payload, idempotency_key, created_at)
		VALUES (?, ?, ?, ?, ?, ?)`
	// insertTracedEventQuery is insertEventQuery with the ingest's span
	// context (migration 0025), run only when tracing is on: off, the
	// statement and the row are as they were.
	insertTracedEventQuery = `INSERT INTO events (id, consumer_id, event_type, payload, idempotency_key, created_at, trace_context)
		VALUES (?, ?, ?, ?, ?, ?, ?)`
	// insertSkipQuery records an endpoint a filter skipped (migration
	// 0023); only an event with a skip runs it.
	insertSkipQuery = `INSERT INTO event_skips (event_id, endpoint_id, reason) VALUES (?, ?, ?)`
	// insertDeliveryQuery inserts a new delivery: pending and due (lease
	// token 0), or leased at ingest (delivering, due when its lease runs
	// out, lease token 1).
	insertDeliveryQuery = `INSERT INTO deliveries
		(id, event_id, endpoint_id, consumer_id, event_type, status, attempt_count, due_at,
		 lease_token, last_status_code, last_error, dead_reason, created_at, updated_at, seq)
		VALUES (?, ?, ?, ?, ?, ?, 0, ?, ?, 0, '', '', ?, ?, ?)`
	// fanOutQuery lists the enabled endpoints of a consumer with their
	// filters; fanOutWholeQuery reads them whole, with their token
	// buckets, for an ingest that may lease.
	fanOutQuery = `SELECT id, event_types, filter FROM endpoints
		WHERE consumer_id = ? AND enabled = 1 AND deleted_at IS NULL ORDER BY id`
	fanOutWholeQuery = `SELECT ` + endpointColumns + `, bucket_tokens, bucket_at FROM endpoints
		WHERE consumer_id = ? AND enabled = 1 AND deleted_at IS NULL ORDER BY id`
)

// fanOutTargets lists the enabled endpoints of consumer with their filters,
// through fanOut (fanOutQuery bound to the caller's transaction), or, with
// l, whole through fanOutWholeQuery, each with what l knows of it at t.
func fanOutTargets(ctx context.Context, fanOut *sql.Stmt, consumer string, l *groupLeasing, t time.Time, filters *filter.Cache) ([]fanOutTarget, error) {
	if l != nil {
		return leaseTargets(ctx, fanOut, consumer, l, t, filters)
	}
	rows, err := fanOut.QueryContext(ctx, consumer)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []fanOutTarget
	for rows.Next() {
		var target fanOutTarget
		var raw, src string
		if err := rows.Scan(&target.id, &raw, &src); err != nil {
			return nil, err
		}
		target.filter = filters.Program(src)
		if err := json.Unmarshal([]byte(raw), &target.eventTypes); err != nil {
			return nil, fmt.Errorf("decode endpoint %s event_types: %w", target.id, err)
		}
		out = append(out, target)
	}
	return out, rows.Err()
}

// leaseTargets lists the enabled endpoints of consumer whole, as kept
// (endpointcache.go) or through fanOut (fanOutWholeQuery bound to the
// group's transaction), each with what l knows of it at t.
func leaseTargets(ctx context.Context, fanOut *sql.Stmt, consumer string, l *groupLeasing, t time.Time, filters *filter.Cache) ([]fanOutTarget, error) {
	kept, ok := []cachedEndpoint(nil), false
	if l.endpoints != nil {
		kept, ok = l.endpoints.get(consumer)
	}
	if !ok {
		var err error
		if kept, err = readWhole(ctx, fanOut, consumer); err != nil {
			return nil, err
		}
		if l.endpoints != nil {
			l.endpoints.put(consumer, kept)
		}
	}
	out := make([]fanOutTarget, len(kept))
	for i := range kept {
		tg := l.target(&kept[i].ep, kept[i].bucket, kept[i].sealed, t)
		out[i] = fanOutTarget{id: tg.id, eventTypes: tg.eventTypes, filter: filters.Program(kept[i].ep.Filter), lease: tg}
	}
	return out, nil
}

// readWhole reads the rows of fanOutWholeQuery for consumer.
func readWhole(ctx context.Context, fanOut *sql.Stmt, consumer string) ([]cachedEndpoint, error) {
	rows, err := fanOut.QueryContext(ctx, consumer)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []cachedEndpoint
	for rows.Next() {
		var (
			k        cachedEndpoint
			bucketAt sql.NullInt64
		)
		dest, finish := endpointDest(&k.ep, &k.sealed)
		if err := rows.Scan(append(dest, &k.bucket.Tokens, &bucketAt)...); err != nil {
			return nil, err
		}
		if err := finish(); err != nil {
			return nil, err
		}
		if bucketAt.Valid {
			k.bucket.At = fromMicros(bucketAt.Int64)
		}
		out = append(out, k)
	}
	return out, rows.Err()
}

// deliveryRefs lists the deliveries of an event.
func deliveryRefs(ctx context.Context, stmt *sql.Stmt, eventID string) ([]store.DeliveryRef, error) {
	rows, err := stmt.QueryContext(ctx, eventID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	refs := []store.DeliveryRef{}
	for rows.Next() {
		var r store.DeliveryRef
		if err := rows.Scan(&r.ID, &r.EndpointID); err != nil {
			return nil, err
		}
		refs = append(refs, r)
	}
	return refs, rows.Err()
}

// EventGet returns the event with its payload, or store.ErrNotFound.
func (s *Store) EventGet(ctx context.Context, id string) (*herald.Event, error) {
	ev, err := scanEvent(s.reader.QueryRowContext(ctx, `SELECT `+eventColumns+` FROM events WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("get event %s: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get event %s: %w", id, err)
	}
	return ev, nil
}

// EventList lists events newest first, with their payloads.
func (s *Store) EventList(ctx context.Context, p *store.EventListParams) (*store.Page[*herald.Event], error) {
	limit := store.ClampLimit(p.Limit)
	w := &where{}
	if p.ConsumerID != "" {
		w.add("consumer_id = ?", p.ConsumerID)
	}
	if p.EventType != "" {
		w.add("event_type = ?", p.EventType)
	}
	if !p.Since.IsZero() {
		w.add("created_at >= ?", micros(p.Since))
	}
	if !p.Until.IsZero() {
		w.add("created_at < ?", micros(p.Until))
	}
	// A consumer's events are read through its listing, listed or not
	// (listing.newestFirst).
	var (
		query string
		args  []any
	)
	if p.ConsumerID != "" {
		query, args = eventsOfConsumer.newestFirst(eventColumns, p.ConsumerID, w, p.Cursor, limit+1)
	} else {
		if p.Cursor != "" {
			w.add("id < ?", p.Cursor)
		}
		query, args = `SELECT `+eventColumns+` FROM events`+w.String()+` ORDER BY id DESC LIMIT ?`, append(w.args, limit+1)
	}
	rows, err := s.reader.QueryContext(ctx, query, args...)
	items, err := collect(rows, err, scanEvent)
	if err != nil {
		return nil, fmt.Errorf("list events: %w", err)
	}
	return store.NewPage(items, limit, func(ev *herald.Event) string { return ev.ID }), nil
}

// EventSkipList returns the endpoints the event's filters skipped.
func (s *Store) EventSkipList(ctx context.Context, eventID string) ([]store.EventSkip, error) {
	rows, err := s.reader.QueryContext(ctx,
		`SELECT endpoint_id, reason FROM event_skips WHERE event_id = ? ORDER BY endpoint_id`, eventID)
	skips, err := collect(rows, err, func(sc scanner) (store.EventSkip, error) {
		var k store.EventSkip
		err := sc.Scan(&k.EndpointID, &k.Reason)
		return k, err
	})
	if err != nil {
		return nil, fmt.Errorf("list skips of event %s: %w", eventID, err)
	}
	return skips, nil
}
