package web

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/heraldhooks/herald"
	"github.com/heraldhooks/herald/internal/auth"
	"github.com/heraldhooks/herald/internal/breaker"
	"github.com/heraldhooks/herald/internal/wire"
)

// The portal's endpoint pages: the consumer's endpoints, an endpoint's
// page (settings, a notice when it is failing or disabled, its signing
// secret on request, its newest deliveries, and its actions), and the
// forms to create, edit and delete one. Each reads and acts by a /v1 call
// as the consumer.

// Notice says why an endpoint is not taking deliveries as it should.
type Notice struct {
	// Kind is "error" (disabled, or its breaker open) or "warn" (failing).
	Kind  string
	Title string
	Lines []string
}

// endpointNotice is the notice an endpoint's state calls for, or nil when
// it is enabled and its last attempts succeeded. last, when not nil, is
// its newest delivery with a failed attempt, whose answer or error says
// what went wrong.
func endpointNotice(ep *wire.Endpoint, last *wire.Delivery) *Notice {
	h := ep.Health
	var n *Notice
	switch {
	case !ep.Enabled:
		n = &Notice{Kind: "error", Title: "This endpoint is disabled"}
		if ep.DisabledReason != "" {
			n.Lines = append(n.Lines, "Why: "+disabledWhy(ep)+".")
		}
		n.Lines = append(n.Lines, "New events do not reach it. Enable it once it answers again, then replay what went dead meanwhile.")
	case h.BreakerState == string(herald.BreakerOpen) || h.BreakerState == string(herald.BreakerHalfOpen):
		n = &Notice{Kind: "error", Title: "This endpoint is failing: Herald has paused deliveries to it"}
		line := fmt.Sprintf("%d attempts in a row failed", h.ConsecutiveFailures)
		if h.FailingSince != nil {
			line += ", since " + fmtTime(*h.FailingSince) + " UTC"
		}
		n.Lines = append(n.Lines, line+".")
		if h.BreakerState == string(herald.BreakerHalfOpen) {
			n.Lines = append(n.Lines, "A single test delivery is under way; if it succeeds, deliveries resume.")
		} else if h.ProbeAt != nil {
			n.Lines = append(n.Lines, "Deliveries wait (spending none of their attempts); Herald tries again at "+fmtTime(*h.ProbeAt)+" UTC, and resumes when that succeeds.")
		}
	case h.ConsecutiveFailures > 0:
		n = &Notice{Kind: "warn", Title: "This endpoint is failing"}
		line := fmt.Sprintf("The last %d attempts failed", h.ConsecutiveFailures)
		if h.ConsecutiveFailures == 1 {
			line = "The last attempt failed"
		}
		if h.FailingSince != nil {
			line += ", since " + fmtTime(*h.FailingSince) + " UTC"
		}
		n.Lines = append(n.Lines, line+"; Herald retries on its schedule.")
	default:
		return nil
	}
	if last != nil && (last.LastStatusCode != 0 || last.LastError != "") {
		what := last.LastError
		if last.LastStatusCode != 0 {
			what = fmt.Sprintf("HTTP %d %s", last.LastStatusCode, strings.TrimSpace(strings.TrimPrefix(last.LastError, fmt.Sprintf("HTTP %d", last.LastStatusCode))))
		}
		n.Lines = append(n.Lines, "Last failure: "+strings.TrimSpace(what)+" (delivery "+last.ID+").")
	} else if h.LastFailureAt != nil {
		n.Lines = append(n.Lines, "Last failure at "+fmtTime(*h.LastFailureAt)+" UTC.")
	}
	return n
}

// disabledWhy words a disabled reason Herald writes; the operator's own
// reasons are shown as given.
func disabledWhy(ep *wire.Endpoint) string {
	reason := ep.DisabledReason
	switch reason {
	case string(herald.DeadGone):
		return "it answered 410 Gone, which says the address is no more"
	case breaker.DisabledAutomatically:
		return fmt.Sprintf("Herald disabled it after it failed for too long (%d failures in a row, or no success for %s across at least %d failures)",
			ep.AutoDisableAfterFailures, ep.AutoDisableAfter, herald.AutoDisableMinFailures)
	}
	return reason
}

