package web_test

import (
	"crypto/sha256"
	"html"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhooks/herald"
	"github.com/heraldhooks/herald/internal/api"
	"github.com/heraldhooks/herald/internal/clock"
	"github.com/heraldhooks/herald/internal/store"
	"github.com/heraldhooks/herald/internal/store/sqlitestore"
	"github.com/heraldhooks/herald/internal/store/sqlitestore/sqlitetest"
	"github.com/heraldhooks/herald/internal/web"
)

const storedOperatorKey = "hk_stored_operator_key_0123456789"

type dashboardEnv struct {
	srv   *httptest.Server
	st    store.Store
	clock *clock.Test
}

// setupUI serves the API and the dashboard side by side on SQLite with a
// test clock: the configured operator key, a stored operator key and a
// consumer key.
func setupUI(t *testing.T) *dashboardEnv { return setupUIOver(t, false) }

// setupUIOver is setupUI, over TLS when tls is set.
func setupUIOver(t *testing.T, tls bool) *dashboardEnv {
	t.Helper()
	st, err := sqlitestore.Open(t.Context(), sqlitetest.Path(t), nil)
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	require.NoError(t, st.Migrate(t.Context()))
	clk := clock.NewTest(time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC))
	for _, k := range []*herald.APIKey{
		{ID: "key_consumer", Name: "cust_42", Scope: herald.ScopeConsumer, ConsumerID: "cust_42",
			Hash: sha256.Sum256([]byte(consumerKey)), Prefix: consumerKey[:12]},
		{ID: "key_operator", Name: "ops", Scope: herald.ScopeOperator,
			Hash: sha256.Sum256([]byte(storedOperatorKey)), Prefix: storedOperatorKey[:12]},
	} {
		_, err = st.APIKeyCreate(t.Context(), &store.APIKeyCreateParams{Key: k, Now: clk.StoreNow()})
		require.NoError(t, err)
	}
	apiHandler := api.New(api.Config{Store: st, Clock: clk, APIKeyHash: sha256.Sum256([]byte(operatorKey)), AllowPrivateNetworks: true})
	ui := web.NewDashboard(web.DashboardConfig{API: apiHandler, Sessions: st, Clock: clk})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if web.IsDashboardPath(r.URL.Path) {
			ui.ServeHTTP(w, r)
			return
		}
		apiHandler.ServeHTTP(w, r)
	})
	srv := httptest.NewUnstartedServer(h)
	if tls {
		srv.StartTLS()
	} else {
		srv.Start()
	}
	t.Cleanup(srv.Close)
	return &dashboardEnv{srv: srv, st: st, clock: clk}
}

func (e *dashboardEnv) browser(t *testing.T) *http.Client {
	t.Helper()
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	c := *e.srv.Client()
	c.Jar = jar
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &c
}

func form(t *testing.T, c *http.Client, u string, v url.Values, header map[string]string) answer {
	t.Helper()
	if header == nil {
		header = map[string]string{}
	}
	header["Content-Type"] = "application/x-www-form-urlencoded"
	return call(t, c, http.MethodPost, u, "", v.Encode(), header)
}

var csrfRE = regexp.MustCompile(`name="csrf_token" value="([^"]+)"`)

// signIn signs c in with key and returns the overview's CSRF token.
func (e *dashboardEnv) signIn(t *testing.T, c *http.Client, key string) string {
	t.Helper()
	a := form(t, c, e.srv.URL+"/ui/sign-in", url.Values{"api_key": {key}}, nil)
	require.Equal(t, http.StatusSeeOther, a.status, a.body)
	require.Equal(t, "/ui/", a.header.Get("Location"))
	cookie := a.header.Get("Set-Cookie")
	require.Contains(t, cookie, "herald_ui=")
	require.Contains(t, cookie, "Path=/ui")
	require.Contains(t, cookie, "HttpOnly")
	require.Contains(t, cookie, "SameSite=Strict")
	page := call(t, c, http.MethodGet, e.srv.URL+"/ui/", "", "", nil)
	require.Equal(t, http.StatusOK, page.status)
	require.Contains(t, page.body, "Overview")
	m := csrfRE.FindStringSubmatch(page.body)
	require.NotNil(t, m, page.body)
	return m[1]
}

