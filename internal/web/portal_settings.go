package web

import (
	"net/http"
	"net/url"
	"strings"

	"github.com/heraldhooks/herald/internal/auth"
	"github.com/heraldhooks/herald/internal/wire"
)

// settingsRoutes serves the consumer's settings page: the address Herald
// mails when an endpoint of theirs is failing or disabled, or a delivery
// dies (GET and PUT /v1/consumers/{consumer_id}/notifications, as the
// signed-in consumer).
func (p *Portal) settingsRoutes() {
	p.mux.Handle("GET /portal/settings", p.signedIn(p.settings))
	p.mux.Handle("POST /portal/settings", p.signedIn(p.settingsSave))
}

// settingsPage is what templates/portal_settings.html shows.
type settingsPage struct {
	Email     string
	UpdatedAt string
	// Error is the API's reason a save was refused; Email then holds what
	// was typed.
	Error string
}

// notificationsPath is the /v1 path of s's consumer's settings.
func notificationsPath(s *auth.Session) string {
	return "/v1/consumers/" + url.PathEscape(s.ConsumerID) + "/notifications"
}

// settings serves GET /portal/settings.
func (p *Portal) settings(w http.ResponseWriter, r *http.Request, s *auth.Session) {
	var cn wire.ConsumerNotifications
	if err := p.call(r.Context(), s, http.MethodGet, notificationsPath(s), nil, &cn); err != nil {
		p.callFailed(w, r, s, err)
		return
	}
	pg := settingsPage{}
	if cn.Email != nil {
		pg.Email = *cn.Email
	}
	if cn.UpdatedAt != nil {
		pg.UpdatedAt = cn.UpdatedAt.UTC().Format("2006-01-02 15:04 UTC")
	}
	p.render(w, r, s, http.StatusOK, "portal_settings", "Settings", "settings", pg)
}

// settingsSave serves POST /portal/settings: the form's address (empty
// clears it) goes to PUT /v1/consumers/{consumer_id}/notifications; a
// refused address shows the form again with the API's reason.
func (p *Portal) settingsSave(w http.ResponseWriter, r *http.Request, s *auth.Session) {
	email := strings.TrimSpace(r.PostFormValue("email"))
	if err := p.call(r.Context(), s, http.MethodPut, notificationsPath(s), wire.ConsumerNotificationsRequest{Email: &email}, nil); err != nil {
		if !isRefusal(err) {
			p.callFailed(w, r, s, err)
			return
		}
		p.render(w, r, s, http.StatusBadRequest, "portal_settings", "Settings", "settings",
			settingsPage{Email: email, Error: callMessage(err)})
		return
	}
	text := "Saved: notices about your endpoints go to " + email + "."
	if email == "" {
		text = "Saved: no notices will be mailed."
	}
	p.redirect(w, r, "/portal/settings", Flash{Kind: "ok", Text: text})
}
