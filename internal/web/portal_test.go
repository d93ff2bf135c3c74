package web_test

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhooks/herald"
	"github.com/heraldhooks/herald/internal/api"
	"github.com/heraldhooks/herald/internal/auth"
	"github.com/heraldhooks/herald/internal/clock"
	"github.com/heraldhooks/herald/internal/config"
	"github.com/heraldhooks/herald/internal/notice"
	"github.com/heraldhooks/herald/internal/notice/smtptest"
	"github.com/heraldhooks/herald/internal/store"
	"github.com/heraldhooks/herald/internal/store/sqlitestore"
	"github.com/heraldhooks/herald/internal/store/sqlitestore/sqlitetest"
	"github.com/heraldhooks/herald/internal/web"
)

const (
	operatorKey = "hk_operator_key_0123456789"
	consumerKey = "hk_consumer_key_0123456789"
)

type env struct {
	srv   *httptest.Server
	clock *clock.Test
	store store.Store
}

// setup serves the API and the portal side by side, as herald serve does,
// on SQLite with a test clock; over TLS when tls is set. frame, when
// given, are the origins that may frame the portal.
func setup(t *testing.T, tls bool, frame ...string) *env {
	t.Helper()
	return setupWith(t, tls, nil, frame...)
}

// setupWith is setup with mail, when not nil, the SMTP server the API
// mails confirmation links through, links to this server.
func setupWith(t *testing.T, tls bool, mail *smtptest.Server, frame ...string) *env {
	t.Helper()
	st, err := sqlitestore.Open(t.Context(), sqlitetest.Path(t), nil)
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	require.NoError(t, st.Migrate(t.Context()))
	clk := clock.NewTest(time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC))
	_, err = st.APIKeyCreate(t.Context(), &store.APIKeyCreateParams{Key: &herald.APIKey{
		Name: "cust_42", Scope: herald.ScopeConsumer, ConsumerID: "cust_42",
		Hash: sha256.Sum256([]byte(consumerKey)), Prefix: consumerKey[:12],
	}, Now: clk.StoreNow()})
	require.NoError(t, err)
	srv := httptest.NewUnstartedServer(nil)
	t.Cleanup(srv.Close)
	var confirmations api.ConfirmationMailer
	if mail != nil {
		cfg, err := config.ParseSMTP(mail.URL, "")
		require.NoError(t, err)
		sender := notice.NewSMTP(cfg)
		m := notice.New(notice.Config{Store: st, Sender: sender, Clock: clk,
			Confirmer: notice.NewConfirmer(sender, "http://"+srv.Listener.Addr().String(), nil)})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); _ = m.Run(ctx) }()
		t.Cleanup(func() { cancel(); <-done })
		confirmations = m
	}
	apiHandler := api.New(api.Config{Store: st, Clock: clk, APIKeyHash: sha256.Sum256([]byte(operatorKey)), Confirmations: confirmations})
	portal := web.NewPortal(web.PortalConfig{Store: st, API: apiHandler, Clock: clk, FrameAncestors: frame})
	srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if web.IsPortalPath(r.URL.Path) {
			portal.ServeHTTP(w, r)
			return
		}
		apiHandler.ServeHTTP(w, r)
	})
	if tls {
		srv.StartTLS()
	} else {
		srv.Start()
	}
	return &env{srv: srv, clock: clk, store: st}
}

type answer struct {
	status int
	header http.Header
	body   string
}

// call makes a request with client c (which does not follow redirects).
func call(t *testing.T, c *http.Client, method, url, key, body string, header map[string]string) answer {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, url, strings.NewReader(body))
	require.NoError(t, err)
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	res, err := c.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	return answer{res.StatusCode, res.Header, string(b)}
}

// browser is a client with its own cookie jar that does not follow
// redirects, so each step is seen.
func (e *env) browser(t *testing.T) *http.Client {
	t.Helper()
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	c := *e.srv.Client()
	c.Jar = jar
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &c
}