func TestDashboardSignIn(t *testing.T) {
	t.Parallel()

	t.Run("NoSessionGoesToSignIn", func(t *testing.T) {
		t.Parallel()
		e := setupUI(t)
		a := call(t, e.browser(t), http.MethodGet, e.srv.URL+"/ui/", "", "", nil)
		require.Equal(t, http.StatusSeeOther, a.status)
		require.Equal(t, "/ui/sign-in", a.header.Get("Location"))
		a = call(t, e.browser(t), http.MethodGet, e.srv.URL+"/ui/sign-in", "", "", nil)
		require.Equal(t, http.StatusOK, a.status)
		require.Contains(t, a.header.Get("Content-Security-Policy"), "script-src 'self'")
		require.Contains(t, a.body, `name="api_key"`)
	})

	t.Run("OperatorKeyOpensASessionThatSignOutEnds", func(t *testing.T) {
		t.Parallel()
		e := setupUI(t)
		c := e.browser(t)
		csrf := e.signIn(t, c, operatorKey)
		u, _ := url.Parse(e.srv.URL + "/ui/")
		stolen := c.Jar.Cookies(u)

		a := form(t, c, e.srv.URL+"/ui/sign-out", url.Values{"csrf_token": {csrf}}, nil)
		require.Equal(t, http.StatusSeeOther, a.status, a.body)
		require.Equal(t, "/ui/sign-in", a.header.Get("Location"))

		// The old cookie, replayed, opens nothing: the session is gone.
		other := e.browser(t)
		other.Jar.SetCookies(u, stolen)
		a = call(t, other, http.MethodGet, e.srv.URL+"/ui/", "", "", nil)
		require.Equal(t, http.StatusSeeOther, a.status)
		require.Equal(t, "/ui/sign-in", a.header.Get("Location"))
	})

	t.Run("CookieSecureOverTLSOnly", func(t *testing.T) {
		t.Parallel()
		for _, tls := range []bool{false, true} {
			e := setupUIOver(t, tls)
			// A browser sends its origin, https:// over TLS: both are this site.
			a := form(t, e.browser(t), e.srv.URL+"/ui/sign-in", url.Values{"api_key": {operatorKey}},
				map[string]string{"Origin": e.srv.URL, "Sec-Fetch-Site": "same-origin"})
			require.Equal(t, http.StatusSeeOther, a.status, a.body)
			require.Equal(t, tls, strings.Contains(a.header.Get("Set-Cookie"), "; Secure"), "tls %v: %s", tls, a.header.Get("Set-Cookie"))
		}
		// The http:// origin of the same host is another origin to a TLS site.
		e := setupUIOver(t, true)
		a := form(t, e.browser(t), e.srv.URL+"/ui/sign-in", url.Values{"api_key": {operatorKey}},
			map[string]string{"Origin": "http://" + strings.TrimPrefix(e.srv.URL, "https://")})
		require.Equal(t, http.StatusForbidden, a.status)
	})

	t.Run("ConsumerKeyRefusedWithAReason", func(t *testing.T) {
		t.Parallel()
		e := setupUI(t)
		a := form(t, e.browser(t), e.srv.URL+"/ui/sign-in", url.Values{"api_key": {consumerKey}}, nil)
		require.Equal(t, http.StatusForbidden, a.status)
		require.Contains(t, a.body, "That is a consumer key")
		require.Empty(t, a.header.Get("Set-Cookie"))
	})

	t.Run("WrongKeyRefused", func(t *testing.T) {
		t.Parallel()
		e := setupUI(t)
		a := form(t, e.browser(t), e.srv.URL+"/ui/sign-in", url.Values{"api_key": {"hk_nope"}}, nil)
		require.Equal(t, http.StatusUnauthorized, a.status)
		require.Contains(t, a.body, "That key is not valid")
	})

	t.Run("CrossSiteSignInRefused", func(t *testing.T) {
		t.Parallel()
		e := setupUI(t)
		a := form(t, e.browser(t), e.srv.URL+"/ui/sign-in", url.Values{"api_key": {operatorKey}},
			map[string]string{"Origin": "https://evil.example"})
		require.Equal(t, http.StatusForbidden, a.status)
		require.Empty(t, a.header.Get("Set-Cookie"))
		a = form(t, e.browser(t), e.srv.URL+"/ui/sign-in", url.Values{"api_key": {operatorKey}},
			map[string]string{"Sec-Fetch-Site": "cross-site"})
		require.Equal(t, http.StatusForbidden, a.status)
	})

	t.Run("PostWithoutCSRFRefused", func(t *testing.T) {
		t.Parallel()
		e := setupUI(t)
		c := e.browser(t)
		e.signIn(t, c, operatorKey)
		a := form(t, c, e.srv.URL+"/ui/sign-out", url.Values{}, nil)
		require.Equal(t, http.StatusForbidden, a.status)
		require.Contains(t, a.body, "CSRF")
		a = form(t, c, e.srv.URL+"/ui/sign-out", url.Values{"csrf_token": {"forged"}}, nil)
		require.Equal(t, http.StatusForbidden, a.status)
		// Still signed in.
		require.Equal(t, http.StatusOK, call(t, c, http.MethodGet, e.srv.URL+"/ui/", "", "", nil).status)
	})

	t.Run("RevokingTheKeyEndsItsSessions", func(t *testing.T) {
		t.Parallel()
		e := setupUI(t)
		c := e.browser(t)
		e.signIn(t, c, storedOperatorKey)
		a := call(t, c, http.MethodGet, e.srv.URL+"/ui/", "", "", nil)
		require.Contains(t, a.body, "operator key key_operator")
		revoke := call(t, e.srv.Client(), http.MethodDelete, e.srv.URL+"/v1/api-keys/key_operator", operatorKey, "", nil)
		require.Equal(t, http.StatusNoContent, revoke.status, revoke.body)
		a = call(t, c, http.MethodGet, e.srv.URL+"/ui/", "", "", nil)
		require.Equal(t, http.StatusSeeOther, a.status)
		require.Equal(t, "/ui/sign-in", a.header.Get("Location"))
	})

	t.Run("SessionExpiresOnTheClock", func(t *testing.T) {
		t.Parallel()
		e := setupUI(t)
		c := e.browser(t)
		e.signIn(t, c, operatorKey)
		e.clock.Advance(web.DefaultDashboardSessionTTL)
		a := call(t, c, http.MethodGet, e.srv.URL+"/ui/", "", "", nil)
		require.Equal(t, http.StatusSeeOther, a.status)
	})
}

