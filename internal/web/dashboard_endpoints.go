package web

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/heraldhooks/herald/internal/store"
	"github.com/heraldhooks/herald/internal/wire"
)

// The endpoints pages: a keyset-paged table filtered by consumer, and an
// endpoint's page with its settings, health, recent deliveries and
// actions, each action a /v1 call.

type endpointsData struct {
	Consumer  string
	Sort      store.EndpointSort
	Endpoints []dashboardEndpointRow
	// Columns are the sortable columns' headers, by key.
	Columns map[string]sortColumn
	Pager   Pager
}

// dashboardEndpointRow is an endpoint with its figures as the pages show them.
type dashboardEndpointRow struct {
	wire.Endpoint
	// Score is the health score ("—" without one) and ScoreClass its
	// colour: ok, warn, bad or muted (herald.HealthScore says what the
	// score is; the bands are the page's).
	Score, ScoreClass string
	// Rate is the last hour's success rate, "—" without attempts.
	Rate string
	// InFlight, Due and Dead are counts, "1,000+" at store.FigureLimit,
	// "—" where the answer has none.
	InFlight, Due, Dead string
	// HasDead: the endpoint has dead deliveries to look at.
	HasDead bool
}

// Score bands: from scoreGood up is shown as healthy (ok), from scoreFair
// up as worrying (warn), anything lower as failing (bad).
const (
	scoreGood = 95
	scoreFair = 80
)

// newDashboardEndpointRow shows ep's health figures, which its answer carries when
// it comes from GET /v1/endpoints/{id} or a list with include=health.
func newDashboardEndpointRow(ep wire.Endpoint) dashboardEndpointRow {
	row := dashboardEndpointRow{Endpoint: ep, Score: "—", ScoreClass: "muted", Rate: "—"}
	h := ep.Health
	if h.Score != nil {
		row.Score = strconv.Itoa(*h.Score)
		switch {
		case *h.Score >= scoreGood:
			row.ScoreClass = "ok"
		case *h.Score >= scoreFair:
			row.ScoreClass = "warn"
		default:
			row.ScoreClass = "bad"
		}
	}
	if h.SuccessRate1h != nil {
		row.Rate = fmt.Sprintf("%.1f%%", *h.SuccessRate1h*100)
	}
	row.InFlight, row.Due, row.Dead = count(h.InFlight), count(h.Due), count(h.Dead)
	row.HasDead = h.Dead != nil && *h.Dead > 0
	return row
}

// count shows a figure counted up to store.FigureLimit.
func count(n *int) string {
	switch {
	case n == nil:
		return "—"
	case *n >= store.FigureLimit:
		return fmt.Sprintf("%d,%03d+", store.FigureLimit/1000, store.FigureLimit%1000)
	}
	return strconv.Itoa(*n)
}

// sortColumn is the header of a sortable column: a link that sorts by it
// (or, when the table is sorted by it already, the other way where there
// is one), and how the table is sorted by it now ("ascending",
// "descending", "other" for an order that is not the column's values', or
// "").
type sortColumn struct {
	Href, Order string
}

// endpointSortColumns are the columns the endpoints table sorts by, each
// with its first direction, and what the column's order is when the table
// is sorted by it (when it is not simply the column's values ascending or
// descending). Consumer, URL and created are an index's order; health,
// due and dead put the endpoints that need attention first
// (store.EndpointSort): health worst first (and back), due the longest
// waiting first, dead the most first, none of them the other way.
var endpointSortColumns = []struct {
	key   string
	first store.EndpointSort
	order string
}{
	{"consumer", store.EndpointSortConsumer, ""},
	{"url", store.EndpointSortURL, ""},
	{"health", store.EndpointSortHealth, ""},
	{"due", store.EndpointSortDue, "other"},
	{"dead", store.EndpointSortDead, ""},
	{"created", store.EndpointSortNewest, ""},
}

