package web

import (
	"net/http"
	"net/url"

	"github.com/heraldhooks/herald/internal/auth"
	"github.com/heraldhooks/herald/internal/wire"
)

// tracePropagationSave is the PATCH body of the trace propagation form:
// the box checked sends the traceparent header, unchecked does not.
func tracePropagationSave(r *http.Request) (body wire.EndpointRequest, done string) {
	on := r.PostFormValue("trace_propagation") == "on"
	if on {
		return wire.EndpointRequest{TracePropagation: &on},
			"Trace propagation on: with tracing on, its webhooks carry a traceparent header."
	}
	return wire.EndpointRequest{TracePropagation: &on}, "Trace propagation off: its webhooks carry no traceparent header."
}

// endpointTracePropagation serves POST
// /portal/endpoints/{id}/trace-propagation (PATCH /v1/endpoints/{id}).
func (p *Portal) endpointTracePropagation(w http.ResponseWriter, r *http.Request, s *auth.Session) {
	id := url.PathEscape(r.PathValue("id"))
	page := "/portal/endpoints/" + id
	body, done := tracePropagationSave(r)
	if err := p.call(r.Context(), s, http.MethodPatch, "/v1/endpoints/"+id, body, nil); err != nil {
		p.failedAction(w, r, s, err, page, "Not saved: ")
		return
	}
	p.redirect(w, r, page, Flash{Kind: "ok", Text: done})
}

// endpointTracePropagation serves POST /ui/endpoints/{id}/trace-propagation,
// as the portal's does.
func (u *Dashboard) endpointTracePropagation(w http.ResponseWriter, r *http.Request, s *dashboardSession) {
	id := url.PathEscape(r.PathValue("id"))
	body, done := tracePropagationSave(r)
	f := Flash{Kind: "ok", Text: done}
	if err := u.call(r.Context(), s, http.MethodPatch, "/v1/endpoints/"+id, body, nil); err != nil {
		f = Flash{Kind: "error", Text: "Not saved: " + callMessage(err)}
	}
	SetFlash(w, r, DashboardPath, f)
	http.Redirect(w, r, "/ui/endpoints/"+id, http.StatusSeeOther)
}