func TestDashboardPages(t *testing.T) {
	t.Parallel()
	e := setupUI(t)
	c := e.browser(t)
	csrf := e.signIn(t, c, operatorKey)
	op := e.srv.Client()

	ep := call(t, op, http.MethodPost, e.srv.URL+"/v1/endpoints", operatorKey,
		`{"consumer_id":"cust_42","url":"http://127.0.0.1:9/hook"}`, map[string]string{"Content-Type": "application/json"})
	require.Equal(t, http.StatusCreated, ep.status, ep.body)
	epID := regexp.MustCompile(`"id":"([^"]+)"`).FindStringSubmatch(ep.body)[1]

	t.Run("OverviewShowsStats", func(t *testing.T) {
		a := call(t, c, http.MethodGet, e.srv.URL+"/ui/", "", "", nil)
		require.Equal(t, http.StatusOK, a.status)
		require.Contains(t, a.body, `id="due-now">0<`)
		require.Contains(t, a.body, `aria-current="page">Overview`)
	})

	t.Run("DeadPageEmpty", func(t *testing.T) {
		a := call(t, c, http.MethodGet, e.srv.URL+"/ui/dead", "", "", nil)
		require.Equal(t, http.StatusOK, a.status)
		require.Contains(t, a.body, `id="dead-empty"`)
	})

	t.Run("DryRunCountsThroughTheAPI", func(t *testing.T) {
		a := form(t, c, e.srv.URL+"/ui/endpoints/"+epID+"/replay", url.Values{"csrf_token": {csrf}, "dry_run": {"1"}}, nil)
		require.Equal(t, http.StatusSeeOther, a.status, a.body)
		a = call(t, c, http.MethodGet, e.srv.URL+a.header.Get("Location"), "", "", nil)
		require.Contains(t, a.body, "Dry run: 0 dead deliveries of endpoint "+epID+" would be replayed.")
	})

	t.Run("BadRateSaysWhy", func(t *testing.T) {
		a := form(t, c, e.srv.URL+"/ui/endpoints/"+epID+"/replay", url.Values{"csrf_token": {csrf}, "rate": {"fast"}}, nil)
		require.Equal(t, http.StatusSeeOther, a.status)
		a = call(t, c, http.MethodGet, e.srv.URL+a.header.Get("Location"), "", "", nil)
		require.Contains(t, a.body, "The rate must be a number")
	})

	t.Run("UnknownDeliveryIs404WithTheAPIsMessage", func(t *testing.T) {
		a := call(t, c, http.MethodGet, e.srv.URL+"/ui/deliveries/dlv_nope", "", "", nil)
		require.Equal(t, http.StatusNotFound, a.status)
		require.Contains(t, a.body, "Not found")
	})

	t.Run("ReturnAddressStaysOnTheDashboard", func(t *testing.T) {
		a := form(t, c, e.srv.URL+"/ui/dead/replay", url.Values{"csrf_token": {csrf}, "back": {"https://evil.example/"}}, nil)
		require.Equal(t, http.StatusSeeOther, a.status)
		require.Equal(t, "/ui/dead", a.header.Get("Location"))
		a = form(t, c, e.srv.URL+"/ui/dead/replay", url.Values{"csrf_token": {csrf}, "back": {"//evil.example/"}}, nil)
		require.Equal(t, "/ui/dead", a.header.Get("Location"))
	})

	t.Run("UnknownPageIs404", func(t *testing.T) {
		a := call(t, c, http.MethodGet, e.srv.URL+"/ui/nothing", "", "", nil)
		require.Equal(t, http.StatusNotFound, a.status)
		require.True(t, strings.Contains(a.body, "no such page"))
	})
}

