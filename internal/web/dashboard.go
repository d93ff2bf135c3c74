package web

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/heraldhooks/herald/internal/api"
	"github.com/heraldhooks/herald/internal/auth"
	"github.com/heraldhooks/herald/internal/clock"
	"github.com/heraldhooks/herald/internal/edge"
	"github.com/heraldhooks/herald/internal/logkey"
	"github.com/heraldhooks/herald/internal/store"
)

// The operator dashboard, /ui/. An operator signs in with an operator key
// (a consumer key is refused: consumers have the portal); the dashboard
// keeps a session in the store, holding the SHA-256 of its token and of
// the key, and checks both on every request, so signing out or revoking
// the key ends the session at once on every node. Every page reads and
// acts through /v1 calls made as the operator (api.Server.Call).

// DashboardSessionCookie names the cookie that carries a dashboard session's token.
const DashboardSessionCookie = "herald_ui"

// DashboardPath is the dashboard's root and its cookies' path.
const DashboardPath = "/ui"

// DefaultDashboardSessionTTL is how long a dashboard session lasts.
const DefaultDashboardSessionTTL = 12 * time.Hour

// DashboardConfig wires the dashboard.
type DashboardConfig struct {
	// API answers the /v1 calls the pages make; required.
	API *api.Server
	// Sessions keeps the dashboard's sessions; required.
	Sessions store.OperatorSessionStore
	// Assets and Layout render the pages. Default: new ones.
	Assets *Assets
	Layout *Layout
	// Clock gives the time handed to the store. Default clock.Real.
	Clock clock.Clock
	// SessionTTL is how long a session lasts. Default DefaultDashboardSessionTTL.
	SessionTTL time.Duration
	// Logger hears of failures. Default: discard.
	Logger *slog.Logger
	// EgressProxy is the host:port of the proxy webhooks leave through
	// (--egress-proxy), shown on the endpoint pages; "" when they go
	// direct.
	EgressProxy string
}

// Dashboard is the /ui/ handler. Safe for concurrent use.
type Dashboard struct {
	api      *api.Server
	sessions store.OperatorSessionStore
	assets   *Assets
	layout   *Layout
	clock    clock.Clock
	ttl      time.Duration
	log      *slog.Logger
	mux      *http.ServeMux
	egress   string
	// handler is mux behind limitForms.
	handler http.Handler
}

// NewDashboard returns the dashboard.
func NewDashboard(cfg DashboardConfig) *Dashboard {
	u := &Dashboard{api: cfg.API, sessions: cfg.Sessions, assets: cfg.Assets, layout: cfg.Layout,
		clock: cfg.Clock, ttl: cfg.SessionTTL, log: cfg.Logger, mux: http.NewServeMux(), egress: cfg.EgressProxy}
	if u.log == nil {
		u.log = slog.New(slog.DiscardHandler)
	}
	if u.clock == nil {
		u.clock = clock.Real{}
	}
	if u.ttl <= 0 {
		u.ttl = DefaultDashboardSessionTTL
	}
	if u.assets == nil {
		u.assets = NewAssets()
	}
	if u.layout == nil {
		u.layout = NewLayout(u.assets, u.log)
	}
	u.routes()
	u.handler = limitForms(u.mux, func(w http.ResponseWriter, r *http.Request, status int, title, text string) {
		u.message(w, r, nil, status, title, text)
	})
	return u
}

