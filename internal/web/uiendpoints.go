package web

import (
	"net/http"
	"net/url"
	"strings"

	"github.com/heraldhooks/herald/internal/wire"
)

// The endpoints pages: a keyset-paged table filtered by consumer, and an
// endpoint's page with its settings, health, recent deliveries and
// actions, each action a /v1 call.

type endpointsData struct {
	Consumer  string
	Endpoints []wire.Endpoint
	Pager     Pager
}

// endpoints serves GET /ui/endpoints?consumer_id=: GET /v1/endpoints, 50
// a page, newest first. A page costs one read of the endpoints index,
// whatever the number of endpoints or deliveries: no column is counted
// from deliveries.
func (u *UI) endpoints(w http.ResponseWriter, r *http.Request, s *uiSession) {
	q := r.URL.Query()
	d := endpointsData{Consumer: strings.TrimSpace(q.Get("consumer_id"))}
	v := url.Values{"limit": {"50"}}
	if d.Consumer != "" {
		v.Set("consumer_id", d.Consumer)
	}
	if c := q.Get("cursor"); c != "" {
		v.Set("cursor", c)
	}
	var list wire.List[wire.Endpoint]
	if err := u.call(r.Context(), s, http.MethodGet, "/v1/endpoints?"+v.Encode(), nil, &list); err != nil {
		u.callFailed(w, r, s, err)
		return
	}
	d.Endpoints = list.Data
	d.Pager = NewPager(r.URL, list.NextCursor)
	u.render(w, r, s, http.StatusOK, "endpoints", "Endpoints", "endpoints", d)
}

type endpointData struct {
	Endpoint   wire.Endpoint
	Deliveries []wire.Delivery
	Secret     string
}

// endpoint serves GET /ui/endpoints/{id}: the endpoint (its health with
// the last hour's success rate) and its 20 newest deliveries.
func (u *UI) endpoint(w http.ResponseWriter, r *http.Request, s *uiSession) {
	id := url.PathEscape(r.PathValue("id"))
	var d endpointData
	if err := u.call(r.Context(), s, http.MethodGet, "/v1/endpoints/"+id, nil, &d.Endpoint); err != nil {
		u.callFailed(w, r, s, err)
		return
	}
	var list wire.List[wire.Delivery]
	v := url.Values{"endpoint_id": {d.Endpoint.ID}, "limit": {"20"}}
	if err := u.call(r.Context(), s, http.MethodGet, "/v1/deliveries?"+v.Encode(), nil, &list); err != nil {
		u.callFailed(w, r, s, err)
		return
	}
	d.Deliveries = list.Data
	u.render(w, r, s, http.StatusOK, "endpoint", "Endpoint "+d.Endpoint.ID, "endpoints", d)
}

// endpointAction serves POST /ui/endpoints/{id}/<action> (enable,
// disable) by POST /v1/endpoints/{id}/<action>.
func (u *UI) endpointAction(action, done string) uiHandler {
	return func(w http.ResponseWriter, r *http.Request, s *uiSession) {
		id := r.PathValue("id")
		var body any = struct{}{}
		if action == "disable" {
			if reason := strings.TrimSpace(r.PostFormValue("reason")); reason != "" {
				body = wire.DisableRequest{Reason: &reason}
			}
		}
		f := Flash{Kind: "ok", Text: done}
		if err := u.call(r.Context(), s, http.MethodPost, "/v1/endpoints/"+url.PathEscape(id)+"/"+action, body, nil); err != nil {
			f = Flash{Kind: "error", Text: "Not done: " + callMessage(err)}
		}
		SetFlash(w, r, UIPath, f)
		http.Redirect(w, r, "/ui/endpoints/"+url.PathEscape(id), http.StatusSeeOther)
	}
}

// endpointRotate serves POST /ui/endpoints/{id}/rotate-secret: a new
// secret is made by the API and shown once, on the page this answers (not
// through a redirect, so it is never kept in a cookie).
func (u *UI) endpointRotate(w http.ResponseWriter, r *http.Request, s *uiSession) {
	id := url.PathEscape(r.PathValue("id"))
	var d endpointData
	if err := u.call(r.Context(), s, http.MethodPost, "/v1/endpoints/"+id+"/rotate-secret", struct{}{}, &d.Endpoint); err != nil {
		SetFlash(w, r, UIPath, Flash{Kind: "error", Text: "Not rotated: " + callMessage(err)})
		http.Redirect(w, r, "/ui/endpoints/"+id, http.StatusSeeOther)
		return
	}
	d.Secret = d.Endpoint.Secret
	if d.Secret == "" {
		d.Secret = d.Endpoint.PublicKey
	}
	var list wire.List[wire.Delivery]
	v := url.Values{"endpoint_id": {d.Endpoint.ID}, "limit": {"20"}}
	if err := u.call(r.Context(), s, http.MethodGet, "/v1/deliveries?"+v.Encode(), nil, &list); err == nil {
		d.Deliveries = list.Data
	}
	u.render(w, r, s, http.StatusOK, "endpoint", "Endpoint "+d.Endpoint.ID, "endpoints", d)
}