func TestDashboardEndpoints(t *testing.T) {
	t.Parallel()
	e := setupUI(t)
	c := e.browser(t)
	csrf := e.signIn(t, c, operatorKey)
	op := e.srv.Client()
	var ids []string
	for _, consumer := range []string{"cust_42", "cust_42", "cust_7"} {
		a := call(t, op, http.MethodPost, e.srv.URL+"/v1/endpoints", operatorKey,
			`{"consumer_id":"`+consumer+`","url":"http://127.0.0.1:9/hook"}`, map[string]string{"Content-Type": "application/json"})
		require.Equal(t, http.StatusCreated, a.status, a.body)
		ids = append(ids, regexp.MustCompile(`"id":"([^"]+)"`).FindStringSubmatch(a.body)[1])
	}

	t.Run("TableFilteredByConsumer", func(t *testing.T) {
		a := call(t, c, http.MethodGet, e.srv.URL+"/ui/endpoints", "", "", nil)
		require.Equal(t, http.StatusOK, a.status)
		for _, id := range ids {
			require.Contains(t, a.body, `href="/ui/endpoints/`+id+`"`)
		}
		a = call(t, c, http.MethodGet, e.srv.URL+"/ui/endpoints?consumer_id=cust_7", "", "", nil)
		require.Contains(t, a.body, ids[2])
		require.NotContains(t, a.body, ids[0])
		a = call(t, c, http.MethodGet, e.srv.URL+"/ui/endpoints?consumer_id=nobody", "", "", nil)
		require.Contains(t, a.body, `id="endpoints-empty"`)
	})

	t.Run("DisableThenEnable", func(t *testing.T) {
		a := form(t, c, e.srv.URL+"/ui/endpoints/"+ids[0]+"/disable", url.Values{"csrf_token": {csrf}, "reason": {"maintenance"}}, nil)
		require.Equal(t, http.StatusSeeOther, a.status, a.body)
		require.Equal(t, "/ui/endpoints/"+ids[0], a.header.Get("Location"))
		a = call(t, c, http.MethodGet, e.srv.URL+"/ui/endpoints/"+ids[0], "", "", nil)
		require.Contains(t, a.body, `id="endpoint-state">disabled`)
		require.Contains(t, a.body, "maintenance")
		require.Contains(t, a.body, "Disabled: its live deliveries")
		// The API says the same.
		api := call(t, op, http.MethodGet, e.srv.URL+"/v1/endpoints/"+ids[0], operatorKey, "", nil)
		require.Contains(t, api.body, `"enabled":false`)

		a = form(t, c, e.srv.URL+"/ui/endpoints/"+ids[0]+"/enable", url.Values{"csrf_token": {csrf}}, nil)
		require.Equal(t, http.StatusSeeOther, a.status)
		a = call(t, c, http.MethodGet, e.srv.URL+"/ui/endpoints/"+ids[0], "", "", nil)
		require.Contains(t, a.body, `id="endpoint-state">enabled`)
	})

	t.Run("RotateShowsTheNewSecretOnce", func(t *testing.T) {
		before := call(t, op, http.MethodGet, e.srv.URL+"/v1/endpoints/"+ids[1], operatorKey, "", nil)
		a := form(t, c, e.srv.URL+"/ui/endpoints/"+ids[1]+"/rotate-secret", url.Values{"csrf_token": {csrf}}, nil)
		require.Equal(t, http.StatusOK, a.status, a.body)
		m := regexp.MustCompile(`id="new-secret">([^<]+)<`).FindStringSubmatch(a.body)
		require.NotNil(t, m, a.body)
		shown := html.UnescapeString(m[1]) // a secret may hold "+", which the page writes &#43;
		require.NotContains(t, before.body, shown, "a new secret")
		after := call(t, op, http.MethodGet, e.srv.URL+"/v1/endpoints/"+ids[1], operatorKey, "", nil)
		require.Contains(t, after.body, `"secret":"`+shown+`"`, "the API signs with the secret the page showed")
		require.Empty(t, a.header.Get("Set-Cookie"), "the secret is never put in a cookie")
	})

	t.Run("ActionWithoutCSRFRefused", func(t *testing.T) {
		a := form(t, c, e.srv.URL+"/ui/endpoints/"+ids[2]+"/disable", url.Values{}, nil)
		require.Equal(t, http.StatusForbidden, a.status)
		api := call(t, op, http.MethodGet, e.srv.URL+"/v1/endpoints/"+ids[2], operatorKey, "", nil)
		require.Contains(t, api.body, `"enabled":true`)
	})

	t.Run("UnknownEndpointIs404", func(t *testing.T) {
		a := call(t, c, http.MethodGet, e.srv.URL+"/ui/endpoints/ep_nope", "", "", nil)
		require.Equal(t, http.StatusNotFound, a.status)
	})
}