// routes is the dashboard's route table: every path it serves, mounted on
// its mux. Signing in needs no session; every other page needs one and
// reads and acts through /v1 calls made as the operator.
func (u *Dashboard) routes() {
	u.mux.Handle(StaticPrefix, u.assets)
	u.mux.HandleFunc("GET /ui/sign-in", u.signInForm)
	u.mux.HandleFunc("POST /ui/sign-in", u.signIn)
	u.mux.Handle("POST /ui/sign-out", u.signedIn(u.signOut))
	u.mux.Handle("GET /ui/{$}", u.signedIn(u.overview))
	u.mux.Handle("GET /ui/endpoints", u.signedIn(u.endpoints))
	u.mux.Handle("GET /ui/endpoints/{id}", u.signedIn(u.endpoint))
	u.mux.Handle("POST /ui/endpoints/{id}/enable", u.signedIn(u.endpointAction("enable", "Enabled.")))
	u.mux.Handle("POST /ui/endpoints/{id}/disable", u.signedIn(u.endpointAction("disable", "Disabled: its live deliveries are dead and can be replayed once it is enabled.")))
	u.mux.Handle("POST /ui/endpoints/{id}/rotate-secret", u.signedIn(u.endpointRotate))
	u.mux.Handle("POST /ui/endpoints/{id}/client-certificate", u.signedIn(u.endpointClientCert))
	u.mux.Handle("POST /ui/endpoints/{id}/filter", u.signedIn(u.endpointFilter))
	u.mux.Handle("POST /ui/endpoints/{id}/trace-propagation", u.signedIn(u.endpointTracePropagation))
	u.mux.Handle("GET /ui/events", u.signedIn(u.events))
	u.mux.Handle("GET /ui/events/{id}", u.signedIn(u.event))
	u.mux.Handle("GET /ui/event-types", u.signedIn(u.eventTypes))
	u.mux.Handle("POST /ui/event-types", u.signedIn(u.eventTypeCreate))
	u.mux.Handle("GET /ui/event-types/{name}", u.signedIn(u.eventType))
	u.mux.Handle("POST /ui/event-types/{name}", u.signedIn(u.eventTypeUpdate))
	u.mux.Handle("GET /ui/event-types/{name}/delete", u.signedIn(u.eventTypeDeleteForm))
	u.mux.Handle("POST /ui/event-types/{name}/delete", u.signedIn(u.eventTypeDelete))
	u.mux.Handle("GET /ui/dead", u.signedIn(u.dead))
	u.mux.Handle("POST /ui/dead/replay", u.signedIn(u.deadReplaySelected))
	u.mux.Handle("POST /ui/endpoints/{id}/replay", u.signedIn(u.endpointReplay))
	u.mux.Handle("GET /ui/deliveries/{id}", u.signedIn(u.delivery))
	u.mux.Handle("POST /ui/deliveries/{id}/replay", u.signedIn(u.deliveryAction("replay", "Replayed: the delivery is due now.")))
	u.mux.Handle("POST /ui/deliveries/{id}/cancel", u.signedIn(u.deliveryAction("cancel", "Cancelled.")))
	u.mux.HandleFunc("/ui", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/ui/", http.StatusSeeOther)
	})
	u.mux.Handle("/ui/", u.signedIn(func(w http.ResponseWriter, r *http.Request, s *dashboardSession) {
		u.message(w, r, s, http.StatusNotFound, "Not found", "There is no such page in the dashboard.")
	}))
}

// ServeHTTP serves /ui and everything under it, every form held to
// limitForms's limits before any route sees it.
func (u *Dashboard) ServeHTTP(w http.ResponseWriter, r *http.Request) { u.handler.ServeHTTP(w, r) }

// IsDashboardPath reports whether the dashboard serves path.
func IsDashboardPath(path string) bool {
	return path == DashboardPath || strings.HasPrefix(path, DashboardPath+"/")
}

// dashboardSession is a signed-in operator.
type dashboardSession struct {
	id        string
	csrf      string
	principal auth.Principal
}

// dashboardHandler serves a signed-in request.
type dashboardHandler func(w http.ResponseWriter, r *http.Request, s *dashboardSession)

// signedIn serves h only with a live session whose key still
// authenticates as an operator; a state-changing request must also pass
// auth.CheckCSRF. Without a session a GET goes to the sign-in form.
func (u *Dashboard) signedIn(h dashboardHandler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s, err := u.session(r)
		if errors.Is(err, auth.ErrNoSession) {
			if r.Method == http.MethodGet || r.Method == http.MethodHead {
				http.Redirect(w, r, "/ui/sign-in", http.StatusSeeOther)
				return
			}
			u.message(w, r, nil, http.StatusUnauthorized, "Not signed in", "You are not signed in, or your session has ended. Sign in again.")
			return
		}
		if err != nil {
			u.log.Error("could not read a dashboard session", logkey.Error, err)
			u.message(w, r, nil, http.StatusInternalServerError, "Try again", "The dashboard could not read your session. Try again shortly.")
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			if reason := auth.CheckCSRF(r, &auth.Session{CSRF: s.csrf}); reason != "" {
				u.message(w, r, s, http.StatusForbidden, "Not allowed", reason)
				return
			}
		}
		h(w, r.WithContext(auth.WithPrincipal(r.Context(), s.principal)), s)
	})
}