// link makes a portal link for consumer with the operator key.
func (e *env) link(t *testing.T, consumer, body string) (url string, expires time.Time) {
	t.Helper()
	a := call(t, e.srv.Client(), "POST", e.srv.URL+"/v1/consumers/"+consumer+"/portal-sessions", operatorKey, body, nil)
	require.Equal(t, http.StatusCreated, a.status, a.body)
	var out struct {
		URL       string    `json:"url"`
		ExpiresAt time.Time `json:"expires_at"`
	}
	require.NoError(t, json.Unmarshal([]byte(a.body), &out))
	return out.URL, out.ExpiresAt
}

// signIn opens a new link for consumer in browser b.
func (e *env) signIn(t *testing.T, b *http.Client, consumer string) {
	t.Helper()
	u, _ := e.link(t, consumer, "")
	a := e.openLink(t, b, u)
	require.Equal(t, http.StatusSeeOther, a.status, a.body)
	require.Equal(t, "/portal/", a.header.Get("Location"))
}

var formAction = regexp.MustCompile(`<form method="post" action="([^"]+)" id="open-form">`)

// openLink does in b what a person does with link u: reads its page
// (which must spend nothing and set no cookie) and presses its button,
// a POST from this site, both with the headers of extra. It returns the
// POST's answer.
func (e *env) openLink(t *testing.T, b *http.Client, u string, extra ...map[string]string) answer {
	t.Helper()
	get := map[string]string{}
	post := map[string]string{
		"Content-Type": "application/x-www-form-urlencoded", "Origin": e.srv.URL, "Sec-Fetch-Site": "same-origin",
	}
	for _, h := range extra {
		for k, v := range h {
			get[k], post[k] = v, v
		}
	}
	page := call(t, b, "GET", u, "", "", get)
	require.Equal(t, http.StatusOK, page.status, page.body)
	require.Empty(t, page.header.Values("Set-Cookie"), "the link's page sets no cookie")
	action, csrf := formAction.FindStringSubmatch(page.body), csrfField.FindStringSubmatch(page.body)
	require.NotNil(t, action, page.body)
	require.NotNil(t, csrf, page.body)
	return call(t, b, "POST", e.srv.URL+action[1], "", url.Values{"csrf_token": {csrf[1]}}.Encode(), post)
}

var csrfField = regexp.MustCompile(`name="csrf_token" value="([^"]+)"`)

// home reads GET /portal/ in b; csrf is the page's CSRF token.
func (e *env) home(t *testing.T, b *http.Client) (a answer, csrf string) {
	t.Helper()
	a = call(t, b, "GET", e.srv.URL+"/portal/", "", "", nil)
	if m := csrfField.FindStringSubmatch(a.body); m != nil {
		csrf = m[1]
	}
	return a, csrf
}

func TestPortalLinkGivesOneSession(t *testing.T) {
	t.Parallel()
	e := setup(t, false)
	u, expires := e.link(t, "cust_42", `{"ttl":"30m"}`)
	require.Regexp(t, `^`+regexp.QuoteMeta(e.srv.URL)+`/portal/[A-Za-z0-9_-]{43}$`, u)
	require.Equal(t, e.clock.Now().Add(30*time.Minute), expires)

	b := e.browser(t)
	head := call(t, b, "HEAD", u, "", "", nil)
	require.Equal(t, http.StatusOK, head.status, "a HEAD does not spend the link")
	require.Empty(t, head.header.Values("Set-Cookie"))
	a := e.openLink(t, b, u)
	require.Equal(t, http.StatusSeeOther, a.status, a.body)
	require.Equal(t, "/portal/", a.header.Get("Location"))
	cookies := (&http.Response{Header: a.header}).Cookies()
	require.Len(t, cookies, 1)
	c := cookies[0]
	require.Equal(t, auth.SessionCookie, c.Name)
	require.True(t, c.HttpOnly)
	require.False(t, c.Secure, "not over TLS")
	require.Equal(t, http.SameSiteStrictMode, c.SameSite)
	require.Equal(t, "/portal", c.Path)
	require.Equal(t, int((12 * time.Hour).Seconds()), c.MaxAge)

	home, csrf := e.home(t, b)
	require.Equal(t, http.StatusOK, home.status)
	require.Contains(t, home.body, "Signed in as consumer cust_42")
	require.NotEmpty(t, csrf)
	require.Contains(t, home.header.Get("Content-Security-Policy"), "frame-ancestors 'none'")

	// The same link in another browser: no session, a page that says so.
	other := e.browser(t)
	again := e.openLink(t, other, u)
	require.Equal(t, http.StatusGone, again.status)
	require.Contains(t, again.body, "already used")
	require.Empty(t, again.header.Values("Set-Cookie"))
	a, _ = e.home(t, other)
	require.Equal(t, http.StatusUnauthorized, a.status)
	require.NotContains(t, a.body, "cust_42")

	// A made-up link.
	a = e.openLink(t, other, e.srv.URL+"/portal/bm90LWEtbGluaw")
	require.Equal(t, http.StatusNotFound, a.status)
	require.Contains(t, a.body, "not valid")
}

