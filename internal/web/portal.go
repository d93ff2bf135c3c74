// Package web serves Herald's pages: /ui/, the operator dashboard, and
// /portal/, the consumer portal entered through a one-time link (API.md,
// "Portal sessions"). Pages are rendered on the server with html/template,
// ask nothing of any other host, and are sent with a strict
// Content-Security-Policy. A request with a live portal session is a
// consumer Principal (internal/auth), the same one a consumer API key
// gives, and every page reads and acts through /v1 calls made as that
// principal (api.Server.Call), so the portal reaches one consumer's data
// through the same scope seam as the API: another consumer's endpoint,
// event or delivery answers the portal's 404 page, as the API answers 404.
// Both halves read every request through limitForms: a form of at most
// 64 KiB, parsed before any route sees it, and never a multipart body.
package web

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"strings"

	"github.com/heraldhooks/herald/internal/api"
	"github.com/heraldhooks/herald/internal/auth"
	"github.com/heraldhooks/herald/internal/clock"
	"github.com/heraldhooks/herald/internal/logkey"
	"github.com/heraldhooks/herald/internal/store"
)

// PortalPath is the portal's root and its cookies' path.
const PortalPath = auth.SessionPath

// PortalConfig wires the portal.
type PortalConfig struct {
	// Store keeps portal links and sessions; required.
	Store store.PortalSessionStore
	// API answers the /v1 calls the pages make; required.
	API *api.Server
	// Assets and Layout render the pages. Default: new ones.
	Assets *Assets
	Layout *Layout
	// Clock gives the time handed to the store. Default clock.Real.
	Clock clock.Clock
	// Logger hears of failures. Default: discard.
	Logger *slog.Logger
	// FrameAncestors are the origins (https://app.example.com) that may
	// show the portal in a frame (--portal-frame-ancestors). Empty: no
	// site may frame it (frame-ancestors 'none').
	FrameAncestors []string
}

// Portal is the /portal/ handler. Safe for concurrent use.
type Portal struct {
	api       *api.Server
	sessions  *auth.Sessions
	layout    *Layout
	log       *slog.Logger
	ancestors string
	mux       *http.ServeMux
	// handler is mux behind limitForms.
	handler http.Handler
}

// NewPortal returns the /portal/ handler: GET /portal/<token> shows a
// link's page, whose button (POST /portal/<token>) opens it;
// the signed-in pages are the consumer's endpoints (/portal/, the home),
// an endpoint's page and its forms, the message log
// (/portal/deliveries), a delivery's and an event's page, the event type
// catalog (/portal/event-types), the settings (/portal/settings); POST
// /portal/session/end signs out. /portal/confirm, the page a mailed
// confirmation link opens, needs no session.
func NewPortal(cfg PortalConfig) *Portal {
	p := &Portal{
		api: cfg.API,
		sessions: auth.NewSessions(auth.SessionsConfig{
			Store: cfg.Store, Clock: cfg.Clock, Framed: len(cfg.FrameAncestors) > 0,
		}),
		layout:    cfg.Layout,
		log:       cfg.Logger,
		ancestors: strings.Join(cfg.FrameAncestors, " "),
		mux:       http.NewServeMux(),
	}
	if p.log == nil {
		p.log = slog.New(slog.DiscardHandler)
	}
	if p.layout == nil {
		assets := cfg.Assets
		if assets == nil {
			assets = NewAssets()
		}
		p.layout = NewLayout(assets, p.log)
	}
	p.routes()
	p.handler = limitForms(p.mux, func(w http.ResponseWriter, r *http.Request, status int, title, text string) {
		p.message(w, r, nil, status, title, text)
	})
	return p
}