// sortColumns are the headers of the table sorted by cur, each link
// keeping the consumer filter and starting at the first page.
func sortColumns(consumer string, cur store.EndpointSort) map[string]sortColumn {
	curKey, curDesc := cur.Key()
	out := map[string]sortColumn{}
	for _, c := range endpointSortColumns {
		next := c.first
		var order string
		if c.key == curKey {
			order = "ascending"
			reverse := store.EndpointSort("-" + c.key)
			if curDesc {
				order = "descending"
				reverse = store.EndpointSort(c.key)
			}
			if c.order != "" {
				order = c.order
			}
			if reverse.Valid() {
				next = reverse
			}
		}
		q := url.Values{}
		if consumer != "" {
			q.Set("consumer_id", consumer)
		}
		if next != store.EndpointSortNewest {
			q.Set("sort", string(next))
		}
		out[c.key] = sortColumn{Href: withQuery("/ui/endpoints", q), Order: order}
	}
	return out
}

// endpoints serves GET /ui/endpoints?consumer_id=&sort=&cursor=: GET
// /v1/endpoints?include=health, 50 a page in the order sort names (newest
// first by default), each row with its health score, breaker, the last
// hour's success rate, and its deliveries in flight, due and dead. A page
// costs one range of an endpoints index (or, sorted by health, due or
// dead, what needs attention: store.EndpointSort) and, for the 50
// endpoints on it, a bounded look at each one's attempts and queue
// (store.EndpointFigures): the same with 10 or 100,000 endpoints, and
// whatever the history kept.
func (u *Dashboard) endpoints(w http.ResponseWriter, r *http.Request, s *dashboardSession) {
	q := r.URL.Query()
	d := endpointsData{Consumer: strings.TrimSpace(q.Get("consumer_id")), Sort: store.EndpointSort(q.Get("sort"))}
	if d.Sort == "" || !d.Sort.Valid() {
		d.Sort = store.EndpointSortNewest
	}
	v := url.Values{"limit": {"50"}, "include": {"health"}, "sort": {string(d.Sort)}}
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
	for _, ep := range list.Data {
		d.Endpoints = append(d.Endpoints, newDashboardEndpointRow(ep))
	}
	d.Columns = sortColumns(d.Consumer, d.Sort)
	d.Pager = NewPager(r.URL, list.NextCursor)
	u.render(w, r, s, http.StatusOK, "endpoints", "Endpoints", "endpoints", d)
}

type endpointData struct {
	Endpoint   wire.Endpoint
	Row        dashboardEndpointRow
	Deliveries []wire.Delivery
	Secret     string
	// Egress is the proxy webhooks leave through, "" when direct.
	Egress string
}

// endpoint serves GET /ui/endpoints/{id}: the endpoint (its health with
// its score, the last hour's success rate and its queue, as a row of the
// table shows them) and its 20 newest deliveries.
func (u *Dashboard) endpoint(w http.ResponseWriter, r *http.Request, s *dashboardSession) {
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
	d.Row = newDashboardEndpointRow(d.Endpoint)
	d.Egress = u.egress
	u.render(w, r, s, http.StatusOK, "endpoint", "Endpoint "+d.Endpoint.ID, "endpoints", d)
}

// endpointAction serves POST /ui/endpoints/{id}/<action> (enable,
// disable) by POST /v1/endpoints/{id}/<action>.
func (u *Dashboard) endpointAction(action, done string) dashboardHandler {
	return func(w http.ResponseWriter, r *http.Request, s *dashboardSession) {
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
		SetFlash(w, r, DashboardPath, f)
		http.Redirect(w, r, "/ui/endpoints/"+url.PathEscape(id), http.StatusSeeOther)
	}
}

// endpointRotate serves POST /ui/endpoints/{id}/rotate-secret: a new
// secret is made by the API and shown once, on the page this answers (not
// through a redirect, so it is never kept in a cookie).
func (u *Dashboard) endpointRotate(w http.ResponseWriter, r *http.Request, s *dashboardSession) {
	id := url.PathEscape(r.PathValue("id"))
	var d endpointData
	if err := u.call(r.Context(), s, http.MethodPost, "/v1/endpoints/"+id+"/rotate-secret", struct{}{}, &d.Endpoint); err != nil {
		SetFlash(w, r, DashboardPath, Flash{Kind: "error", Text: "Not rotated: " + callMessage(err)})
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
	d.Row = newDashboardEndpointRow(d.Endpoint)
	d.Egress = u.egress
	u.render(w, r, s, http.StatusOK, "endpoint", "Endpoint "+d.Endpoint.ID, "endpoints", d)
}
