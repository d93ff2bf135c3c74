package web

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/heraldhooks/herald/internal/wire"
)

// overviewData is the overview page's.
type overviewData struct {
	// Stats are the queue's figures of now (GET /v1/stats?counts=false:
	// the due queue and the dead letters, not a count of every delivery).
	Stats wire.Stats
	// Recent sums the last minutes of the hour's series.
	Recent recent
	// Windows are the last hour and the last day, each with its charts
	// and its numbers.
	Windows []overviewWindow
}

// overviewWindow is one window's charts and their numbers.
type overviewWindow struct {
	ID, Title string
	Charts    []chart
	Rows      []seriesRow
}

// recentMinutes is how many of the last minutes the figures of now sum.
const recentMinutes = 5

// overview serves GET /ui/: the queue's figures of now, and the activity
// and the queue's depth (sampled once a minute) of the last hour and the
// last day, drawn as charts, all read from the database (GET
// /v1/stats?counts=false and GET /v1/stats/series), so every node shows
// the same. Its cost is the due queue, the dead letters and a day of
// minutes, never the history kept.
func (u *Dashboard) overview(w http.ResponseWriter, r *http.Request, s *dashboardSession) {
	var (
		d         overviewData
		hour, day wire.StatsSeries
	)
	for _, c := range []struct {
		path string
		out  any
	}{
		{"/v1/stats?counts=false", &d.Stats},
		{"/v1/stats/series?window=1h", &hour},
		{"/v1/stats/series?window=24h", &day},
	} {
		if err := u.call(r.Context(), s, http.MethodGet, c.path, nil, c.out); err != nil {
			u.callFailed(w, r, s, err)
			return
		}
	}
	d.Recent = recentOf(&hour, recentMinutes, time.Minute)
	d.Windows = []overviewWindow{
		{ID: "hour", Title: "Last hour, per minute", Charts: seriesCharts("hour", &hour), Rows: seriesRows(&hour)},
		{ID: "day", Title: "Last day, per 15 minutes", Charts: seriesCharts("day", &day), Rows: seriesRows(&day)},
	}
	u.render(w, r, s, http.StatusOK, "overview", "Overview", "overview", d)
}

// deadGroup is one endpoint's dead deliveries on a page of the queue.
type deadGroup struct {
	EndpointID string
	ConsumerID string
	Deliveries []wire.Delivery
}

type deadData struct {
	Consumer, Endpoint string
	Groups             []deadGroup
	Pager              Pager
}

// dead serves GET /ui/dead?consumer_id=&endpoint_id=: the dead-letter
// queue, newest first, grouped by endpoint, a page at a time.
func (u *Dashboard) dead(w http.ResponseWriter, r *http.Request, s *dashboardSession) {
	q := r.URL.Query()
	d := deadData{Consumer: strings.TrimSpace(q.Get("consumer_id")), Endpoint: strings.TrimSpace(q.Get("endpoint_id"))}
	v := url.Values{"status": {"dead"}, "limit": {"100"}}
	if d.Consumer != "" {
		v.Set("consumer_id", d.Consumer)
	}
	if d.Endpoint != "" {
		v.Set("endpoint_id", d.Endpoint)
	}
	if c := q.Get("cursor"); c != "" {
		v.Set("cursor", c)
	}
	var list wire.List[wire.Delivery]
	if err := u.call(r.Context(), s, http.MethodGet, "/v1/deliveries?"+v.Encode(), nil, &list); err != nil {
		u.callFailed(w, r, s, err)
		return
	}
	at := map[string]int{}
	for _, dl := range list.Data {
		i, ok := at[dl.EndpointID]
		if !ok {
			i = len(d.Groups)
			at[dl.EndpointID] = i
			d.Groups = append(d.Groups, deadGroup{EndpointID: dl.EndpointID, ConsumerID: dl.ConsumerID})
		}
		d.Groups[i].Deliveries = append(d.Groups[i].Deliveries, dl)
	}
	d.Pager = NewPager(r.URL, list.NextCursor)
	u.render(w, r, s, http.StatusOK, "dead", "Dead letters", "dead", d)
}

// deadReplaySelected serves POST /ui/dead/replay: each ticked delivery is
// replayed by POST /v1/deliveries/{id}/replay.
func (u *Dashboard) deadReplaySelected(w http.ResponseWriter, r *http.Request, s *dashboardSession) {
	ids := r.PostForm["delivery_id"]
	back := safeBack(r.PostFormValue("back"), "/ui/dead")
	if len(ids) == 0 {
		SetFlash(w, r, DashboardPath, Flash{Kind: "error", Text: "Tick the deliveries to replay first."})
		http.Redirect(w, r, back, http.StatusSeeOther)
		return
	}
	var done int
	var failed []string
	for _, id := range ids {
		if err := u.call(r.Context(), s, http.MethodPost, "/v1/deliveries/"+url.PathEscape(id)+"/replay", struct{}{}, nil); err != nil {
			failed = append(failed, id+": "+callMessage(err))
			continue
		}
		done++
	}
	f := Flash{Kind: "ok", Text: fmt.Sprintf("Replayed %d of %d deliveries.", done, len(ids))}
	if len(failed) > 0 {
		f = Flash{Kind: "error", Text: f.Text + " Not replayed: " + strings.Join(failed, "; ")}
	}
	SetFlash(w, r, DashboardPath, f)
	http.Redirect(w, r, back, http.StatusSeeOther)
}

