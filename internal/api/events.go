package api

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/heraldhooks/herald"
	"github.com/heraldhooks/herald/internal/logkey"
	"github.com/heraldhooks/herald/internal/store"
	"github.com/heraldhooks/herald/internal/wire"
)

// idempotencyHeader may carry a single event's idempotency key.
const idempotencyHeader = "Idempotency-Key"

// maxEventDeliveryPages bounds how many pages of deliveries GET
// /v1/events/{id} gathers (1,000 each); past that, page with
// GET /v1/deliveries?event_id=.
const maxEventDeliveryPages = 10

// eventIngest serves POST /v1/events: 202 once the event and its
// deliveries are committed (invariant 1), or 200 with the first event and
// "duplicate": true when the consumer used the idempotency key before (in the
// body or the Idempotency-Key header). The payload is kept as the exact
// bytes of the request (invariant 5).
func (s *Server) eventIngest(w http.ResponseWriter, r *http.Request) error {
	body, err := readBody(w, r, int64(s.maxPayload)+envelopeSlack, "payload_too_large")
	if err != nil {
		return err
	}
	if len(strings.TrimSpace(string(body))) == 0 {
		return badRequest("invalid_json", "the request body is empty; it must be a JSON object")
	}
	var req wire.EventRequest
	if err := decodeJSON(body, &req); err != nil {
		return err
	}
	if hk := r.Header.Get(idempotencyHeader); hk != "" || len(r.Header.Values(idempotencyHeader)) > 0 {
		if req.IdempotencyKey != nil && *req.IdempotencyKey != hk {
			return badRequest("invalid_idempotency_key", "idempotency_key and the Idempotency-Key header differ; give one, or the same in both")
		}
		req.IdempotencyKey = &hk
	}
	item, err := s.eventItem(&req)
	if err != nil {
		return err
	}
	if err := s.checkPayload(r, &item); err != nil {
		return err
	}
	results, err := s.ingest(r.Context(), []store.EventIngestItem{item})
	if err != nil {
		return fmt.Errorf("ingest event: %w", err)
	}
	if len(results) != 1 {
		return fmt.Errorf("ingest event: store answered %d results for 1 event", len(results))
	}
	status := http.StatusAccepted
	if results[0].Duplicate {
		status = http.StatusOK
	}
	writeJSON(w, status, toIngestJSON(&results[0]))
	return nil
}

// eventIngestBatch serves POST /v1/events/batch {"events": [...]}: 1 to
// 1,000 events in one transaction, answered 202 with one result per event,
// in order. One invalid event rejects the whole batch, and the error names
// its index (events[3].event_type ...).
func (s *Server) eventIngestBatch(w http.ResponseWriter, r *http.Request) error {
	if len(r.Header.Values(idempotencyHeader)) > 0 {
		return badRequest("invalid_idempotency_key", "the Idempotency-Key header does not apply to a batch; give idempotency_key in each event")
	}
	body, err := readBody(w, r, s.maxBatchBody, "payload_too_large")
	if err != nil {
		return err
	}
	if len(strings.TrimSpace(string(body))) == 0 {
		return badRequest("invalid_json", "the request body is empty; it must be a JSON object")
	}
	var req wire.BatchRequest
	if err := decodeJSON(body, &req); err != nil {
		return err
	}
	if len(req.Events) == 0 || len(req.Events) > MaxBatchEvents {
		return badRequest("invalid_events", "events must list from 1 to %d events", MaxBatchEvents)
	}
	items := make([]store.EventIngestItem, len(req.Events))
	for i, raw := range req.Events {
		var ev wire.EventRequest
		if err := decodeJSON(raw, &ev); err != nil {
			return batchItemError(i, err)
		}
		item, err := s.eventItem(&ev)
		if err == nil {
			err = s.checkPayload(r, &item)
		}
		if err != nil {
			return batchItemError(i, err)
		}
		items[i] = item
	}
	results, err := s.ingest(r.Context(), items)
	if err != nil {
		return fmt.Errorf("ingest %d events: %w", len(items), err)
	}
	if len(results) != len(items) {
		return fmt.Errorf("ingest events: store answered %d results for %d events", len(results), len(items))
	}
	out := wire.BatchResult{Data: make([]wire.IngestResult, len(results))}
	for i := range results {
		out.Data[i] = toIngestJSON(&results[i])
	}
	writeJSON(w, http.StatusAccepted, out)
	return nil
}