// session reads r's session: auth.ErrNoSession when there is none, it
// ended, or its key no longer authenticates as an operator.
func (u *Dashboard) session(r *http.Request) (*dashboardSession, error) {
	c, err := r.Cookie(DashboardSessionCookie)
	if err != nil || c.Value == "" {
		return nil, auth.ErrNoSession
	}
	os, err := u.sessions.OperatorSessionGet(r.Context(), &store.OperatorSessionGetParams{
		SessionHash: auth.Hash(c.Value), Now: u.clock.StoreNow(),
	})
	if errors.Is(err, store.ErrNotFound) {
		return nil, auth.ErrNoSession
	}
	if err != nil {
		return nil, err
	}
	p, err := u.api.AuthenticateHash(r.Context(), os.KeyHash)
	if errors.Is(err, auth.ErrInvalidKey) || (err == nil && !p.IsOperator()) {
		return nil, auth.ErrNoSession
	}
	if err != nil {
		return nil, err
	}
	return &dashboardSession{id: os.ID, csrf: auth.CSRFToken(c.Value), principal: p}, nil
}

// signInForm serves GET /ui/sign-in.
func (u *Dashboard) signInForm(w http.ResponseWriter, r *http.Request) {
	u.render(w, r, nil, http.StatusOK, "signin", "Sign in", "", signInData{})
}

type signInData struct{ Error string }

// signIn serves POST /ui/sign-in: an operator key opens a session. No
// session exists yet to carry a CSRF token, so the request must come from
// this site (Sec-Fetch-Site and Origin, when sent): another site cannot
// sign a browser in to its own session.
func (u *Dashboard) signIn(w http.ResponseWriter, r *http.Request) {
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" {
		u.message(w, r, nil, http.StatusForbidden, "Not allowed", "This request came from another site and was refused.")
		return
	}
	if origin := r.Header.Get("Origin"); origin != "" && !sameOriginUI(r, origin) {
		u.message(w, r, nil, http.StatusForbidden, "Not allowed", "This request came from another origin and was refused.")
		return
	}
	key := strings.TrimSpace(r.PostFormValue("api_key"))
	p, err := u.api.Authenticate(r.Context(), key)
	switch {
	case key == "" || errors.Is(err, auth.ErrInvalidKey):
		u.render(w, r, nil, http.StatusUnauthorized, "signin", "Sign in", "", signInData{Error: "That key is not valid. Check it, or ask for a new operator key."})
		return
	case err != nil:
		u.log.Error("could not check a key at sign-in", logkey.Error, err)
		u.message(w, r, nil, http.StatusInternalServerError, "Try again", "The dashboard could not check your key just now. Try again shortly.")
		return
	case !p.IsOperator():
		u.render(w, r, nil, http.StatusForbidden, "signin", "Sign in", "", signInData{Error: "That is a consumer key. The dashboard needs an operator key; consumers see their deliveries in the portal."})
		return
	}
	token, err := auth.NewPortalToken()
	if err == nil {
		_, err = u.sessions.OperatorSessionCreate(r.Context(), &store.OperatorSessionCreateParams{
			SessionHash: auth.Hash(token), KeyHash: auth.Hash(key), TTL: u.ttl, Now: u.clock.StoreNow(),
		})
	}
	if err != nil {
		u.log.Error("could not open a dashboard session", logkey.Error, err)
		u.message(w, r, nil, http.StatusInternalServerError, "Try again", "The dashboard could not sign you in just now. Try again shortly.")
		return
	}
	http.SetCookie(w, &http.Cookie{
		Name: DashboardSessionCookie, Value: token, Path: DashboardPath, MaxAge: int(u.ttl / time.Second),
		HttpOnly: true, Secure: edge.SiteOf(r).Secure(), SameSite: http.SameSiteStrictMode,
	})
	http.Redirect(w, r, "/ui/", http.StatusSeeOther)
}

