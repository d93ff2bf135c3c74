// Package web serves Herald's pages: /portal/, the consumer portal entered
// through a one-time link (API.md, "Portal sessions"). Pages are rendered
// on the server with html/template, ask nothing of any other host, and are
// sent with a strict Content-Security-Policy. A request with a live portal
// session is a consumer Principal (internal/auth), the same one a consumer
// API key gives, so the portal's pages reach one consumer's data through
// the same scope seam as the API.
package web

import (
	"errors"
	"html/template"
	"log/slog"
	"net/http"
	"strings"

	"github.com/heraldhooks/herald/internal/auth"
	"github.com/heraldhooks/herald/internal/clock"
	"github.com/heraldhooks/herald/internal/logkey"
	"github.com/heraldhooks/herald/internal/store"
)

// PortalConfig wires the portal.
type PortalConfig struct {
	// Store keeps portal links and sessions; required.
	Store store.PortalSessionStore
	// Clock gives the time handed to the store. Default clock.Real.
	Clock clock.Clock
	// Logger hears of store failures. Default: discard.
	Logger *slog.Logger
}

// Portal is the /portal/ handler. Safe for concurrent use.
type Portal struct {
	sessions *auth.Sessions
	log      *slog.Logger
	mux      *http.ServeMux
}

// NewPortal returns the /portal/ handler: GET /portal/<token> opens a link,
// GET /portal/ is the signed-in page, POST /portal/session/end signs out.
func NewPortal(cfg PortalConfig) *Portal {
	p := &Portal{
		sessions: auth.NewSessions(auth.SessionsConfig{Store: cfg.Store, Clock: cfg.Clock}),
		log:      cfg.Logger,
		mux:      http.NewServeMux(),
	}
	if p.log == nil {
		p.log = slog.New(slog.DiscardHandler)
	}
	signedIn := func(h http.HandlerFunc) http.Handler { return p.sessions.Middleware(h, p.refuse) }
	p.mux.Handle("GET /portal/{$}", signedIn(p.home))
	p.mux.Handle("POST /portal/session/end", signedIn(p.signOut))
	p.mux.HandleFunc("GET /portal/{token}", p.open)
	p.mux.HandleFunc("/portal", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/portal/", http.StatusSeeOther)
	})
	p.mux.HandleFunc("/portal/", func(w http.ResponseWriter, r *http.Request) {
		p.page(w, http.StatusNotFound, "Not found", "There is no such page in the portal.")
	})
	return p
}

// ServeHTTP serves /portal and everything under it, with headers that keep
// the pages from being framed, cached or leaking their address (a link's
// token) in a Referer.
func (p *Portal) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-store")
	p.mux.ServeHTTP(w, r)
}

// open serves GET /portal/<token>: the link becomes a session (cookie set,
// 303 to /portal/) once (HEAD answers 200 and leaves the link as it is); a used or expired link answers 410 and an unknown
// one 404, each a page that says so, and never a session.
func (p *Portal) open(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodHead {
		// A HEAD (a link checker, a preview) must not spend the link.
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		return
	}
	token := r.PathValue("token")
	_, err := p.sessions.Open(w, r, token)
	switch {
	case err == nil:
		http.Redirect(w, r, "/portal/", http.StatusSeeOther)
	case errors.Is(err, store.ErrPortalLinkUsed):
		p.page(w, http.StatusGone, "Link already used",
			"This portal link was used already; a link opens once. Ask for a new link to sign in again.")
	case errors.Is(err, store.ErrPortalLinkExpired):
		p.page(w, http.StatusGone, "Link expired",
			"This portal link has expired. Ask for a new link to sign in.")
	case errors.Is(err, store.ErrNotFound):
		p.page(w, http.StatusNotFound, "Link not valid",
			"This portal link is not valid: it was revoked or never existed. Ask for a new link to sign in.")
	default:
		p.log.Error("could not open a portal link", logkey.Error, err)
		p.page(w, http.StatusInternalServerError, "Try again",
			"The portal could not open this link just now. Try again shortly.")
	}
}

// home serves GET /portal/: for now, who is signed in and a way out.
func (p *Portal) home(w http.ResponseWriter, r *http.Request) {
	sess, _ := auth.SessionFromContext(r.Context())
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	if err := homePage.Execute(w, sess); err != nil {
		p.log.Error("could not render the portal page", logkey.Error, err)
	}
}

// signOut serves POST /portal/session/end: the session ends and its cookie
// is cleared.
func (p *Portal) signOut(w http.ResponseWriter, r *http.Request) {
	sess, _ := auth.SessionFromContext(r.Context())
	if err := p.sessions.End(w, r, sess); err != nil {
		p.log.Error("could not end a portal session", logkey.Error, err)
		p.page(w, http.StatusInternalServerError, "Try again", "The portal could not sign you out just now. Try again shortly.")
		return
	}
	p.page(w, http.StatusOK, "Signed out", "You are signed out of the portal.")
}

// refuse answers a request the session middleware turned away.
func (p *Portal) refuse(w http.ResponseWriter, _ *http.Request, f auth.Refusal) {
	title := "Not allowed"
	if f.Status == http.StatusUnauthorized {
		title = "Not signed in"
	}
	p.page(w, f.Status, title, f.Reason)
}

// page answers a small page with a title and one sentence.
func (p *Portal) page(w http.ResponseWriter, status int, title, text string) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	if err := messagePage.Execute(w, struct{ Title, Text string }{title, text}); err != nil {
		p.log.Error("could not render a portal page", logkey.Error, err)
	}
}

const pageHead = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">`

var messagePage = template.Must(template.New("message").Parse(pageHead + `
<title>{{.Title}} · Herald portal</title></head>
<body><h1>{{.Title}}</h1><p>{{.Text}}</p></body></html>
`))

var homePage = template.Must(template.New("home").Parse(pageHead + `
<title>Herald portal</title></head>
<body><h1>Herald portal</h1>
<p>Signed in as consumer {{.ConsumerID}}.</p>
<form method="post" action="/portal/session/end">
<input type="hidden" name="` + auth.CSRFField + `" value="{{.CSRF}}">
<button type="submit">Sign out</button>
</form></body></html>
`))

// IsPortalPath reports whether the portal serves path.
func IsPortalPath(path string) bool { return path == "/portal" || strings.HasPrefix(path, "/portal/") }
