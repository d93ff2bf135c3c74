package web

import (
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/heraldhooks/herald/internal/wire"
)

// The events pages: a search by id, type, consumer and time range, and an
// event's page with its payload pretty-printed and its deliveries.

type eventsData struct {
	ID, Type, Consumer, Since, Until string
	Error                            string
	Events                           []wire.Event
	Pager                            Pager
}

// timeField is the layout of a datetime-local field, read as UTC.
const timeField = "2006-01-02T15:04"

// events serves GET /ui/events?id=&event_type=&consumer_id=&since=&until=:
// an id goes straight to its event; the rest is GET /v1/events, 50 a page.
func (u *Dashboard) events(w http.ResponseWriter, r *http.Request, s *dashboardSession) {
	q := r.URL.Query()
	d := eventsData{
		ID: strings.TrimSpace(q.Get("id")), Type: strings.TrimSpace(q.Get("event_type")),
		Consumer: strings.TrimSpace(q.Get("consumer_id")),
		Since:    strings.TrimSpace(q.Get("since")), Until: strings.TrimSpace(q.Get("until")),
	}
	if d.ID != "" {
		http.Redirect(w, r, "/ui/events/"+url.PathEscape(d.ID), http.StatusSeeOther)
		return
	}
	v := url.Values{"limit": {"50"}}
	for name, val := range map[string]string{"event_type": d.Type, "consumer_id": d.Consumer} {
		if val != "" {
			v.Set(name, val)
		}
	}
	for name, val := range map[string]string{"since": d.Since, "until": d.Until} {
		if val == "" {
			continue
		}
		t, err := time.Parse(timeField, val)
		if err != nil {
			if t, err = time.Parse(time.RFC3339, val); err != nil {
				d.Error = "The times must be dates and times, such as 2026-03-01T12:00 (UTC)."
				u.render(w, r, s, http.StatusBadRequest, "events", "Events", "events", d)
				return
			}
		}
		v.Set(name, t.UTC().Format(time.RFC3339))
	}
	if c := q.Get("cursor"); c != "" {
		v.Set("cursor", c)
	}
	var list wire.List[wire.Event]
	if err := u.call(r.Context(), s, http.MethodGet, "/v1/events?"+v.Encode(), nil, &list); err != nil {
		d.Error = callMessage(err)
		u.render(w, r, s, http.StatusBadRequest, "events", "Events", "events", d)
		return
	}
	d.Events = list.Data
	d.Pager = NewPager(r.URL, list.NextCursor)
	u.render(w, r, s, http.StatusOK, "events", "Events", "events", d)
}

// event serves GET /ui/events/{id}: GET /v1/events/{id}, payload and
// deliveries.
func (u *Dashboard) event(w http.ResponseWriter, r *http.Request, s *dashboardSession) {
	var ev wire.Event
	if err := u.call(r.Context(), s, http.MethodGet, "/v1/events/"+url.PathEscape(r.PathValue("id")), nil, &ev); err != nil {
		u.callFailed(w, r, s, err)
		return
	}
	u.render(w, r, s, http.StatusOK, "event", "Event "+ev.ID, "events", ev)
}