func TestDashboardEvents(t *testing.T) {
	t.Parallel()
	e := setupUI(t)
	c := e.browser(t)
	e.signIn(t, c, operatorKey)
	op := e.srv.Client()
	json := map[string]string{"Content-Type": "application/json"}
	a := call(t, op, http.MethodPost, e.srv.URL+"/v1/endpoints", operatorKey, `{"consumer_id":"cust_42","url":"http://127.0.0.1:9/hook"}`, json)
	require.Equal(t, http.StatusCreated, a.status, a.body)
	a = call(t, op, http.MethodPost, e.srv.URL+"/v1/events", operatorKey,
		`{"consumer_id":"cust_42","event_type":"order.created","payload":{"order":{"id":42,"note":"<b>"}}}`, json)
	require.Equal(t, http.StatusAccepted, a.status, a.body)
	evID := regexp.MustCompile(`"id":"(evt_[^"]+)"`).FindStringSubmatch(a.body)[1]
	dlvID := regexp.MustCompile(`"id":"(dlv_[^"]+)"`).FindStringSubmatch(a.body)[1]
	a = call(t, op, http.MethodPost, e.srv.URL+"/v1/events", operatorKey,
		`{"consumer_id":"cust_7","event_type":"invoice.paid","payload":{}}`, json)
	require.Equal(t, http.StatusAccepted, a.status, a.body)

	t.Run("SearchByTypeAndConsumer", func(t *testing.T) {
		a := call(t, c, http.MethodGet, e.srv.URL+"/ui/events?event_type=order.created", "", "", nil)
		require.Equal(t, http.StatusOK, a.status)
		require.Contains(t, a.body, evID)
		require.NotContains(t, a.body, "invoice.paid</td>")
		a = call(t, c, http.MethodGet, e.srv.URL+"/ui/events?consumer_id=cust_7", "", "", nil)
		require.NotContains(t, a.body, evID)
		require.Contains(t, a.body, "invoice.paid")
	})

	t.Run("SearchByTimeRange", func(t *testing.T) {
		a := call(t, c, http.MethodGet, e.srv.URL+"/ui/events?since=2026-03-04T05:00&until=2026-03-04T06:00", "", "", nil)
		require.Equal(t, http.StatusOK, a.status)
		require.Contains(t, a.body, evID)
		a = call(t, c, http.MethodGet, e.srv.URL+"/ui/events?since=2026-03-05T00:00", "", "", nil)
		require.Contains(t, a.body, `id="events-empty"`)
		a = call(t, c, http.MethodGet, e.srv.URL+"/ui/events?since=yesterday", "", "", nil)
		require.Equal(t, http.StatusBadRequest, a.status)
		require.Contains(t, a.body, "must be dates and times")
	})

	t.Run("IdGoesToTheEventWithPayloadAndDeliveries", func(t *testing.T) {
		a := call(t, c, http.MethodGet, e.srv.URL+"/ui/events?id="+evID, "", "", nil)
		require.Equal(t, http.StatusSeeOther, a.status)
		a = call(t, c, http.MethodGet, e.srv.URL+a.header.Get("Location"), "", "", nil)
		require.Equal(t, http.StatusOK, a.status)
		require.Contains(t, a.body, "{\n  &#34;order&#34;: {\n    &#34;id&#34;: 42,\n    &#34;note&#34;: &#34;&lt;b&gt;&#34;\n  }\n}")
		require.Contains(t, a.body, `href="/ui/deliveries/`+dlvID+`"`)
		a = call(t, c, http.MethodGet, e.srv.URL+"/ui/events/evt_nope", "", "", nil)
		require.Equal(t, http.StatusNotFound, a.status)
	})
}

