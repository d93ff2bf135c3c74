package web

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/url"

	"github.com/heraldhooks/herald/internal/wire"
)

// The event type catalog as both halves list it: the dashboard's list
// (dashboard_eventtypes.go, with the form to add an entry) and the
// portal's read-only one (portal_eventtypes.go), 100 entries a page read
// by GET /v1/event-types.

// eventTypeRow is a catalog entry as the pages show it.
type eventTypeRow struct {
	wire.EventType
	// HasSchema and HasExample: the entry has one (an answer's null is none).
	HasSchema, HasExample bool
}

func newEventTypeRow(t wire.EventType) eventTypeRow {
	return eventTypeRow{EventType: t, HasSchema: hasJSON(t.Schema), HasExample: hasJSON(t.Example)}
}

// hasJSON reports whether raw holds a value other than null.
func hasJSON(raw json.RawMessage) bool {
	t := bytes.TrimSpace(raw)
	return len(t) > 0 && !bytes.Equal(t, []byte("null"))
}

type eventTypesData struct {
	Types []eventTypeRow
	Pager Pager
	// Form is the form to add an entry (dashboard only).
	Form eventTypeForm
}

// listEventTypes reads a page of the catalog, 100 entries from r's cursor.
func listEventTypes(r *http.Request, call func(path string, out any) error) (eventTypesData, error) {
	v := url.Values{"limit": {"100"}}
	if c := r.URL.Query().Get("cursor"); c != "" {
		v.Set("cursor", c)
	}
	var list wire.List[wire.EventType]
	if err := call("/v1/event-types?"+v.Encode(), &list); err != nil {
		return eventTypesData{}, err
	}
	d := eventTypesData{Pager: NewPager(r.URL, list.NextCursor)}
	for _, t := range list.Data {
		d.Types = append(d.Types, newEventTypeRow(t))
	}
	return d, nil
}