// sameOriginUI reports whether origin is the site browsers reach Herald
// at (edge.SiteOf: --public-url, or the request's own scheme and host).
func sameOriginUI(r *http.Request, origin string) bool {
	return strings.EqualFold(origin, edge.SiteOf(r).Origin())
}

// signOut serves POST /ui/sign-out: the session's row is deleted, which
// ends it on every node, and its cookie is cleared.
func (u *Dashboard) signOut(w http.ResponseWriter, r *http.Request, s *dashboardSession) {
	err := u.sessions.OperatorSessionEnd(r.Context(), &store.OperatorSessionEndParams{ID: s.id})
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		u.log.Error("could not end a dashboard session", logkey.Error, err)
		u.message(w, r, s, http.StatusInternalServerError, "Try again", "The dashboard could not sign you out just now. Try again shortly.")
		return
	}
	http.SetCookie(w, &http.Cookie{
		Name: DashboardSessionCookie, Value: "", Path: DashboardPath, MaxAge: -1,
		HttpOnly: true, Secure: edge.SiteOf(r).Secure(), SameSite: http.SameSiteStrictMode,
	})
	SetFlash(w, r, DashboardPath, Flash{Kind: "info", Text: "You are signed out."})
	http.Redirect(w, r, "/ui/sign-in", http.StatusSeeOther)
}

// dashboardNav is the dashboard's navigation.
var dashboardNav = []NavItem{
	{Key: "overview", Label: "Overview", Href: "/ui/"},
	{Key: "endpoints", Label: "Endpoints", Href: "/ui/endpoints"},
	{Key: "events", Label: "Events", Href: "/ui/events"},
	{Key: "dead", Label: "Dead letters", Href: "/ui/dead"},
	{Key: "eventtypes", Label: "Event types", Href: "/ui/event-types"},
}

// render answers a dashboard page; s is nil when no one is signed in.
func (u *Dashboard) render(w http.ResponseWriter, r *http.Request, s *dashboardSession, status int, page, title, current string, data any) {
	p := &Page{Site: "Herald", Home: "/ui/", Title: title, Current: current, Data: data,
		Flash: TakeFlash(w, r, DashboardPath)}
	if s != nil {
		p.Nav = dashboardNav
		p.SignedInAs = "operator"
		if s.principal.KeyID != "" {
			p.SignedInAs = "operator key " + s.principal.KeyID
		}
		p.SignOut = "/ui/sign-out"
		p.CSRF = s.csrf
	}
	u.layout.Render(w, status, page, p)
}

// message answers a page with a title and a sentence.
func (u *Dashboard) message(w http.ResponseWriter, r *http.Request, s *dashboardSession, status int, title, text string) {
	u.render(w, r, s, status, "message", title, "", text)
}

// call makes a /v1 call as the signed-in operator.
func (u *Dashboard) call(ctx context.Context, s *dashboardSession, method, path string, body, out any) error {
	return u.api.Call(ctx, s.principal, method, path, body, out)
}

// callFailed answers a page whose /v1 call failed: the API's own status
// and message for its error answers, a 500 for anything else.
func (u *Dashboard) callFailed(w http.ResponseWriter, r *http.Request, s *dashboardSession, err error) {
	var ce *api.CallError
	if errors.As(err, &ce) && ce.Status < 500 {
		title := "Not possible"
		if ce.Status == http.StatusNotFound {
			title = "Not found"
		}
		u.message(w, r, s, ce.Status, title, ce.Message)
		return
	}
	u.log.Error("a dashboard call failed", logkey.Error, err)
	u.message(w, r, s, http.StatusInternalServerError, "Try again", "The dashboard could not answer just now; see the server log.")
}
