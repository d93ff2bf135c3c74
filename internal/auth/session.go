package auth

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/heraldhooks/herald/internal/clock"
	"github.com/heraldhooks/herald/internal/edge"
	"github.com/heraldhooks/herald/internal/store"
)

// Portal sessions (API.md, "Portal sessions"). An operator makes a
// one-time link for one consumer; opening it exchanges the link's token
// for a session token kept in a cookie. Both tokens are 32 random bytes,
// and Herald keeps only their SHA-256, as it does for API keys. A request
// to /portal/ with a live session is a consumer Principal for that
// consumer, the same principal a consumer key gives.

// SessionCookie names the cookie that carries a portal session's token.
const SessionCookie = "herald_portal"

// SessionPath is the cookie's path: the portal, nothing else.
const SessionPath = "/portal"

// DefaultSessionTTL is how long a portal session lasts after its link was
// opened: a working day, after which the operator's application hands out
// a new link.
const DefaultSessionTTL = 12 * time.Hour

// CSRFHeader and CSRFField carry a session's CSRF token on requests that
// change state: the header for scripts, the field for forms.
const (
	CSRFHeader = "X-CSRF-Token"
	CSRFField  = "csrf_token"
)

// ErrNoSession: the request carries no live portal session.
var ErrNoSession = errors.New("not signed in to the portal")

// NewPortalToken makes a link or session token: 32 random bytes in
// unpadded base64url.
func NewPortalToken() (string, error) {
	var raw [keyBytes]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", fmt.Errorf("make portal token: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(raw[:]), nil
}

// CSRFToken is the CSRF token of the session whose token is session: an
// HMAC of a fixed label keyed by the session token. It needs no storage,
// differs per session, and cannot be made without the session token, which
// only the HttpOnly cookie holds.
func CSRFToken(session string) string {
	m := hmac.New(sha256.New, []byte(session))
	m.Write([]byte("herald portal csrf v1"))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// Session is a live portal session.
type Session struct {
	// ID is the store's id of the session (ps_…).
	ID         string
	ConsumerID string
	ExpiresAt  time.Time
	// CSRF is the token a state-changing request must carry.
	CSRF string
}

// Principal is the consumer principal the session gives.
func (s *Session) Principal() Principal { return Consumer(s.ConsumerID, "") }

type sessionKey struct{}

// SessionFromContext returns the portal session ctx carries (put there by
// Sessions.Middleware).
func SessionFromContext(ctx context.Context) (*Session, bool) {
	s, ok := ctx.Value(sessionKey{}).(*Session)
	return s, ok
}

// SessionsConfig wires Sessions.
type SessionsConfig struct {
	// Store keeps links and sessions; required.
	Store store.PortalSessionStore
	// Clock gives the time handed to the store. Default clock.Real.
	Clock clock.Clock
	// TTL is how long a session lasts. Default DefaultSessionTTL.
	TTL time.Duration
	// Framed says the operator lets other sites show the portal in a
	// frame (--portal-frame-ancestors): a link opened inside a frame then
	// gets a cookie that a browser sends from that frame (InFrame).
	Framed bool
}

// Sessions opens portal links and reads portal sessions. Safe for
// concurrent use; it keeps no state, so every node sees a revocation at
// once.
type Sessions struct {
	store  store.PortalSessionStore
	clock  clock.Clock
	ttl    time.Duration
	framed bool
}

// NewSessions returns Sessions for cfg.
func NewSessions(cfg SessionsConfig) *Sessions {
	s := &Sessions{store: cfg.Store, clock: cfg.Clock, ttl: cfg.TTL, framed: cfg.Framed}
	if s.clock == nil {
		s.clock = clock.Real{}
	}
	if s.ttl <= 0 {
		s.ttl = DefaultSessionTTL
	}
	return s
}

// Open exchanges the link token for a new session and sets its cookie on
// w: HttpOnly, SameSite=Strict, Path=/portal, Secure when browsers reach
// Herald over https (edge.SiteOf).
// The store's errors pass through (store.ErrPortalLinkUsed,
// store.ErrPortalLinkExpired, store.ErrNotFound).
func (s *Sessions) Open(w http.ResponseWriter, r *http.Request, link string) (*Session, error) {
	token, err := NewPortalToken()
	if err != nil {
		return nil, err
	}
	ps, err := s.store.PortalSessionExchange(r.Context(), &store.PortalSessionExchangeParams{
		LinkHash: Hash(link), SessionHash: Hash(token), SessionTTL: s.ttl, Now: s.clock.StoreNow(),
	})
	if err != nil {
		return nil, err
	}
	c := &http.Cookie{
		Name:     SessionCookie,
		Value:    token,
		Path:     SessionPath,
		MaxAge:   int(s.ttl / time.Second),
		HttpOnly: true,
		Secure:   edge.SiteOf(r).Secure(),
		SameSite: http.SameSiteStrictMode,
	}
	s.AdjustCookie(r, c)
	http.SetCookie(w, c)
	return toSession(ps, token), nil
}

// InFrame reports whether the browser loads r into a frame
// (Sec-Fetch-Dest: iframe or frame, which every current browser sends on
// a navigation).
func InFrame(r *http.Request) bool {
	d := r.Header.Get("Sec-Fetch-Dest")
	return d == "iframe" || d == "frame"
}

// AdjustCookie makes c, a portal cookie, one a framed portal can keep: when
// framing is allowed and r comes from a frame, SameSite=None (a frame
// inside another site is a cross-site context, where Strict and Lax
// cookies are not sent), Secure (which None requires; browsers accept it
// from http://localhost too) and Partitioned (CHIPS: the browser keeps the
// cookie for this portal inside that one top-level site only, and sends it
// even where it blocks third-party cookies). Otherwise c stays as it is:
// SameSite=Strict, the portal opened as a page of its own.
func (s *Sessions) AdjustCookie(r *http.Request, c *http.Cookie) {
	if !s.framed || !InFrame(r) {
		return
	}
	c.SameSite = http.SameSiteNoneMode
	c.Secure = true
	c.Partitioned = true
}

// toSession is the Session of a stored row whose token is token.
func toSession(ps *store.PortalSession, token string) *Session {
	out := &Session{ID: ps.ID, ConsumerID: ps.ConsumerID, CSRF: CSRFToken(token)}
	if ps.ExpiresAt != nil {
		out.ExpiresAt = *ps.ExpiresAt
	}
	return out
}

// FromSession returns the live session r's cookie names, ErrNoSession when
// there is none (no cookie, ended, expired or revoked), or the store's
// error. The store is read on every request: nothing is cached.
func (s *Sessions) FromSession(r *http.Request) (*Session, error) {
	c, err := r.Cookie(SessionCookie)
	if err != nil || c.Value == "" {
		return nil, ErrNoSession
	}
	ps, err := s.store.PortalSessionGet(r.Context(), &store.PortalSessionGetParams{
		SessionHash: Hash(c.Value), Now: s.clock.StoreNow(),
	})
	if errors.Is(err, store.ErrNotFound) {
		return nil, ErrNoSession
	}
	if err != nil {
		return nil, fmt.Errorf("read portal session: %w", err)
	}
	return toSession(ps, c.Value), nil
}

// End deletes the session and clears its cookie.
func (s *Sessions) End(w http.ResponseWriter, r *http.Request, sess *Session) error {
	if err := s.store.PortalSessionEnd(r.Context(), &store.PortalSessionEndParams{ID: sess.ID}); err != nil &&
		!errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("end portal session: %w", err)
	}
	c := &http.Cookie{
		Name: SessionCookie, Value: "", Path: SessionPath, MaxAge: -1,
		HttpOnly: true, Secure: edge.SiteOf(r).Secure(), SameSite: http.SameSiteStrictMode,
	}
	s.AdjustCookie(r, c)
	http.SetCookie(w, c)
	return nil
}

