package web

import (
	"errors"
	"net/http"
	"net/url"
	"strings"

	"github.com/heraldhooks/herald"
	"github.com/heraldhooks/herald/internal/api"
	"github.com/heraldhooks/herald/internal/auth"
	"github.com/heraldhooks/herald/internal/wire"
)

// The portal's message log: the consumer's deliveries, newest first,
// filtered by endpoint, status and event type; a delivery's page with its
// attempts and its event's payload, and replay of a dead one; an event's
// page.

type portalLogData struct {
	Endpoint, Status, EventType string
	// Endpoints fill the endpoint filter (the first 100).
	Endpoints []wire.Endpoint
	Statuses  []herald.Status
	Error     string
	// Filtered: a filter is set, so an empty page says "none match".
	Filtered   bool
	Deliveries []wire.Delivery
	Pager      Pager
}

// deliveries serves GET
// /portal/deliveries?endpoint_id=&status=&event_type=: GET /v1/deliveries
// as the consumer, 50 a page by keyset.
func (p *Portal) deliveries(w http.ResponseWriter, r *http.Request, s *auth.Session) {
	q := r.URL.Query()
	d := portalLogData{
		Endpoint:  strings.TrimSpace(q.Get("endpoint_id")),
		Status:    strings.TrimSpace(q.Get("status")),
		EventType: strings.TrimSpace(q.Get("event_type")),
		Statuses: []herald.Status{herald.StatusPending, herald.StatusDelivering, herald.StatusDelivered,
			herald.StatusDead, herald.StatusCancelled},
	}
	var eps wire.List[wire.Endpoint]
	if err := p.call(r.Context(), s, http.MethodGet, "/v1/endpoints?limit=100", nil, &eps); err != nil {
		p.callFailed(w, r, s, err)
		return
	}
	d.Endpoints = eps.Data
	v := url.Values{"limit": {"50"}}
	for name, val := range map[string]string{"endpoint_id": d.Endpoint, "status": d.Status, "event_type": d.EventType} {
		if val != "" {
			v.Set(name, val)
			d.Filtered = true
		}
	}
	if c := q.Get("cursor"); c != "" {
		v.Set("cursor", c)
	}
	var list wire.List[wire.Delivery]
	if err := p.call(r.Context(), s, http.MethodGet, "/v1/deliveries?"+v.Encode(), nil, &list); err != nil {
		if !isRefusal(err) {
			p.callFailed(w, r, s, err)
			return
		}
		d.Error = callMessage(err)
		p.render(w, r, s, http.StatusBadRequest, "portal-deliveries", "Message log", "log", d)
		return
	}
	d.Deliveries = list.Data
	d.Pager = NewPager(r.URL, list.NextCursor)
	p.render(w, r, s, http.StatusOK, "portal-deliveries", "Message log", "log", d)
}

type portalDeliveryData struct {
	Delivery wire.Delivery
	Attempts []wire.Attempt
	More     bool
	Event    wire.Event
}

// delivery serves GET /portal/deliveries/{id}: the delivery, its attempts
// (the first 100) and its event's payload.
func (p *Portal) delivery(w http.ResponseWriter, r *http.Request, s *auth.Session) {
	id := url.PathEscape(r.PathValue("id"))
	var d portalDeliveryData
	if err := p.call(r.Context(), s, http.MethodGet, "/v1/deliveries/"+id, nil, &d.Delivery); err != nil {
		p.callFailed(w, r, s, err)
		return
	}
	var attempts wire.List[wire.Attempt]
	if err := p.call(r.Context(), s, http.MethodGet, "/v1/deliveries/"+id+"/attempts?limit=100", nil, &attempts); err != nil {
		p.callFailed(w, r, s, err)
		return
	}
	d.Attempts, d.More = attempts.Data, attempts.NextCursor != ""
	if err := p.call(r.Context(), s, http.MethodGet, "/v1/events/"+url.PathEscape(d.Delivery.EventID), nil, &d.Event); err != nil {
		p.callFailed(w, r, s, err)
		return
	}
	p.render(w, r, s, http.StatusOK, "portal-delivery", "Delivery "+d.Delivery.ID, "log", d)
}

// deliveryReplay serves POST /portal/deliveries/{id}/replay: POST
// /v1/deliveries/{id}/replay, then the delivery's page.
func (p *Portal) deliveryReplay(w http.ResponseWriter, r *http.Request, s *auth.Session) {
	page := "/portal/deliveries/" + url.PathEscape(r.PathValue("id"))
	if err := p.call(r.Context(), s, http.MethodPost, "/v1/deliveries/"+url.PathEscape(r.PathValue("id"))+"/replay", struct{}{}, nil); err != nil {
		p.failedAction(w, r, s, err, page, "Not replayed: ")
		return
	}
	p.redirect(w, r, page, Flash{Kind: "ok", Text: "Replayed: the delivery is due now, with a fresh set of attempts."})
}

// event serves GET /portal/events/{id}: the event's payload and deliveries.
func (p *Portal) event(w http.ResponseWriter, r *http.Request, s *auth.Session) {
	var ev wire.Event
	if err := p.call(r.Context(), s, http.MethodGet, "/v1/events/"+url.PathEscape(r.PathValue("id")), nil, &ev); err != nil {
		p.callFailed(w, r, s, err)
		return
	}
	p.render(w, r, s, http.StatusOK, "portal-event", "Event "+ev.ID, "log", ev)
}

// isNotFound reports whether a /v1 call answered 404.
func isNotFound(err error) bool {
	var ce *api.CallError
	return errors.As(err, &ce) && ce.Status == http.StatusNotFound
}

// isRefusal reports whether a /v1 call refused with a reason to show
// (a 4xx other than 404).
func isRefusal(err error) bool {
	var ce *api.CallError
	return errors.As(err, &ce) && ce.Status < 500 && ce.Status != http.StatusNotFound
}