// batchItemError names the batch index in an event's error:
// "events[3].event_type must match ...".
func batchItemError(i int, err error) error {
	ae, ok := err.(*apiError)
	if !ok {
		return err
	}
	msg := ae.message
	for _, field := range []string{"consumer_id", "event_type", "payload", "idempotency_key"} {
		if strings.HasPrefix(msg, field+" ") {
			return &apiError{ae.status, ae.code, fmt.Sprintf("events[%d].%s", i, msg)}
		}
	}
	if strings.HasPrefix(msg, "the request body must be a JSON object") {
		return badRequest("invalid_json", "events[%d] must be a JSON object", i)
	}
	msg = strings.TrimPrefix(msg, "the request body ")
	return &apiError{ae.status, ae.code, fmt.Sprintf("events[%d]: %s", i, msg)}
}

// eventItem validates one event request into what the store ingests. Every
// message starts with the field it is about.
func (s *Server) eventItem(req *wire.EventRequest) (store.EventIngestItem, error) {
	item := store.EventIngestItem{ConsumerID: herald.DefaultConsumerID}
	if req.ConsumerID != nil {
		if err := validateConsumerID(*req.ConsumerID); err != nil {
			return item, err
		}
		item.ConsumerID = *req.ConsumerID
	}
	if req.EventType == nil {
		return item, badRequest("invalid_event_type", "event_type is required and must match [a-zA-Z0-9_.-]{1,128}")
	}
	if err := herald.ValidateEventType(*req.EventType); err != nil {
		return item, badRequest("invalid_event_type", "%v", err)
	}
	if herald.IsNotification(*req.EventType) {
		// Receivers trust herald.* events to come from Herald itself.
		return item, badRequest("invalid_event_type", "event_type must not start with %q: those types are reserved for Herald's own notifications", herald.NotifyPrefix)
	}
	item.EventType = *req.EventType
	if req.Payload == nil {
		return item, badRequest("invalid_payload", "payload is required: any JSON value")
	}
	if len(req.Payload) > s.maxPayload {
		return item, &apiError{http.StatusRequestEntityTooLarge, "payload_too_large",
			fmt.Sprintf("payload is %d bytes; at most %d are accepted", len(req.Payload), s.maxPayload)}
	}
	if !utf8.Valid(req.Payload) {
		return item, badRequest("invalid_payload", "payload must be UTF-8 encoded JSON")
	}
	item.Payload = req.Payload
	if req.IdempotencyKey != nil {
		k := *req.IdempotencyKey
		if k == "" || len(k) > maxIdempotencyKeyLen || hasControl(k) {
			return item, badRequest("invalid_idempotency_key", "idempotency_key must be 1 to %d bytes without control characters", maxIdempotencyKeyLen)
		}
		item.IdempotencyKey = k
	}
	return item, nil
}

func toIngestJSON(res *store.EventIngestResult) wire.IngestResult {
	out := wire.IngestResult{Duplicate: res.Duplicate, Deliveries: make([]wire.DeliveryRef, 0, len(res.Deliveries))}
	if res.Event != nil {
		out.ID = res.Event.ID
	}
	for _, d := range res.Deliveries {
		out.Deliveries = append(out.Deliveries, wire.DeliveryRef{ID: d.ID, EndpointID: d.EndpointID})
	}
	return out
}

// eventList serves GET /v1/events?consumer_id=&event_type=&since=&until=,
// newest first, payloads included as their exact bytes.
func (s *Server) eventList(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	if err := checkQuery(q, "consumer_id", "event_type", "since", "until", "limit", "cursor"); err != nil {
		return err
	}
	limit, cursor, err := pageParams(q)
	if err != nil {
		return err
	}
	p := &store.EventListParams{ConsumerID: q.Get("consumer_id"), EventType: q.Get("event_type"), Cursor: cursor, Limit: limit}
	if p.EventType != "" {
		if err := herald.ValidateEventType(p.EventType); err != nil {
			return badRequest("invalid_event_type", "%v", err)
		}
	}
	if p.Since, err = parseTime("since", q.Get("since")); err != nil {
		return err
	}
	if p.Until, err = parseTime("until", q.Get("until")); err != nil {
		return err
	}
	if err := timeRange(p.Since, p.Until); err != nil {
		return err
	}
	page, err := s.store.EventList(r.Context(), p)
	if err != nil {
		return fmt.Errorf("list events: %w", err)
	}
	// Built by hand so each payload keeps its bytes (see eventJSON).
	b := []byte(`{"data":[`)
	for i, ev := range page.Items {
		if i > 0 {
			b = append(b, ',')
		}
		if b, err = s.appendEvent(b, ev, nil, nil); err != nil {
			return err
		}
	}
	b = append(b, `],"next_cursor":`...)
	cur, err := marshal(encodeCursor(page.NextCursor))
	if err != nil {
		return fmt.Errorf("encode cursor: %w", err)
	}
	b = append(b, cur...)
	b = append(b, '}')
	writeRaw(w, http.StatusOK, b)
	return nil
}