// Refusal is what Middleware answers instead of calling next.
type Refusal struct {
	Status int
	Reason string
}

// Middleware serves next only to requests with a live session, with the
// session and its consumer Principal in the context; a state-changing
// request (anything but GET, HEAD, OPTIONS) must also pass CheckCSRF.
// Otherwise refuse answers: 401 without a session, 403 for a cross-site
// request or a missing or wrong CSRF token, 500 when the store failed.
func (s *Sessions) Middleware(next http.Handler, refuse func(http.ResponseWriter, *http.Request, Refusal)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sess, err := s.FromSession(r)
		if errors.Is(err, ErrNoSession) {
			refuse(w, r, Refusal{http.StatusUnauthorized, "You are not signed in, or your session has ended. Open a new portal link to sign in."})
			return
		}
		if err != nil {
			refuse(w, r, Refusal{http.StatusInternalServerError, "The portal could not read your session. Try again shortly."})
			return
		}
		if unsafeMethod(r.Method) {
			if reason := CheckCSRF(r, sess); reason != "" {
				refuse(w, r, Refusal{http.StatusForbidden, reason})
				return
			}
		}
		ctx := WithPrincipal(r.Context(), sess.Principal())
		ctx = context.WithValue(ctx, sessionKey{}, sess)
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

// unsafeMethod reports whether a request with method may change state.
func unsafeMethod(m string) bool {
	return m != http.MethodGet && m != http.MethodHead && m != http.MethodOptions
}

// CheckCSRF returns why r, which changes state under sess, is refused, or
// "" to let it through. Two checks, both needed: the request must not come
// from another site (Sec-Fetch-Site, when the browser sends it, is
// same-origin; Origin, when sent, is this host), and it must carry the
// session's CSRF token in the X-CSRF-Token header or the csrf_token form
// field, compared in constant time. Fails closed: a request with no token
// is refused whatever its headers.
func CheckCSRF(r *http.Request, sess *Session) string {
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" {
		return "This request came from another site (Sec-Fetch-Site: " + site + ") and was refused."
	}
	if origin := r.Header.Get("Origin"); origin != "" && !sameOrigin(r, origin) {
		return "This request came from another origin (" + origin + ") and was refused."
	}
	got := r.Header.Get(CSRFHeader)
	if got == "" {
		got = r.PostFormValue(CSRFField)
	}
	if got == "" || subtle.ConstantTimeCompare([]byte(got), []byte(sess.CSRF)) != 1 {
		return "This request lacks the page's CSRF token and was refused. Reload the page and try again."
	}
	return ""
}

// sameOrigin reports whether origin is the site browsers reach Herald at
// (edge.SiteOf: --public-url, or the request's own scheme and host).
func sameOrigin(r *http.Request, origin string) bool {
	u, err := url.Parse(origin)
	if err != nil {
		return false
	}
	site := edge.SiteOf(r)
	return u.Scheme == site.Scheme && strings.EqualFold(u.Host, site.Host) && u.Path == "" && u.RawQuery == ""
}