// TestPortalLinkGETSpendsNothing: fetching a link, as a mail scanner or
// a chat preview does, however often, answers the page with the button,
// sets no cookie and leaves the link to open once afterwards.
func TestPortalLinkGETSpendsNothing(t *testing.T) {
	t.Parallel()
	e := setup(t, false)
	u, _ := e.link(t, "cust_42", "")
	scanner := e.browser(t)
	for range 3 {
		a := call(t, scanner, "GET", u, "", "", nil)
		require.Equal(t, http.StatusOK, a.status, a.body)
		require.Empty(t, a.header.Values("Set-Cookie"))
		require.Contains(t, a.body, `id="open-portal"`)
		require.NotContains(t, a.body, "cust_42", "the page tells nothing of the consumer")
		require.Equal(t, "no-store", a.header.Get("Cache-Control"))
	}
	home, _ := e.home(t, scanner)
	require.Equal(t, http.StatusUnauthorized, home.status)

	b := e.browser(t)
	a := e.openLink(t, b, u)
	require.Equal(t, http.StatusSeeOther, a.status, "the link still opens: %s", a.body)
	home, _ = e.home(t, b)
	require.Contains(t, home.body, "Signed in as consumer cust_42")
}

// TestPortalLinkOpensOnlyFromItsOwnPage: the POST that spends a link is
// refused (403, no cookie, the link left unspent) when it comes from
// another site, says nothing of where it comes from, or lacks the page's
// token: a consumer cannot sign a victim's browser in to its own portal
// (login CSRF) with a form of its own site that posts its link.
func TestPortalLinkOpensOnlyFromItsOwnPage(t *testing.T) {
	t.Parallel()
	e := setup(t, false)
	u, _ := e.link(t, "cust_42", "")
	token := strings.TrimPrefix(u, e.srv.URL+"/portal/")
	good := url.Values{"csrf_token": {auth.LinkCSRFToken(token)}}.Encode()
	formType := "application/x-www-form-urlencoded"
	refused := []struct {
		name   string
		body   string
		header map[string]string
	}{
		{"OtherOriginAutoSubmittedForm", good, map[string]string{"Content-Type": formType, "Origin": "https://evil.example"}},
		{"CrossSite", good, map[string]string{"Content-Type": formType, "Sec-Fetch-Site": "cross-site", "Origin": e.srv.URL}},
		{"SameSiteIsNotSameOrigin", good, map[string]string{"Content-Type": formType, "Sec-Fetch-Site": "same-site"}},
		{"NeitherOriginNorFetchSite", good, map[string]string{"Content-Type": formType}},
		{"NoToken", "", map[string]string{"Content-Type": formType, "Origin": e.srv.URL, "Sec-Fetch-Site": "same-origin"}},
		{"AnotherLinksToken", url.Values{"csrf_token": {auth.LinkCSRFToken(otherToken(token))}}.Encode(),
			map[string]string{"Content-Type": formType, "Origin": e.srv.URL, "Sec-Fetch-Site": "same-origin"}},
	}
	for _, c := range refused {
		b := e.browser(t)
		a := call(t, b, "POST", u, "", c.body, c.header)
		require.Equal(t, http.StatusForbidden, a.status, "%s: %s", c.name, a.body)
		require.Empty(t, a.header.Values("Set-Cookie"), c.name)
		home, _ := e.home(t, b)
		require.Equal(t, http.StatusUnauthorized, home.status, c.name)
	}

	// Refused posts spent nothing: the page's button opens it.
	a := e.openLink(t, e.browser(t), u)
	require.Equal(t, http.StatusSeeOther, a.status, a.body)
}