// endpointReplay serves POST /ui/endpoints/{id}/replay: the endpoint's
// dead deliveries go back by POST /v1/endpoints/{id}/replay, or with
// dry_run only counted; rate (per second, optional) paces them.
func (u *Dashboard) endpointReplay(w http.ResponseWriter, r *http.Request, s *dashboardSession) {
	id := r.PathValue("id")
	back := safeBack(r.PostFormValue("back"), "/ui/dead?endpoint_id="+url.QueryEscape(id))
	dry := r.PostFormValue("dry_run") != ""
	status := "dead"
	body := wire.EndpointReplayRequest{Status: &status}
	body.DryRun = &dry
	if v := strings.TrimSpace(r.PostFormValue("rate")); v != "" {
		rate, err := strconv.ParseFloat(v, 64)
		if err != nil || rate <= 0 {
			SetFlash(w, r, DashboardPath, Flash{Kind: "error", Text: "The rate must be a number of deliveries per second above 0."})
			http.Redirect(w, r, back, http.StatusSeeOther)
			return
		}
		body.Rate = &rate
	}
	var res wire.ReplayResult
	if err := u.call(r.Context(), s, http.MethodPost, "/v1/endpoints/"+url.PathEscape(id)+"/replay", body, &res); err != nil {
		SetFlash(w, r, DashboardPath, Flash{Kind: "error", Text: "Not replayed: " + callMessage(err)})
		http.Redirect(w, r, back, http.StatusSeeOther)
		return
	}
	text := fmt.Sprintf("Replayed %d dead deliveries of endpoint %s.", res.Replayed, id)
	if dry {
		text = fmt.Sprintf("Dry run: %d dead deliveries of endpoint %s would be replayed.", res.Replayed, id)
	}
	SetFlash(w, r, DashboardPath, Flash{Kind: "ok", Text: text})
	http.Redirect(w, r, back, http.StatusSeeOther)
}

type deliveryData struct {
	Delivery wire.Delivery
	Attempts []wire.Attempt
	More     bool
}

// delivery serves GET /ui/deliveries/{id}: the delivery and its attempt
// log (the first 100 attempts).
func (u *Dashboard) delivery(w http.ResponseWriter, r *http.Request, s *dashboardSession) {
	id := url.PathEscape(r.PathValue("id"))
	var d deliveryData
	if err := u.call(r.Context(), s, http.MethodGet, "/v1/deliveries/"+id, nil, &d.Delivery); err != nil {
		u.callFailed(w, r, s, err)
		return
	}
	var attempts wire.List[wire.Attempt]
	if err := u.call(r.Context(), s, http.MethodGet, "/v1/deliveries/"+id+"/attempts?limit=100", nil, &attempts); err != nil {
		u.callFailed(w, r, s, err)
		return
	}
	d.Attempts, d.More = attempts.Data, attempts.NextCursor != ""
	u.render(w, r, s, http.StatusOK, "delivery", "Delivery "+d.Delivery.ID, "", d)
}

// deliveryAction serves POST /ui/deliveries/{id}/<action> by POST
// /v1/deliveries/{id}/<action>, then shows the delivery again.
func (u *Dashboard) deliveryAction(action, done string) dashboardHandler {
	return func(w http.ResponseWriter, r *http.Request, s *dashboardSession) {
		id := r.PathValue("id")
		page := "/ui/deliveries/" + url.PathEscape(id)
		f := Flash{Kind: "ok", Text: done}
		if err := u.call(r.Context(), s, http.MethodPost, "/v1/deliveries/"+url.PathEscape(id)+"/"+action, struct{}{}, nil); err != nil {
			f = Flash{Kind: "error", Text: "Not done: " + callMessage(err)}
		}
		SetFlash(w, r, DashboardPath, f)
		http.Redirect(w, r, page, http.StatusSeeOther)
	}
}

// safeBack returns back when it is a dashboard path, or def: a form's
// return address never leads off the dashboard.
func safeBack(back, def string) string {
	if strings.HasPrefix(back, "/ui/") && !strings.HasPrefix(back, "//") && !strings.Contains(back, "\\") {
		return back
	}
	return def
}