// routes is the portal's route table: every path it serves, mounted on
// its mux. A link's page and its button (GET and POST /portal/<token>)
// and the confirmation page a mailed link opens (/portal/confirm) need no
// session; every other page needs one and reads and acts through /v1
// calls made as the consumer.
func (p *Portal) routes() {
	p.mux.Handle("GET /portal/{$}", p.signedIn(p.endpoints))
	p.mux.Handle("POST /portal/session/end", p.signedIn(p.signOut))
	p.mux.Handle("GET /portal/endpoints", p.signedIn(func(w http.ResponseWriter, r *http.Request, _ *auth.Session) {
		http.Redirect(w, r, "/portal/", http.StatusSeeOther)
	}))
	p.mux.Handle("GET /portal/endpoints/new", p.signedIn(p.endpointNew))
	p.mux.Handle("POST /portal/endpoints", p.signedIn(p.endpointCreate))
	p.mux.Handle("GET /portal/endpoints/{id}", p.signedIn(p.endpoint))
	p.mux.Handle("GET /portal/endpoints/{id}/edit", p.signedIn(p.endpointEdit))
	p.mux.Handle("POST /portal/endpoints/{id}", p.signedIn(p.endpointUpdate))
	p.mux.Handle("GET /portal/endpoints/{id}/delete", p.signedIn(p.endpointDeleteForm))
	p.mux.Handle("POST /portal/endpoints/{id}/delete", p.signedIn(p.endpointDelete))
	p.mux.Handle("POST /portal/endpoints/{id}/enable", p.signedIn(p.endpointAction("enable", "Enabled: new events reach it again. Deliveries that went dead meanwhile can be replayed from the message log.")))
	p.mux.Handle("POST /portal/endpoints/{id}/disable", p.signedIn(p.endpointAction("disable", "Disabled: new events no longer reach it, and its pending deliveries went dead.")))
	p.mux.Handle("POST /portal/endpoints/{id}/secret", p.signedIn(p.endpointSecret))
	p.mux.Handle("POST /portal/endpoints/{id}/rotate-secret", p.signedIn(p.endpointRotate))
	p.mux.Handle("POST /portal/endpoints/{id}/test", p.signedIn(p.endpointTest))
	p.mux.Handle("POST /portal/endpoints/{id}/client-certificate", p.signedIn(p.endpointClientCert))
	p.mux.Handle("POST /portal/endpoints/{id}/filter", p.signedIn(p.endpointFilter))
	p.mux.Handle("POST /portal/endpoints/{id}/trace-propagation", p.signedIn(p.endpointTracePropagation))
	p.mux.Handle("GET /portal/deliveries", p.signedIn(p.deliveries))
	p.mux.Handle("GET /portal/deliveries/{id}", p.signedIn(p.delivery))
	p.mux.Handle("POST /portal/deliveries/{id}/replay", p.signedIn(p.deliveryReplay))
	p.mux.Handle("GET /portal/events/{id}", p.signedIn(p.event))
	// The settings: the address Herald mails when an endpoint of the
	// consumer's is failing or disabled, or a delivery dies (GET and PUT
	// /v1/consumers/{consumer_id}/notifications), where its confirmation
	// stands, and a way to mail the confirmation link again.
	p.mux.Handle("GET /portal/settings", p.signedIn(p.settings))
	p.mux.Handle("POST /portal/settings", p.signedIn(p.settingsSave))
	p.mux.Handle("POST /portal/settings/resend", p.signedIn(p.settingsResend))
	p.mux.HandleFunc("GET /portal/confirm", p.confirmPage)
	p.mux.HandleFunc("POST /portal/confirm", p.confirmPost)
	p.mux.Handle("GET /portal/event-types", p.signedIn(p.eventTypes))
	p.mux.HandleFunc("GET /portal/{token}", p.open)
	p.mux.HandleFunc("POST /portal/{token}", p.openPost)
	p.mux.HandleFunc("/portal", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/portal/", http.StatusSeeOther)
	})
	p.mux.Handle("/portal/", p.signedIn(func(w http.ResponseWriter, r *http.Request, s *auth.Session) {
		p.message(w, r, s, http.StatusNotFound, "Not found", "There is no such page in the portal.")
	}))
}

// ServeHTTP serves /portal and everything under it, every form held to
// limitForms's limits before any route sees it.
func (p *Portal) ServeHTTP(w http.ResponseWriter, r *http.Request) { p.handler.ServeHTTP(w, r) }

// IsPortalPath reports whether the portal serves path.
func IsPortalPath(path string) bool {
	return path == PortalPath || strings.HasPrefix(path, PortalPath+"/")
}

// portalHandler serves a signed-in request.
type portalHandler func(w http.ResponseWriter, r *http.Request, s *auth.Session)

// signedIn serves h only with a live session (and, for a request that
// changes state, its CSRF token from this site: auth.Sessions.Middleware).
func (p *Portal) signedIn(h portalHandler) http.Handler {
	return p.sessions.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s, _ := auth.SessionFromContext(r.Context())
		h(w, r, s)
	}), p.refuse)
}

// openPage is what templates/portal_open.html shows.
type openPage struct {
	// Action is the link's own path, which the button posts to.
	Action string
	// CSRF is the form's token, made from the link token (there is no
	// session yet): auth.LinkCSRFToken.
	CSRF string
}

// open serves GET /portal/<token> (and HEAD): a page whose button opens
// the session. The GET reads nothing and spends nothing: a mail scanner,
// a link checker or a chat preview that fetches the link leaves it as it
// was, and no cookie is set. See auth.CheckLinkOpen for why the button's
// POST, not a token in the page, is what stops another consumer from
// signing a victim's browser in to its own portal.
func (p *Portal) open(w http.ResponseWriter, r *http.Request) {
	token := r.PathValue("token")
	if r.Method == http.MethodHead {
		SetFramedPageHeaders(w.Header(), p.ancestors)
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		return
	}
	p.render(w, r, nil, http.StatusOK, "portal_open", "Open the portal", "",
		openPage{Action: "/portal/" + url.PathEscape(token), CSRF: auth.LinkCSRFToken(token)})
}