func TestDashboardDeliveryActions(t *testing.T) {
	t.Parallel()
	e := setupUI(t)
	c := e.browser(t)
	csrf := e.signIn(t, c, operatorKey)
	op := e.srv.Client()
	json := map[string]string{"Content-Type": "application/json"}
	a := call(t, op, http.MethodPost, e.srv.URL+"/v1/endpoints", operatorKey, `{"consumer_id":"cust_42","url":"http://127.0.0.1:9/hook"}`, json)
	require.Equal(t, http.StatusCreated, a.status, a.body)
	a = call(t, op, http.MethodPost, e.srv.URL+"/v1/events", operatorKey, `{"consumer_id":"cust_42","event_type":"order.created","payload":{}}`, json)
	require.Equal(t, http.StatusAccepted, a.status, a.body)
	dlv := regexp.MustCompile(`"id":"(dlv_[^"]+)"`).FindStringSubmatch(a.body)[1]
	page := e.srv.URL + "/ui/deliveries/" + dlv
	status := func() string {
		a := call(t, op, http.MethodGet, e.srv.URL+"/v1/deliveries/"+dlv, operatorKey, "", nil)
		return regexp.MustCompile(`"status":"([a-z]+)"`).FindStringSubmatch(a.body)[1]
	}

	// No dispatcher runs here: the delivery stays pending until acted on.
	a = call(t, c, http.MethodGet, page, "", "", nil)
	require.Contains(t, a.body, `id="delivery-status">pending<`)

	t.Run("ReplayOfALiveDeliverySaysWhyNot", func(t *testing.T) {
		a := form(t, c, page+"/replay", url.Values{"csrf_token": {csrf}}, nil)
		require.Equal(t, http.StatusSeeOther, a.status)
		a = call(t, c, http.MethodGet, page, "", "", nil)
		require.Contains(t, a.body, `class="flash error"`)
		require.Contains(t, a.body, "Not done: ")
		require.Equal(t, "pending", status())
	})

	t.Run("SelectionWithALiveDeliveryNamesIt", func(t *testing.T) {
		a := form(t, c, e.srv.URL+"/ui/dead/replay", url.Values{"csrf_token": {csrf}, "delivery_id": {dlv}}, nil)
		require.Equal(t, http.StatusSeeOther, a.status)
		a = call(t, c, http.MethodGet, e.srv.URL+"/ui/dead", "", "", nil)
		require.Contains(t, a.body, "Replayed 0 of 1 deliveries. Not replayed: "+dlv+": ")
	})

	t.Run("CancelThenReplay", func(t *testing.T) {
		a := form(t, c, page+"/cancel", url.Values{"csrf_token": {csrf}}, nil)
		require.Equal(t, http.StatusSeeOther, a.status)
		require.Equal(t, "/ui/deliveries/"+dlv, a.header.Get("Location"))
		a = call(t, c, http.MethodGet, page, "", "", nil)
		require.Contains(t, a.body, `<div class="flash ok" role="status">Cancelled.</div>`)
		require.Contains(t, a.body, `id="delivery-status">cancelled<`)
		require.Equal(t, "cancelled", status())

		a = form(t, c, page+"/replay", url.Values{"csrf_token": {csrf}}, nil)
		require.Equal(t, http.StatusSeeOther, a.status)
		a = call(t, c, http.MethodGet, page, "", "", nil)
		require.Contains(t, a.body, "Replayed: the delivery is due now.")
		require.Equal(t, "pending", status())
	})
}
