package web

import (
	"errors"
	"net/http"
	"net/url"
	"strings"

	"github.com/heraldhooks/herald/internal/api"
	"github.com/heraldhooks/herald/internal/auth"
	"github.com/heraldhooks/herald/internal/wire"
)

// filterTestPage is the page a filter form's "Try" answers with: the
// filter tried, kept in the form to change and try again or save, and
// what it made of the consumer's last events (templates/filter-test.html,
// for the dashboard and the portal alike).
type filterTestPage struct {
	// Base is the face's prefix: /ui or /portal.
	Base     string
	Endpoint wire.Endpoint
	Filter   string
	Results  []wire.FilterTestResult
	Passed   int
	// Error is why the filter was refused (invalid_filter's message).
	Error string
}

// filterForm reads the filter form: the expression (a textarea's CRLF
// made LF, spaces around it dropped) and whether it is to be tried.
func filterForm(r *http.Request) (filter string, try bool) {
	filter = strings.TrimSpace(strings.ReplaceAll(r.PostFormValue("filter"), "\r\n", "\n"))
	return filter, r.PostFormValue("action") == "test"
}

// filterSave is the PATCH body that sets a filter ("" clears it).
func filterSave(filter string) (body wire.EndpointRequest, done string) {
	if filter == "" {
		return wire.EndpointRequest{Filter: &filter}, "Filter removed: every event of its types goes to this endpoint."
	}
	return wire.EndpointRequest{Filter: &filter}, "Filter saved: only the events it passes go to this endpoint."
}

// tryFilter fills d by POST /v1/endpoints/{id}/filter-test through call;
// a refused filter is d.Error, anything else the error returned.
func tryFilter(r *http.Request, call func(method, path string, body, out any) error, d *filterTestPage) error {
	id := url.PathEscape(r.PathValue("id"))
	if err := call(http.MethodGet, "/v1/endpoints/"+id, nil, &d.Endpoint); err != nil {
		return err
	}
	var res wire.FilterTestAnswer
	err := call(http.MethodPost, "/v1/endpoints/"+id+"/filter-test", wire.FilterTestRequest{Filter: &d.Filter}, &res)
	if isBadRequest(err) {
		d.Error = callMessage(err)
		return nil
	}
	if err != nil {
		return err
	}
	d.Results = res.Data
	for _, x := range res.Data {
		if x.Pass {
			d.Passed++
		}
	}
	return nil
}

// endpointFilter serves POST /portal/endpoints/{id}/filter: save the
// filter (PATCH /v1/endpoints/{id}), or try it on the consumer's last
// events and show what it makes of them.
func (p *Portal) endpointFilter(w http.ResponseWriter, r *http.Request, s *auth.Session) {
	id := url.PathEscape(r.PathValue("id"))
	page := "/portal/endpoints/" + id
	filter, try := filterForm(r)
	if try {
		d := filterTestPage{Base: "/portal", Filter: filter}
		call := func(method, path string, body, out any) error { return p.call(r.Context(), s, method, path, body, out) }
		if err := tryFilter(r, call, &d); err != nil {
			p.callFailed(w, r, s, err)
			return
		}
		p.render(w, r, s, http.StatusOK, "filter-test", "Filter of "+d.Endpoint.ID, "endpoints", d)
		return
	}
	body, done := filterSave(filter)
	if err := p.call(r.Context(), s, http.MethodPatch, "/v1/endpoints/"+id, body, nil); err != nil {
		p.failedAction(w, r, s, err, page, "Not saved: ")
		return
	}
	p.redirect(w, r, page, Flash{Kind: "ok", Text: done})
}

// endpointFilter serves POST /ui/endpoints/{id}/filter, as the portal's
// does.
func (u *Dashboard) endpointFilter(w http.ResponseWriter, r *http.Request, s *dashboardSession) {
	id := url.PathEscape(r.PathValue("id"))
	filter, try := filterForm(r)
	if try {
		d := filterTestPage{Base: "/ui", Filter: filter}
		call := func(method, path string, body, out any) error { return u.call(r.Context(), s, method, path, body, out) }
		if err := tryFilter(r, call, &d); err != nil {
			u.callFailed(w, r, s, err)
			return
		}
		u.render(w, r, s, http.StatusOK, "filter-test", "Filter of "+d.Endpoint.ID, "endpoints", d)
		return
	}
	body, done := filterSave(filter)
	f := Flash{Kind: "ok", Text: done}
	if err := u.call(r.Context(), s, http.MethodPatch, "/v1/endpoints/"+id, body, nil); err != nil {
		f = Flash{Kind: "error", Text: "Not saved: " + callMessage(err)}
	}
	SetFlash(w, r, DashboardPath, f)
	http.Redirect(w, r, "/ui/endpoints/"+id, http.StatusSeeOther)
}

// isBadRequest reports whether a /v1 call answered 400.
func isBadRequest(err error) bool {
	var ce *api.CallError
	return errors.As(err, &ce) && ce.Status == http.StatusBadRequest
}