// eventGet serves GET /v1/events/{id}: the event, its payload as the exact
// bytes accepted, and its deliveries.
func (s *Server) eventGet(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	ev, err := s.store.EventGet(r.Context(), id)
	if err != nil {
		return storeError("get event", err, "event", id)
	}
	var deliveries []*herald.Delivery
	cursor := ""
	for range maxEventDeliveryPages {
		page, err := s.store.DeliveryList(r.Context(), &store.DeliveryListParams{EventID: id, Cursor: cursor, Limit: store.MaxListLimit})
		if err != nil {
			return fmt.Errorf("list event deliveries: %w", err)
		}
		deliveries = append(deliveries, page.Items...)
		if cursor = page.NextCursor; cursor == "" {
			break
		}
	}
	ds := toDeliveriesJSON(deliveries, asConsumer(r))
	skips, err := s.store.EventSkipList(r.Context(), id)
	if err != nil {
		return fmt.Errorf("list event skips: %w", err)
	}
	b, err := s.appendEvent(nil, ev, ds, toSkipsJSON(skips))
	if err != nil {
		return err
	}
	writeRaw(w, http.StatusOK, b)
	return nil
}

// appendEvent appends ev as a JSON object to b, its payload spliced in as
// the stored bytes (wire.Event leaves Payload out when it is empty), with
// deliveries and the endpoints its filters skipped when not nil (GET
// /v1/events/{id} only).
func (s *Server) appendEvent(b []byte, ev *herald.Event, deliveries []wire.Delivery, filtered []wire.EventSkip) ([]byte, error) {
	obj, err := marshal(wire.Event{
		ID:             ev.ID,
		ConsumerID:     ev.ConsumerID,
		EventType:      ev.EventType,
		IdempotencyKey: ev.IdempotencyKey,
		CreatedAt:      ev.CreatedAt.UTC(),
		Deliveries:     deliveries,
		Filtered:       filtered,
	})
	if err != nil {
		return nil, fmt.Errorf("encode event %s: %w", ev.ID, err)
	}
	payload := ev.Payload
	if !json.Valid(payload) {
		// Every payload was checked on the way in; should a stored one be
		// damaged, the answer stays valid JSON and the log says so.
		s.log.Error("stored payload is not valid JSON; answering it as a string", logkey.EventID, ev.ID)
		if payload, err = marshal(string(payload)); err != nil {
			return nil, fmt.Errorf("encode event %s payload: %w", ev.ID, err)
		}
	}
	b = append(b, obj[:len(obj)-1]...) // without the closing brace
	b = append(b, `,"payload":`...)
	b = append(b, payload...)
	return append(b, '}'), nil
}

// eventReplay serves POST /v1/events/{id}/replay with an optional body
// {"status": "dead", "dry_run": false, "rate": 50}: it brings the event's
// terminal deliveries (of that status; without one, every terminal status)
// back to pending, paced at rate deliveries per second when given, and
// answers {"replayed": N, "dry_run": false}; with dry_run it changes
// nothing and says how many it would replay. Deliveries of disabled or
// deleted endpoints stay as they are.
func (s *Server) eventReplay(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	var req wire.EventReplayRequest
	if _, err := decodeBody(w, r, maxSmallBody, true, &req); err != nil {
		return err
	}
	var status herald.Status
	if req.Status != nil {
		var err error
		if status, err = replayStatus(*req.Status); err != nil {
			return err
		}
	}
	dryRun, rate, err := parseReplayOptions(&req.ReplayOptions)
	if err != nil {
		return err
	}
	if _, err := s.store.EventGet(r.Context(), id); err != nil {
		return storeError("get event", err, "event", id)
	}
	n, err := s.store.DeliveryReplayMany(r.Context(), &store.DeliveryReplayManyParams{
		EventID: id, Status: status, Rate: rate, DryRun: dryRun, Now: s.storeNow(),
	})
	if err != nil {
		return storeError("replay event deliveries", err, "event", id)
	}
	writeJSON(w, http.StatusOK, wire.ReplayResult{Replayed: n, DryRun: dryRun})
	return nil
}