func TestPortalLinkExpires(t *testing.T) {
	t.Parallel()
	e := setup(t, false)
	u, _ := e.link(t, "cust_42", `{"ttl":"1m"}`)
	e.clock.Advance(time.Minute)
	b := e.browser(t)
	a := e.openLink(t, b, u)
	require.Equal(t, http.StatusGone, a.status)
	require.Contains(t, a.body, "expired")
	require.Empty(t, a.header.Values("Set-Cookie"))
	a, _ = e.home(t, b)
	require.Equal(t, http.StatusUnauthorized, a.status)
}

func TestPortalSessionExpires(t *testing.T) {
	t.Parallel()
	e := setup(t, false)
	b := e.browser(t)
	e.signIn(t, b, "cust_42")
	e.clock.Advance(12*time.Hour - time.Second)
	a, _ := e.home(t, b)
	require.Equal(t, http.StatusOK, a.status)
	e.clock.Advance(time.Second)
	a, _ = e.home(t, b)
	require.Equal(t, http.StatusUnauthorized, a.status)
}

func TestPortalLinksRace(t *testing.T) {
	t.Parallel()
	e := setup(t, false)
	u, _ := e.link(t, "cust_42", "")
	const browsers = 6
	statuses := make([]int, browsers)
	var wg sync.WaitGroup
	for i := range browsers {
		b := e.browser(t)
		wg.Add(1)
		go func() {
			defer wg.Done()
			statuses[i] = e.openLink(t, b, u).status
		}()
	}
	wg.Wait()
	var won int
	for _, s := range statuses {
		if s == http.StatusSeeOther {
			won++
		} else {
			require.Equal(t, http.StatusGone, s)
		}
	}
	require.Equal(t, 1, won, "one browser gets the session: %v", statuses)
}

func TestRevokeEndsSessionsAtOnce(t *testing.T) {
	t.Parallel()
	e := setup(t, false)
	b, other := e.browser(t), e.browser(t)
	e.signIn(t, b, "cust_42")
	e.signIn(t, other, "cust_7")
	unopened, _ := e.link(t, "cust_42", "")

	a := call(t, e.srv.Client(), "DELETE", e.srv.URL+"/v1/consumers/cust_42/portal-sessions", operatorKey, "", nil)
	require.Equal(t, http.StatusOK, a.status, a.body)
	require.JSONEq(t, `{"revoked":2}`, a.body)

	a, _ = e.home(t, b)
	require.Equal(t, http.StatusUnauthorized, a.status)
	require.Contains(t, a.body, "not signed in")
	a = e.openLink(t, e.browser(t), unopened)
	require.Equal(t, http.StatusNotFound, a.status)
	a, _ = e.home(t, other)
	require.Equal(t, http.StatusOK, a.status, "another consumer's session goes on")
	require.Contains(t, a.body, "cust_7")
}

func TestOnlyOperatorsMakeAndRevokeLinks(t *testing.T) {
	t.Parallel()
	e := setup(t, false)
	path := e.srv.URL + "/v1/consumers/cust_42/portal-sessions"
	for _, method := range []string{"POST", "DELETE"} {
		a := call(t, e.srv.Client(), method, path, "", "", nil)
		require.Equal(t, http.StatusUnauthorized, a.status, a.body)
		a = call(t, e.srv.Client(), method, path, consumerKey, "", nil)
		require.Equal(t, http.StatusForbidden, a.status, a.body)
		require.Contains(t, a.body, `"forbidden"`)
	}
	for _, ttl := range []string{`"30s"`, `"25h"`, `"soon"`, `"-5m"`} {
		a := call(t, e.srv.Client(), "POST", path, operatorKey, `{"ttl":`+ttl+`}`, nil)
		require.Equal(t, http.StatusBadRequest, a.status, ttl)
		require.Contains(t, a.body, `"invalid_ttl"`)
		require.Contains(t, a.body, "ttl must be")
	}
}

