package api

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/heraldhooks/herald"
	"github.com/heraldhooks/herald/internal/store"
	"github.com/heraldhooks/herald/internal/wire"
)

// deliveryList serves
// GET /v1/deliveries?status=&endpoint_id=&consumer_id=&event_id=&event_type=,
// newest first.
func (s *Server) deliveryList(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	if err := checkQuery(q, "status", "endpoint_id", "consumer_id", "event_id", "event_type", "limit", "cursor"); err != nil {
		return err
	}
	limit, cursor, err := pageParams(q)
	if err != nil {
		return err
	}
	status := herald.Status(q.Get("status"))
	if status != "" && !status.Valid() {
		return badRequest("invalid_status", "status must be pending, delivering, delivered, dead or cancelled")
	}
	page, err := s.store.DeliveryList(r.Context(), &store.DeliveryListParams{
		Status:     status,
		EndpointID: q.Get("endpoint_id"),
		ConsumerID: q.Get("consumer_id"),
		EventID:    q.Get("event_id"),
		EventType:  q.Get("event_type"),
		Cursor:     cursor,
		Limit:      limit,
	})
	if err != nil {
		return fmt.Errorf("list deliveries: %w", err)
	}
	writeJSON(w, http.StatusOK, wire.List[wire.Delivery]{Data: toDeliveriesJSON(page.Items, asConsumer(r)), NextCursor: encodeCursor(page.NextCursor)})
	return nil
}

// deliveryGet serves GET /v1/deliveries/{id}.
func (s *Server) deliveryGet(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	d, err := s.store.DeliveryGet(r.Context(), id)
	if err != nil {
		return storeError("get delivery", err, "delivery", id)
	}
	writeJSON(w, http.StatusOK, toDeliveryJSON(d, asConsumer(r)))
	return nil
}

// attemptList serves GET /v1/deliveries/{id}/attempts, oldest first.
func (s *Server) attemptList(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	q := r.URL.Query()
	if err := checkQuery(q, "limit", "cursor"); err != nil {
		return err
	}
	limit, cursor, err := pageParams(q)
	if err != nil {
		return err
	}
	if _, err := s.store.DeliveryGet(r.Context(), id); err != nil {
		return storeError("get delivery", err, "delivery", id)
	}
	page, err := s.store.AttemptList(r.Context(), &store.AttemptListParams{DeliveryID: id, Cursor: cursor, Limit: limit})
	if err != nil {
		return storeError("list attempts", err, "delivery", id)
	}
	out := wire.List[wire.Attempt]{Data: make([]wire.Attempt, 0, len(page.Items)), NextCursor: encodeCursor(page.NextCursor)}
	for _, a := range page.Items {
		out.Data = append(out.Data, toAttemptJSON(a, asConsumer(r)))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// deliveryReplay serves POST /v1/deliveries/{id}/replay: a terminal
// delivery goes back to pending, due now, with a fresh attempt budget (its
// attempt log stays); 202 with the delivery. A live delivery, or one whose
// endpoint is disabled or gone, is a 409.
func (s *Server) deliveryReplay(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	var req wire.EmptyRequest
	if _, err := decodeBody(w, r, maxSmallBody, true, &req); err != nil {
		return err
	}
	d, err := s.store.DeliveryReplay(r.Context(), &store.DeliveryReplayParams{ID: id, Now: s.storeNow()})
	if errors.Is(err, store.ErrConflict) {
		return s.replayConflict(r, id, err)
	}
	if err != nil {
		return storeError("replay delivery", err, "delivery", id)
	}
	writeJSON(w, http.StatusAccepted, toDeliveryJSON(d, asConsumer(r)))
	return nil
}

// deliveryCancel serves POST /v1/deliveries/{id}/cancel: a pending or
// delivering delivery becomes cancelled; 200 with the delivery. A terminal
// one is a 409.
func (s *Server) deliveryCancel(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	var req wire.EmptyRequest
	if _, err := decodeBody(w, r, maxSmallBody, true, &req); err != nil {
		return err
	}
	d, err := s.store.DeliveryCancel(r.Context(), &store.DeliveryCancelParams{ID: id, Now: s.storeNow()})
	if errors.Is(err, store.ErrConflict) {
		if cur, gerr := s.store.DeliveryGet(r.Context(), id); gerr == nil {
			return &apiError{http.StatusConflict, "conflict",
				fmt.Sprintf("delivery %s is %s; only a pending or delivering delivery can be cancelled", id, cur.Status)}
		}
	}
	if err != nil {
		return storeError("cancel delivery", err, "delivery", id)
	}
	writeJSON(w, http.StatusOK, toDeliveryJSON(d, asConsumer(r)))
	return nil
}

// replayConflict explains why the store refused to replay delivery id: it
// is still live, or its endpoint is disabled or deleted.
func (s *Server) replayConflict(r *http.Request, id string, err error) error {
	d, gerr := s.store.DeliveryGet(r.Context(), id)
	switch {
	case gerr != nil:
		return storeError("replay delivery", err, "delivery", id)
	case !d.Status.Terminal():
		return &apiError{http.StatusConflict, "conflict",
			fmt.Sprintf("delivery %s is %s; only a delivered, dead or cancelled delivery can be replayed", id, d.Status)}
	}
	return &apiError{http.StatusConflict, "conflict",
		fmt.Sprintf("the endpoint %s of delivery %s is disabled or deleted; enable it (POST /v1/endpoints/%s/enable) before replaying its deliveries",
			d.EndpointID, id, d.EndpointID)}
}
