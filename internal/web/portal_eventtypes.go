package web

import (
	"net/http"

	"github.com/heraldhooks/herald/internal/auth"
)

// The portal's event type catalog page: read-only, it tells a consumer
// what each type carries.

// eventTypes serves GET /portal/event-types?cursor=: the catalog,
// read-only, 100 a page, each type with its description, example and
// schema: what a receiver of it is sent.
func (p *Portal) eventTypes(w http.ResponseWriter, r *http.Request, s *auth.Session) {
	d, err := listEventTypes(r, func(path string, out any) error {
		return p.call(r.Context(), s, http.MethodGet, path, nil, out)
	})
	if err != nil {
		p.callFailed(w, r, s, err)
		return
	}
	p.render(w, r, s, http.StatusOK, "portal-eventtypes", "Event types", "eventtypes", d)
}