func TestStateChangesNeedTheCSRFTokenFromThisSite(t *testing.T) {
	t.Parallel()
	e := setup(t, false)
	b := e.browser(t)
	e.signIn(t, b, "cust_42")
	_, csrf := e.home(t, b)
	require.NotEmpty(t, csrf)
	end := e.srv.URL + "/portal/session/end"
	form := map[string]string{"Content-Type": "application/x-www-form-urlencoded"}

	refused := []struct {
		name   string
		body   string
		header map[string]string
	}{
		{"NoToken", "", form},
		{"WrongToken", "csrf_token=" + otherToken(csrf), form},
		{"OtherOrigin", "csrf_token=" + csrf, map[string]string{
			"Content-Type": form["Content-Type"], "Origin": "https://evil.example"}},
		{"CrossSite", "", map[string]string{auth.CSRFHeader: csrf, "Sec-Fetch-Site": "cross-site"}},
		{"SameSiteIsNotSameOrigin", "", map[string]string{auth.CSRFHeader: csrf, "Sec-Fetch-Site": "same-site"}},
	}
	for _, c := range refused {
		a := call(t, b, "POST", end, "", c.body, c.header)
		require.Equal(t, http.StatusForbidden, a.status, c.name)
		home, _ := e.home(t, b)
		require.Equal(t, http.StatusOK, home.status, "%s: the session goes on", c.name)
	}

	// Without a session, the token alone does nothing.
	a := call(t, e.browser(t), "POST", end, "", "", map[string]string{auth.CSRFHeader: csrf})
	require.Equal(t, http.StatusUnauthorized, a.status)

	// The form as the page sends it, from this origin.
	a = call(t, b, "POST", end, "", "csrf_token="+csrf, map[string]string{
		"Content-Type": form["Content-Type"], "Origin": e.srv.URL, "Sec-Fetch-Site": "same-origin"})
	require.Equal(t, http.StatusOK, a.status, a.body)
	require.Contains(t, a.body, "signed out")
	home, _ := e.home(t, b)
	require.Equal(t, http.StatusUnauthorized, home.status)

	// The header, as a script sends it.
	e.signIn(t, b, "cust_42")
	_, csrf2 := e.home(t, b)
	require.NotEqual(t, csrf, csrf2, "each session has its own token")
	a = call(t, b, "POST", end, "", "", map[string]string{auth.CSRFHeader: csrf2})
	require.Equal(t, http.StatusOK, a.status, a.body)
}

func TestSecureCookieOverTLS(t *testing.T) {
	t.Parallel()
	e := setup(t, true)
	u, _ := e.link(t, "cust_42", "")
	require.True(t, strings.HasPrefix(u, "https://"), u)
	b := e.browser(t)
	a := e.openLink(t, b, u)
	require.Equal(t, http.StatusSeeOther, a.status, a.body)
	cookies := (&http.Response{Header: a.header}).Cookies()
	require.Len(t, cookies, 1)
	require.True(t, cookies[0].Secure)
	require.True(t, cookies[0].HttpOnly)
	require.Equal(t, http.SameSiteStrictMode, cookies[0].SameSite)
	home, csrf := e.home(t, b)
	require.Contains(t, home.body, "Signed in as consumer cust_42")
	a = call(t, b, "POST", e.srv.URL+"/portal/session/end", "", "", map[string]string{
		auth.CSRFHeader: csrf, "Origin": e.srv.URL})
	require.Equal(t, http.StatusOK, a.status, a.body)
}

// otherToken is token with its first character changed, which every
// decoding of it sees (a change to the last ones can fall in a base64
// string's unused bits, or leave it as it was).
func otherToken(token string) string {
	first := byte('A')
	if token[0] == first {
		first = 'B'
	}
	return string(first) + token[1:]
}