// openPost serves POST /portal/<token>, the page's button: when the post
// comes from this site's page of this link (auth.CheckLinkOpen), the link
// becomes a session (cookie set, 303 to /portal/) once; a used or expired
// link answers 410 and an unknown one 404, each a page that says so, and
// never a session.
func (p *Portal) openPost(w http.ResponseWriter, r *http.Request) {
	token := r.PathValue("token")
	if reason := auth.CheckLinkOpen(r, token); reason != "" {
		p.message(w, r, nil, http.StatusForbidden, "Not opened", reason)
		return
	}
	_, err := p.sessions.Open(w, r, token)
	switch {
	case err == nil:
		SetFramedPageHeaders(w.Header(), p.ancestors)
		http.Redirect(w, r, "/portal/", http.StatusSeeOther)
	case errors.Is(err, store.ErrPortalLinkUsed):
		p.message(w, r, nil, http.StatusGone, "Link already used",
			"This portal link was used already; a link opens once. Ask for a new link to sign in again.")
	case errors.Is(err, store.ErrPortalLinkExpired):
		p.message(w, r, nil, http.StatusGone, "Link expired",
			"This portal link has expired. Ask for a new link to sign in.")
	case errors.Is(err, store.ErrNotFound):
		p.message(w, r, nil, http.StatusNotFound, "Link not valid",
			"This portal link is not valid: it was revoked or never existed. Ask for a new link to sign in.")
	default:
		p.log.Error("could not open a portal link", logkey.Error, err)
		p.message(w, r, nil, http.StatusInternalServerError, "Try again",
			"The portal could not open this link just now. Try again shortly.")
	}
}

// signOut serves POST /portal/session/end: the session ends and its cookie
// is cleared.
func (p *Portal) signOut(w http.ResponseWriter, r *http.Request, s *auth.Session) {
	if err := p.sessions.End(w, r, s); err != nil {
		p.log.Error("could not end a portal session", logkey.Error, err)
		p.message(w, r, s, http.StatusInternalServerError, "Try again", "The portal could not sign you out just now. Try again shortly.")
		return
	}
	p.message(w, r, nil, http.StatusOK, "Signed out", "You are signed out of the portal.")
}

// refuse answers a request the session middleware turned away.
func (p *Portal) refuse(w http.ResponseWriter, r *http.Request, f auth.Refusal) {
	title := "Not allowed"
	if f.Status == http.StatusUnauthorized {
		title = "Not signed in"
	}
	p.message(w, r, nil, f.Status, title, f.Reason)
}

// portalNav is the portal's navigation: the consumer's own things only.
var portalNav = []NavItem{
	{Key: "endpoints", Label: "Endpoints", Href: "/portal/"},
	{Key: "log", Label: "Message log", Href: "/portal/deliveries"},
	{Key: "eventtypes", Label: "Event types", Href: "/portal/event-types"},
	{Key: "settings", Label: "Settings", Href: "/portal/settings"},
}

// render answers a portal page; s is nil when no one is signed in.
func (p *Portal) render(w http.ResponseWriter, r *http.Request, s *auth.Session, status int, page, title, current string, data any) {
	pg := &Page{Site: "Webhooks portal", Home: "/portal/", Title: title, Current: current, Data: data,
		Class: "portal", FrameAncestors: p.ancestors, Flash: takeFlash(w, r, PortalPath, p.sessions.AdjustCookie)}
	if s != nil {
		pg.Nav = portalNav
		pg.SignedInAs = "Signed in as consumer " + s.ConsumerID
		pg.SignOut = "/portal/session/end"
		pg.CSRF = s.CSRF
	}
	p.layout.Render(w, status, page, pg)
}

// message answers a page with a title and a sentence.
func (p *Portal) message(w http.ResponseWriter, r *http.Request, s *auth.Session, status int, title, text string) {
	p.render(w, r, s, status, "message", title, "", text)
}

// flash keeps f for the next page.
func (p *Portal) flash(w http.ResponseWriter, r *http.Request, f Flash) {
	setFlash(w, r, PortalPath, f, p.sessions.AdjustCookie)
}

// redirect keeps f for the page at to and sends the browser there.
func (p *Portal) redirect(w http.ResponseWriter, r *http.Request, to string, f Flash) {
	p.flash(w, r, f)
	http.Redirect(w, r, to, http.StatusSeeOther)
}

// call makes a /v1 call as the signed-in consumer.
func (p *Portal) call(ctx context.Context, s *auth.Session, method, path string, body, out any) error {
	pr := s.Principal()
	pr.Session = s.ID // its own request limit (api.Config.ConsumerRateLimit)
	return p.api.Call(ctx, pr, method, path, body, out)
}

// callFailed answers a page whose /v1 call failed: the API's own status
// and message for its error answers (another consumer's id is a 404, as
// one that does not exist), a 500 for anything else.
func (p *Portal) callFailed(w http.ResponseWriter, r *http.Request, s *auth.Session, err error) {
	var ce *api.CallError
	if errors.As(err, &ce) && ce.Status < 500 {
		title, text := "Not possible", ce.Message
		if ce.Status == http.StatusNotFound {
			title, text = "Not found", "There is no such page in the portal: "+ce.Message+"."
		}
		p.message(w, r, s, ce.Status, title, text)
		return
	}
	p.log.Error("a portal call failed", logkey.Error, err)
	p.message(w, r, s, http.StatusInternalServerError, "Try again", "The portal could not answer just now. Try again shortly.")
}
