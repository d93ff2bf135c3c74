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
	"github.com/heraldhooks/herald/internal/store"
)

// eventColumns are read by eventDest, in this order.
const eventColumns = `id, consumer_id, event_type, payload, idempotency_key, created_at`

// eventDest returns scan destinations for eventColumns and a function that
// finishes ev once scanned.
func eventDest(ev *herald.Event) ([]any, func()) {
	var (
		key       sql.NullString
		createdAt int64
	)
	return []any{&ev.ID, &ev.ConsumerID, &ev.EventType, &ev.Payload, &key, &createdAt}, func() {
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

// ingest writes events and their deliveries inside tx: for EventIngest,
// and for the notifications an outcome emits. It reports whether any
// delivery was made, so that the caller wakes the dispatchers once it has
// committed.
func ingest(ctx context.Context, tx *sql.Tx, st *statements, items []store.EventIngestItem, t time.Time) ([]store.EventIngestResult, bool, error) {
	results := make([]store.EventIngestResult, len(items))
	created := false
	findKey := tx.StmtContext(ctx, st.findKey)
	listRefs := tx.StmtContext(ctx, st.listRefs)
	insertEvent := tx.StmtContext(ctx, st.insertEvent)
	insertDelivery := tx.StmtContext(ctx, st.insertDelivery)
	fanOut := tx.StmtContext(ctx, st.fanOut)
	// Each delivery takes the next number of the counter as its seq: the
	// ingest order, which FIFO endpoints follow.
	seq := &seqCounter{read: tx.StmtContext(ctx, st.seqRead), write: tx.StmtContext(ctx, st.seqWrite)}

	targets := map[string][]fanOutTarget{}
	for i, item := range items {
		if item.IdempotencyKey != "" {
			first, err := scanEvent(findKey.QueryRowContext(ctx, item.ConsumerID, item.IdempotencyKey))
			switch {
			case err == nil:
				refs, err := deliveryRefs(ctx, listRefs, first.ID)
				if err != nil {
					return nil, false, err
				}
				results[i] = store.EventIngestResult{Event: first, Duplicate: true, Deliveries: refs}
				continue
			case !errors.Is(err, sql.ErrNoRows):
				return nil, false, err
			}
		}

		eps, ok := targets[item.ConsumerID]
		if !ok {
			var err error
			if eps, err = fanOutTargets(ctx, fanOut, item.ConsumerID); err != nil {
				return nil, false, err
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
		}
		key := sql.NullString{String: ev.IdempotencyKey, Valid: ev.IdempotencyKey != ""}
		if _, err := insertEvent.ExecContext(ctx, ev.ID, ev.ConsumerID, ev.EventType, ev.Payload, key, micros(t)); err != nil {
			return nil, false, fmt.Errorf("event %d: %w", i, err)
		}
		refs := []store.DeliveryRef{}
		for _, ep := range eps {
			if !goesTo(item, ep.id, ep.eventTypes) {
				continue
			}
			id := herald.NewID(herald.PrefixDelivery, t)
			n, err := seq.next(ctx)
			if err != nil {
				return nil, false, fmt.Errorf("event %d: %w", i, err)
			}
			if _, err := insertDelivery.ExecContext(ctx, id, ev.ID, ep.id, ev.ConsumerID, ev.EventType,
				micros(t), micros(t), micros(t), n); err != nil {
				return nil, false, fmt.Errorf("event %d: %w", i, err)
			}
			refs = append(refs, store.DeliveryRef{ID: id, EndpointID: ep.id})
			created = true
		}
		results[i] = store.EventIngestResult{Event: ev, Deliveries: refs}
	}
	if err := seq.save(ctx); err != nil {
		return nil, false, err
	}
	return results, created, nil
}

// goesTo reports whether item goes to the endpoint id with filter
// eventTypes: the one endpoint item names, or each whose filter matches.
func goesTo(item store.EventIngestItem, id string, eventTypes []string) bool {
	if item.EndpointID != "" {
		return id == item.EndpointID
	}
	return herald.MatchAny(eventTypes, item.EventType)
}

// seqCounter hands out delivery seq numbers inside one write transaction:
// it reads the counter once, counts in memory and writes the counter back
// at the end. SQLite has one writer, so no other transaction can take the
// same numbers meanwhile.
type seqCounter struct {
	read, write *sql.Stmt
	value       int64
	loaded      bool
	used        bool
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
	findKeyQuery        = `SELECT ` + eventColumns + ` FROM events WHERE consumer_id = ? AND idempotency_key = ?`
	listRefsQuery       = `SELECT id, endpoint_id FROM deliveries WHERE event_id = ? ORDER BY id`
	insertEventQuery    = `INSERT INTO events (` + eventColumns + `) VALUES (?, ?, ?, ?, ?, ?)`
	insertDeliveryQuery = `INSERT INTO deliveries
		(id, event_id, endpoint_id, consumer_id, event_type, status, attempt_count, due_at,
		 lease_token, last_status_code, last_error, dead_reason, created_at, updated_at, seq)
		VALUES (?, ?, ?, ?, ?, 'pending', 0, ?, 0, 0, '', '', ?, ?, ?)`
	// fanOutQuery lists the enabled endpoints of a consumer with their
	// filters.
	fanOutQuery = `SELECT id, event_types FROM endpoints
		WHERE consumer_id = ? AND enabled = 1 AND deleted_at IS NULL ORDER BY id`
)

// fanOutTargets lists the enabled endpoints of consumer with their filters,
// through fanOut (fanOutQuery bound to the caller's transaction).
func fanOutTargets(ctx context.Context, fanOut *sql.Stmt, consumer string) ([]fanOutTarget, error) {
	rows, err := fanOut.QueryContext(ctx, consumer)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []fanOutTarget
	for rows.Next() {
		var (
			target fanOutTarget
			raw    string
		)
		if err := rows.Scan(&target.id, &raw); err != nil {
			return nil, err
		}
		if err := json.Unmarshal([]byte(raw), &target.eventTypes); err != nil {
			return nil, fmt.Errorf("decode endpoint %s event_types: %w", target.id, err)
		}
		out = append(out, target)
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
	if p.Cursor != "" {
		w.add("id < ?", p.Cursor)
	}
	rows, err := s.reader.QueryContext(ctx, `SELECT `+eventColumns+` FROM events`+w.String()+
		` ORDER BY id DESC LIMIT ?`, append(w.args, limit+1)...)
	if err != nil {
		return nil, fmt.Errorf("list events: %w", err)
	}
	defer rows.Close()
	var items []*herald.Event
	for rows.Next() {
		ev, err := scanEvent(rows)
		if err != nil {
			return nil, fmt.Errorf("list events: %w", err)
		}
		items = append(items, ev)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list events: %w", err)
	}
	return page(items, limit, func(ev *herald.Event) string { return ev.ID }), nil
}