func fmtTime(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05") }

// endpointRow is an endpoint in the list, with its notice.
type endpointRow struct {
	wire.Endpoint
	Notice *Notice
}

type portalEndpointsData struct {
	Endpoints []endpointRow
	Pager     Pager
}

// endpoints serves GET /portal/: the consumer's endpoints, 50 a page,
// each with its state and a notice when it is failing or disabled.
func (p *Portal) endpoints(w http.ResponseWriter, r *http.Request, s *auth.Session) {
	v := url.Values{"limit": {"50"}}
	if c := r.URL.Query().Get("cursor"); c != "" {
		v.Set("cursor", c)
	}
	var list wire.List[wire.Endpoint]
	if err := p.call(r.Context(), s, http.MethodGet, "/v1/endpoints?"+v.Encode(), nil, &list); err != nil {
		p.callFailed(w, r, s, err)
		return
	}
	var d portalEndpointsData
	for _, ep := range list.Data {
		d.Endpoints = append(d.Endpoints, endpointRow{Endpoint: ep, Notice: endpointNotice(&ep, nil)})
	}
	d.Pager = NewPager(r.URL, list.NextCursor)
	p.render(w, r, s, http.StatusOK, "portal-endpoints", "Endpoints", "endpoints", d)
}

type portalEndpointData struct {
	Endpoint   wire.Endpoint
	Notice     *Notice
	Deliveries []wire.Delivery
	// Secret is shown when asked for (a POST), never otherwise.
	Secret string
	// Rotated: Secret is new, and the previous one signs until
	// Endpoint.PreviousSecretExpiresAt.
	Rotated bool
}

// endpoint serves GET /portal/endpoints/{id}.
func (p *Portal) endpoint(w http.ResponseWriter, r *http.Request, s *auth.Session) {
	p.showEndpoint(w, r, s, nil, "", false)
}

// showEndpoint answers an endpoint's page: ep when the caller has it (a
// rotation's answer), else GET /v1/endpoints/{id}; secret is shown when
// not empty.
func (p *Portal) showEndpoint(w http.ResponseWriter, r *http.Request, s *auth.Session, ep *wire.Endpoint, secret string, rotated bool) {
	id := url.PathEscape(r.PathValue("id"))
	d := portalEndpointData{Secret: secret, Rotated: rotated}
	if ep != nil {
		d.Endpoint = *ep
	} else if err := p.call(r.Context(), s, http.MethodGet, "/v1/endpoints/"+id, nil, &d.Endpoint); err != nil {
		p.callFailed(w, r, s, err)
		return
	}
	var list wire.List[wire.Delivery]
	v := url.Values{"endpoint_id": {d.Endpoint.ID}, "limit": {"20"}}
	if err := p.call(r.Context(), s, http.MethodGet, "/v1/deliveries?"+v.Encode(), nil, &list); err != nil {
		p.callFailed(w, r, s, err)
		return
	}
	d.Deliveries = list.Data
	var lastFailed *wire.Delivery
	for i := range list.Data {
		if dl := &list.Data[i]; dl.LastStatusCode != 0 && (dl.LastStatusCode < 200 || dl.LastStatusCode > 299) || dl.LastError != "" {
			lastFailed = dl
			break
		}
	}
	d.Notice = endpointNotice(&d.Endpoint, lastFailed)
	p.render(w, r, s, http.StatusOK, "portal-endpoint", "Endpoint "+d.Endpoint.ID, "endpoints", d)
}

// endpointSecret serves POST /portal/endpoints/{id}/secret: the page again,
// with the signing secret shown (a POST, so the secret is in no address,
// history entry or cookie).
func (p *Portal) endpointSecret(w http.ResponseWriter, r *http.Request, s *auth.Session) {
	var ep wire.Endpoint
	if err := p.call(r.Context(), s, http.MethodGet, "/v1/endpoints/"+url.PathEscape(r.PathValue("id")), nil, &ep); err != nil {
		p.callFailed(w, r, s, err)
		return
	}
	p.showEndpoint(w, r, s, &ep, signingKey(&ep), false)
}

// signingKey is what a receiver verifies with: the secret, or for ed25519
// the public key.
func signingKey(ep *wire.Endpoint) string {
	if ep.Secret != "" {
		return ep.Secret
	}
	return ep.PublicKey
}

// endpointRotate serves POST /portal/endpoints/{id}/rotate-secret: the API
// makes a new secret, shown on the page this answers; the previous one
// keeps signing beside it until previous_secret_expires_at (24 h).
func (p *Portal) endpointRotate(w http.ResponseWriter, r *http.Request, s *auth.Session) {
	id := r.PathValue("id")
	var ep wire.Endpoint
	if err := p.call(r.Context(), s, http.MethodPost, "/v1/endpoints/"+url.PathEscape(id)+"/rotate-secret", struct{}{}, &ep); err != nil {
		p.failedAction(w, r, s, err, "/portal/endpoints/"+url.PathEscape(id), "Not rotated: ")
		return
	}
	p.showEndpoint(w, r, s, &ep, signingKey(&ep), true)
}

// endpointTest serves POST /portal/endpoints/{id}/test: POST
// /v1/endpoints/{id}/test, then the new delivery's page.
func (p *Portal) endpointTest(w http.ResponseWriter, r *http.Request, s *auth.Session) {
	id := r.PathValue("id")
	var res wire.IngestResult
	if err := p.call(r.Context(), s, http.MethodPost, "/v1/endpoints/"+url.PathEscape(id)+"/test", struct{}{}, &res); err != nil {
		p.failedAction(w, r, s, err, "/portal/endpoints/"+url.PathEscape(id), "No test event sent: ")
		return
	}
	if len(res.Deliveries) != 1 {
		p.log.Error("a test event came back without its one delivery", "event_id", res.ID)
		p.message(w, r, s, http.StatusInternalServerError, "Try again", "The test event was not sent as it should have been. Try again shortly.")
		return
	}
	p.redirect(w, r, "/portal/deliveries/"+url.PathEscape(res.Deliveries[0].ID),
		Flash{Kind: "ok", Text: "Test event " + res.ID + " sent: this is its delivery. Reload to see its attempts."})
}

// endpointAction serves POST /portal/endpoints/{id}/<action> (enable,
// disable) by POST /v1/endpoints/{id}/<action>.
func (p *Portal) endpointAction(action, done string) portalHandler {
	return func(w http.ResponseWriter, r *http.Request, s *auth.Session) {
		page := "/portal/endpoints/" + url.PathEscape(r.PathValue("id"))
		if err := p.call(r.Context(), s, http.MethodPost, "/v1/endpoints/"+url.PathEscape(r.PathValue("id"))+"/"+action, struct{}{}, nil); err != nil {
			p.failedAction(w, r, s, err, page, "Not done: ")
			return
		}
		p.redirect(w, r, page, Flash{Kind: "ok", Text: done})
	}
}

// failedAction answers an action whose call failed: a 404 is the portal's
// 404 page (another consumer's id, or none), any other refusal goes back
// to page with the API's reason.
func (p *Portal) failedAction(w http.ResponseWriter, r *http.Request, s *auth.Session, err error, page, prefix string) {
	if !isRefusal(err) {
		p.callFailed(w, r, s, err)
		return
	}
	p.redirect(w, r, page, Flash{Kind: "error", Text: prefix + callMessage(err)})
}

// endpointForm is the create and edit form.
type endpointForm struct {
	// ID is empty on create.
	ID          string
	URL         string
	Description string
	// Types are the catalog's types, the operator's and Herald's own
	// apart, each ticked when the endpoint takes it.
	Types, BuiltIn []typeChoice
	// All: the endpoint takes every type ("*").
	All bool
	// Other holds the patterns that are not a catalog entry ("order.*").
	Other string
	// Filter is the endpoint's CEL filter ("" none).
	Filter string
	Error  string
}

type typeChoice struct {
	Name, Description string
	Checked           bool
}

// catalogForm fills f's choices from GET /v1/event-types, ticking those in
// chosen; the rest of chosen but "*" goes to f.Other.
func (p *Portal) catalogForm(r *http.Request, s *auth.Session, f *endpointForm, chosen []string) error {
	var list wire.List[wire.EventType]
	if err := p.call(r.Context(), s, http.MethodGet, "/v1/event-types?limit=1000", nil, &list); err != nil {
		return err
	}
	known := map[string]bool{}
	for _, t := range list.Data {
		c := typeChoice{Name: t.Name, Description: t.Description, Checked: slices.Contains(chosen, t.Name)}
		known[t.Name] = true
		if t.BuiltIn {
			f.BuiltIn = append(f.BuiltIn, c)
		} else {
			f.Types = append(f.Types, c)
		}
	}
	var other []string
	for _, c := range chosen {
		switch {
		case c == "*":
			f.All = true
		case !known[c]:
			other = append(other, c)
		}
	}
	if f.Other == "" {
		f.Other = strings.Join(other, ", ")
	}
	return nil
}

// endpointNew serves GET /portal/endpoints/new.
func (p *Portal) endpointNew(w http.ResponseWriter, r *http.Request, s *auth.Session) {
	var f endpointForm
	if err := p.catalogForm(r, s, &f, nil); err != nil {
		p.callFailed(w, r, s, err)
		return
	}
	p.render(w, r, s, http.StatusOK, "portal-endpoint-form", "New endpoint", "endpoints", f)
}

// endpointEdit serves GET /portal/endpoints/{id}/edit.
func (p *Portal) endpointEdit(w http.ResponseWriter, r *http.Request, s *auth.Session) {
	var ep wire.Endpoint
	if err := p.call(r.Context(), s, http.MethodGet, "/v1/endpoints/"+url.PathEscape(r.PathValue("id")), nil, &ep); err != nil {
		p.callFailed(w, r, s, err)
		return
	}
	f := endpointForm{ID: ep.ID, URL: ep.URL, Description: ep.Description}
	if ep.Filter != nil {
		f.Filter = *ep.Filter
	}
	if err := p.catalogForm(r, s, &f, ep.EventTypes); err != nil {
		p.callFailed(w, r, s, err)
		return
	}
	p.render(w, r, s, http.StatusOK, "portal-endpoint-form", "Edit endpoint "+ep.ID, "endpoints", f)
}

// formEndpoint reads the form's fields into a request body: the ticked
// types, "*" when "all" is ticked, and the other patterns (split at commas
// and spaces). No type at all leaves event_types out, which the API reads
// as every type on create.
func formEndpoint(r *http.Request) (wire.EndpointRequest, endpointForm) {
	f := endpointForm{
		URL:         strings.TrimSpace(r.PostFormValue("url")),
		Description: strings.TrimSpace(r.PostFormValue("description")),
		All:         r.PostFormValue("all_types") != "",
		Other:       strings.TrimSpace(r.PostFormValue("other_types")),
	}
	f.Filter, _ = filterForm(r)
	var types []string
	if f.All {
		types = append(types, "*")
	}
	for _, t := range r.PostForm["event_type"] {
		if t = strings.TrimSpace(t); t != "" && !slices.Contains(types, t) {
			types = append(types, t)
		}
	}
	for _, t := range strings.FieldsFunc(f.Other, func(c rune) bool { return c == ',' || c == ' ' || c == '\n' || c == '\r' || c == '\t' }) {
		if !slices.Contains(types, t) {
			types = append(types, t)
		}
	}
	req := wire.EndpointRequest{URL: &f.URL, Description: &f.Description, EventTypes: types, Filter: &f.Filter}
	return req, f
}

// endpointCreate serves POST /portal/endpoints: POST /v1/endpoints for the
// consumer; a refusal shows the form again, as filled, with the API's
// reason.
func (p *Portal) endpointCreate(w http.ResponseWriter, r *http.Request, s *auth.Session) {
	req, f := formEndpoint(r)
	var ep wire.Endpoint
	if err := p.call(r.Context(), s, http.MethodPost, "/v1/endpoints", req, &ep); err != nil {
		p.formFailed(w, r, s, err, f, req.EventTypes, "New endpoint")
		return
	}
	p.redirect(w, r, "/portal/endpoints/"+url.PathEscape(ep.ID),
		Flash{Kind: "ok", Text: "Endpoint created. Reveal its signing secret below to verify what it receives."})
}

// endpointUpdate serves POST /portal/endpoints/{id}: PATCH
// /v1/endpoints/{id} with the form's URL, description and event types.
func (p *Portal) endpointUpdate(w http.ResponseWriter, r *http.Request, s *auth.Session) {
	id := r.PathValue("id")
	req, f := formEndpoint(r)
	f.ID = id
	var body any = req
	if len(req.EventTypes) == 0 {
		// Nothing ticked: every type again (null is the default, "*").
		body = struct {
			wire.EndpointRequest
			EventTypes *[]string `json:"event_types"`
		}{req, nil}
	}
	if err := p.call(r.Context(), s, http.MethodPatch, "/v1/endpoints/"+url.PathEscape(id), body, nil); err != nil {
		p.formFailed(w, r, s, err, f, req.EventTypes, "Edit endpoint "+id)
		return
	}
	p.redirect(w, r, "/portal/endpoints/"+url.PathEscape(id), Flash{Kind: "ok", Text: "Saved."})
}

// formFailed shows the endpoint form again with the API's reason, or the
// page a 404 or a failure calls for.
func (p *Portal) formFailed(w http.ResponseWriter, r *http.Request, s *auth.Session, err error, f endpointForm, chosen []string, title string) {
	if !isRefusal(err) {
		p.callFailed(w, r, s, err)
		return
	}
	f.Error = callMessage(err)
	other := f.Other
	if cerr := p.catalogForm(r, s, &f, chosen); cerr != nil {
		p.callFailed(w, r, s, cerr)
		return
	}
	f.Other = other
	p.render(w, r, s, http.StatusBadRequest, "portal-endpoint-form", title, "endpoints", f)
}

// endpointDeleteForm serves GET /portal/endpoints/{id}/delete: a page that
// asks before deleting (it works without JavaScript).
func (p *Portal) endpointDeleteForm(w http.ResponseWriter, r *http.Request, s *auth.Session) {
	var ep wire.Endpoint
	if err := p.call(r.Context(), s, http.MethodGet, "/v1/endpoints/"+url.PathEscape(r.PathValue("id")), nil, &ep); err != nil {
		p.callFailed(w, r, s, err)
		return
	}
	p.render(w, r, s, http.StatusOK, "portal-endpoint-delete", "Delete endpoint "+ep.ID, "endpoints", ep)
}

// endpointDelete serves POST /portal/endpoints/{id}/delete: DELETE
// /v1/endpoints/{id}, then the list.
func (p *Portal) endpointDelete(w http.ResponseWriter, r *http.Request, s *auth.Session) {
	id := r.PathValue("id")
	if err := p.call(r.Context(), s, http.MethodDelete, "/v1/endpoints/"+url.PathEscape(id), nil, nil); err != nil {
		p.failedAction(w, r, s, err, "/portal/endpoints/"+url.PathEscape(id), "Not deleted: ")
		return
	}
	p.redirect(w, r, "/portal/", Flash{Kind: "ok", Text: "Endpoint " + id + " deleted."})
}
