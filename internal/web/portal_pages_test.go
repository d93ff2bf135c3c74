package web_test

import (
	"encoding/json"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhooks/herald"
	"github.com/heraldhooks/herald/internal/store"
)

// portal is a signed-in portal browser of one consumer.
type portal struct {
	t    *testing.T
	e    *env
	b    *http.Client
	csrf string
}

// openPortal signs a new browser in as consumer.
func (e *env) openPortal(t *testing.T, consumer string) *portal {
	t.Helper()
	b := e.browser(t)
	e.signIn(t, b, consumer)
	_, csrf := e.home(t, b)
	require.NotEmpty(t, csrf)
	return &portal{t: t, e: e, b: b, csrf: csrf}
}

// get reads a portal page.
func (p *portal) get(path string) answer {
	p.t.Helper()
	return call(p.t, p.b, "GET", p.e.srv.URL+path, "", "", nil)
}

// post sends a portal form, as the page does, from the portal's origin.
func (p *portal) post(path string, form url.Values) answer {
	p.t.Helper()
	if form == nil {
		form = url.Values{}
	}
	form.Set("csrf_token", p.csrf)
	return call(p.t, p.b, "POST", p.e.srv.URL+path, "", form.Encode(), map[string]string{
		"Content-Type": "application/x-www-form-urlencoded", "Origin": p.e.srv.URL, "Sec-Fetch-Site": "same-origin",
	})
}

// follow reads the page a 303 leads to.
func (p *portal) follow(a answer) answer {
	p.t.Helper()
	require.Equal(p.t, http.StatusSeeOther, a.status, a.body)
	return p.get(a.header.Get("Location"))
}

// operator makes a /v1 call with the operator key and decodes its answer.
func (e *env) operator(t *testing.T, method, path, body string, want int, out any) {
	t.Helper()
	a := call(t, e.srv.Client(), method, e.srv.URL+path, operatorKey, body, nil)
	require.Equal(t, want, a.status, a.body)
	if out != nil {
		require.NoError(t, json.Unmarshal([]byte(a.body), out))
	}
}

type idOnly struct {
	ID string `json:"id"`
}

// endpointFor makes an endpoint of consumer through the API.
func (e *env) endpointFor(t *testing.T, consumer, u string, types ...string) string {
	t.Helper()
	body := map[string]any{"consumer_id": consumer, "url": u, "retry_schedule": []string{"0s"}}
	if len(types) > 0 {
		body["event_types"] = types
	}
	b, err := json.Marshal(body)
	require.NoError(t, err)
	var ep idOnly
	e.operator(t, "POST", "/v1/endpoints", string(b), http.StatusCreated, &ep)
	return ep.ID
}

type ingested struct {
	ID         string `json:"id"`
	Deliveries []struct {
		ID         string `json:"id"`
		EndpointID string `json:"endpoint_id"`
	} `json:"deliveries"`
}

// send sends an event of consumer through the API.
func (e *env) send(t *testing.T, consumer, eventType, payload string) ingested {
	t.Helper()
	var out ingested
	e.operator(t, "POST", "/v1/events", `{"consumer_id":"`+consumer+`","event_type":"`+eventType+`","payload":`+payload+`}`, http.StatusAccepted, &out)
	return out
}

// attempt claims every due delivery and records one attempt of each with
// the outcome decide gives.
func (e *env) attempt(t *testing.T, decide func(id string) store.DeliveryOutcome) {
	t.Helper()
	claimed, err := e.store.DeliveryClaim(t.Context(), &store.DeliveryClaimParams{Limit: 100, LeaseMargin: time.Second, Now: e.clock.Now()})
	require.NoError(t, err)
	require.NotEmpty(t, claimed)
	var outcomes []store.DeliveryOutcome
	for _, c := range claimed {
		o := decide(c.Delivery.ID)
		o.Lease = store.Lease{DeliveryID: c.Delivery.ID, LeaseToken: c.LeaseToken}
		outcomes = append(outcomes, o)
	}
	_, err = e.store.DeliveryCompleteMany(t.Context(), &store.DeliveryCompleteManyParams{Outcomes: outcomes, Now: e.clock.Now()})
	require.NoError(t, err)
}

// failed is an outcome of one attempt answered 503, to retry or dead.
func (e *env) failed(status herald.Status) store.DeliveryOutcome {
	o := store.DeliveryOutcome{
		Attempt: herald.Attempt{Number: 1, AttemptedAt: e.clock.Now(), Duration: 42 * time.Millisecond,
			StatusCode: 503, Response: []byte(`{"busy":true}`), Error: "HTTP 503"},
		Status: status,
	}
	if status == herald.StatusDead {
		o.DeadReason = herald.DeadExhausted
	} else {
		o.RetryIn = time.Minute
	}
	return o
}

var (
	secretShown = regexp.MustCompile(`<code id="secret">([^<]+)</code>`)
	anyWhsec    = regexp.MustCompile(`whsec_[A-Za-z0-9+/=&#;]+`)
)

func TestPortalEndpoints(t *testing.T) {
	t.Parallel()
	e := setup(t, false)
	e.operator(t, "POST", "/v1/event-types", `{"name":"order.created","description":"An order was placed."}`, http.StatusCreated, nil)
	e.operator(t, "POST", "/v1/event-types", `{"name":"invoice.paid","description":"An invoice was paid."}`, http.StatusCreated, nil)
	p := e.openPortal(t, "cust_42")

	t.Run("ThePickerShowsTheCatalogWithHeraldsOwnApart", func(t *testing.T) {
		a := p.get("/portal/endpoints/new")
		require.Equal(t, http.StatusOK, a.status, a.body)
		own, builtIn, ok := strings.Cut(a.body, "Notifications from Herald")
		require.True(t, ok, "the built-in types have their own group")
		for _, name := range []string{"order.created", "invoice.paid"} {
			require.Contains(t, own, `name="event_type" value="`+name+`"`)
			require.NotContains(t, builtIn, `value="`+name+`"`)
		}
		require.Contains(t, own, "An order was placed.")
		require.Contains(t, own, `name="other_types"`)
		for _, b := range herald.NotificationTypes() {
			require.Contains(t, builtIn, `name="event_type" value="`+b.Name+`"`)
			require.NotContains(t, own, `value="`+b.Name+`"`)
		}
	})

	var id string
	t.Run("Create", func(t *testing.T) {
		a := p.post("/portal/endpoints", url.Values{
			"url": {"https://hooks.example.com/in"}, "description": {"orders"},
			"event_type": {"order.created", "herald.endpoint.disabled"}, "other_types": {"refund.*, invoice.*"},
		})
		require.Equal(t, http.StatusSeeOther, a.status, a.body)
		id = strings.TrimPrefix(a.header.Get("Location"), "/portal/endpoints/")
		require.Regexp(t, `^ep_`, id)
		page := p.follow(a)
		require.Equal(t, http.StatusOK, page.status)
		require.Contains(t, page.body, "Endpoint created")
		var ep struct {
			ConsumerID  string   `json:"consumer_id"`
			URL         string   `json:"url"`
			Description string   `json:"description"`
			EventTypes  []string `json:"event_types"`
		}
		e.operator(t, "GET", "/v1/endpoints/"+id, "", http.StatusOK, &ep)
		require.Equal(t, "cust_42", ep.ConsumerID, "the portal's consumer owns it")
		require.Equal(t, "https://hooks.example.com/in", ep.URL)
		require.Equal(t, "orders", ep.Description)
		require.Equal(t, []string{"order.created", "herald.endpoint.disabled", "refund.*", "invoice.*"}, ep.EventTypes)

		list := p.get("/portal/")
		require.Contains(t, list.body, `href="/portal/endpoints/`+id+`"`)
		require.Contains(t, list.body, "https://hooks.example.com/in")
	})

	t.Run("ARefusedFormComesBackFilledWithTheReason", func(t *testing.T) {
		a := p.post("/portal/endpoints", url.Values{"url": {"ftp://nope"}, "description": {"kept"}, "other_types": {"order.*"}})
		require.Equal(t, http.StatusBadRequest, a.status)
		require.Contains(t, a.body, `id="form-error"`)
		require.Contains(t, a.body, "url")
		require.Contains(t, a.body, `value="kept"`)
		require.Contains(t, a.body, `value="order.*"`)
	})

	t.Run("Edit", func(t *testing.T) {
		form := p.get("/portal/endpoints/" + id + "/edit")
		require.Equal(t, http.StatusOK, form.status)
		require.Regexp(t, `value="order.created" checked`, form.body)
		require.NotRegexp(t, `value="invoice.paid" checked`, form.body)
		require.Contains(t, form.body, `value="refund.*, invoice.*"`, "patterns outside the catalog are in the free field")
		a := p.post("/portal/endpoints/"+id, url.Values{"url": {"https://hooks.example.com/v2"}, "description": {"all orders"}, "other_types": {"order.*"}})
		require.Contains(t, p.follow(a).body, "Saved.")
		var ep struct {
			URL        string   `json:"url"`
			EventTypes []string `json:"event_types"`
		}
		e.operator(t, "GET", "/v1/endpoints/"+id, "", http.StatusOK, &ep)
		require.Equal(t, "https://hooks.example.com/v2", ep.URL)
		require.Equal(t, []string{"order.*"}, ep.EventTypes)
		// Nothing ticked: every type again.
		p.follow(p.post("/portal/endpoints/"+id, url.Values{"url": {"https://hooks.example.com/v2"}}))
		e.operator(t, "GET", "/v1/endpoints/"+id, "", http.StatusOK, &ep)
		require.Equal(t, []string{"*"}, ep.EventTypes)
	})

	t.Run("TheSecretIsHiddenUntilAskedFor", func(t *testing.T) {
		var ep struct {
			Secret string `json:"secret"`
		}
		e.operator(t, "GET", "/v1/endpoints/"+id, "", http.StatusOK, &ep)
		page := p.get("/portal/endpoints/" + id)
		require.Equal(t, http.StatusOK, page.status)
		require.NotRegexp(t, anyWhsec, page.body)
		require.Contains(t, page.body, `id="reveal"`)
		a := p.post("/portal/endpoints/"+id+"/secret", nil)
		require.Equal(t, http.StatusOK, a.status, "shown on the answer to the POST, not through a redirect")
		m := secretShown.FindStringSubmatch(a.body)
		require.NotNil(t, m, a.body)
		require.Equal(t, ep.Secret, html.UnescapeString(m[1]))
		for _, c := range (&http.Response{Header: a.header}).Cookies() {
			require.NotContains(t, c.Value, "whsec_")
		}
		require.NotRegexp(t, anyWhsec, p.get("/portal/endpoints/"+id).body, "hidden again on the next view")
	})

	t.Run("RotateShowsUntilWhenThePreviousSecretSigns", func(t *testing.T) {
		var before struct {
			Secret string `json:"secret"`
		}
		e.operator(t, "GET", "/v1/endpoints/"+id, "", http.StatusOK, &before)
		a := p.post("/portal/endpoints/"+id+"/rotate-secret", nil)
		require.Equal(t, http.StatusOK, a.status, a.body)
		m := secretShown.FindStringSubmatch(a.body)
		require.NotNil(t, m, a.body)
		var after struct {
			Secret                  string    `json:"secret"`
			PreviousSecretExpiresAt time.Time `json:"previous_secret_expires_at"`
		}
		e.operator(t, "GET", "/v1/endpoints/"+id, "", http.StatusOK, &after)
		require.Equal(t, after.Secret, html.UnescapeString(m[1]))
		require.NotEqual(t, before.Secret, after.Secret)
		require.Equal(t, e.clock.Now().Add(24*time.Hour), after.PreviousSecretExpiresAt)
		require.Contains(t, a.body, "Until <strong>"+after.PreviousSecretExpiresAt.Format("2006-01-02 15:04:05")+" UTC</strong>")
		require.Contains(t, a.body, "both the new and the previous secret")
	})

	t.Run("DisableAndEnable", func(t *testing.T) {
		page := p.follow(p.post("/portal/endpoints/"+id+"/disable", nil))
		require.Contains(t, page.body, `id="endpoint-state">disabled`)
		require.Contains(t, page.body, "This endpoint is disabled")
		require.NotContains(t, page.body, `id="send-test"`, "a disabled endpoint takes no test event")
		page = p.follow(p.post("/portal/endpoints/"+id+"/enable", nil))
		require.Contains(t, page.body, `id="endpoint-state">enabled`)
		require.NotContains(t, page.body, `class="notice`)
	})

	t.Run("DeleteAsksFirst", func(t *testing.T) {
		ask := p.get("/portal/endpoints/" + id + "/delete")
		require.Equal(t, http.StatusOK, ask.status)
		require.Contains(t, ask.body, "cannot be undone")
		e.operator(t, "GET", "/v1/endpoints/"+id, "", http.StatusOK, nil)
		list := p.follow(p.post("/portal/endpoints/"+id+"/delete", nil))
		require.Contains(t, list.body, "deleted")
		require.NotContains(t, list.body, `href="/portal/endpoints/`+id+`"`)
		e.operator(t, "GET", "/v1/endpoints/"+id, "", http.StatusNotFound, nil)
	})
}

func TestPortalMessageLog(t *testing.T) {
	t.Parallel()
	e := setup(t, false)
	orders := e.endpointFor(t, "cust_42", "https://a.example.com/orders", "order.*")
	all := e.endpointFor(t, "cust_42", "https://b.example.com/all")
	e.endpointFor(t, "cust_7", "https://c.example.com/theirs")
	created := e.send(t, "cust_42", "order.created", `{"order":{"id":42,"total":"9.99"}}`)
	e.clock.Advance(time.Millisecond)
	paid := e.send(t, "cust_42", "invoice.paid", `{"n":1}`)
	e.send(t, "cust_7", "order.created", `{"secret":"cust_7's"}`)
	require.Len(t, created.Deliveries, 2)
	require.Len(t, paid.Deliveries, 1)
	e.clock.Advance(time.Second)
	e.attempt(t, func(string) store.DeliveryOutcome { return e.failed(herald.StatusDead) })
	p := e.openPortal(t, "cust_42")

	rows := regexp.MustCompile(`data-delivery="(dlv_\w+)"`)
	logOf := func(query string) []string {
		t.Helper()
		a := p.get("/portal/deliveries" + query)
		require.Equal(t, http.StatusOK, a.status, a.body)
		var ids []string
		for _, m := range rows.FindAllStringSubmatch(a.body, -1) {
			ids = append(ids, m[1])
		}
		return ids
	}
	ofEndpoint := func(res ingested, ep string) string {
		for _, d := range res.Deliveries {
			if d.EndpointID == ep {
				return d.ID
			}
		}
		t.Fatalf("no delivery to %s", ep)
		return ""
	}
	toOrders, toAll, paidToAll := ofEndpoint(created, orders), ofEndpoint(created, all), paid.Deliveries[0].ID

	require.ElementsMatch(t, []string{toOrders, toAll, paidToAll}, logOf(""), "the consumer's own, no one else's")
	require.Equal(t, paidToAll, logOf("")[0], "newest first")
	require.ElementsMatch(t, []string{toOrders}, logOf("?endpoint_id="+orders))
	require.ElementsMatch(t, []string{toOrders, toAll}, logOf("?event_type=order.created"))
	require.ElementsMatch(t, []string{paidToAll}, logOf("?event_type=invoice.paid&status=dead"))
	require.Empty(t, logOf("?status=delivered"))
	a := p.get("/portal/deliveries?status=lost")
	require.Equal(t, http.StatusBadRequest, a.status)
	require.Contains(t, a.body, "status must be")

	t.Run("ADeliverysPage", func(t *testing.T) {
		page := p.get("/portal/deliveries/" + toOrders)
		require.Equal(t, http.StatusOK, page.status)
		require.Contains(t, page.body, `id="delivery-status">dead`)
		require.Contains(t, page.body, created.ID)
		require.Contains(t, page.body, "order.created")
		require.Contains(t, page.body, "42 ms")
		require.Contains(t, page.body, `<td class="status-code">503</td>`)
		require.Contains(t, page.body, html.EscapeString(`{"busy":true}`))
		require.Contains(t, page.body, "HTTP 503")
		require.Contains(t, page.body, html.EscapeString(`"total": "9.99"`), "the payload pretty-printed")
		require.Contains(t, page.body, `id="replay"`)
	})

	t.Run("ReplayADeadDelivery", func(t *testing.T) {
		page := p.follow(p.post("/portal/deliveries/"+toOrders+"/replay", nil))
		require.Contains(t, page.body, "Replayed")
		require.Contains(t, page.body, `id="delivery-status">pending`)
		require.NotContains(t, page.body, `id="replay"`, "only a dead delivery offers a replay")
	})

	t.Run("AnEventsPage", func(t *testing.T) {
		page := p.get("/portal/events/" + created.ID)
		require.Equal(t, http.StatusOK, page.status)
		require.Contains(t, page.body, toOrders)
		require.Contains(t, page.body, toAll)
	})

	t.Run("AFailingEndpointSaysWhy", func(t *testing.T) {
		page := p.get("/portal/endpoints/" + all)
		require.Contains(t, page.body, "This endpoint is failing")
		require.Contains(t, page.body, "HTTP 503")
		require.Contains(t, p.get("/portal/").body, "This endpoint is failing")
	})
}

func TestPortalSendsATestEvent(t *testing.T) {
	t.Parallel()
	e := setup(t, false)
	target := e.endpointFor(t, "cust_42", "https://a.example.com/orders", "order.*")
	other := e.endpointFor(t, "cust_42", "https://b.example.com/all")
	p := e.openPortal(t, "cust_42")
	a := p.post("/portal/endpoints/"+target+"/test", nil)
	require.Equal(t, http.StatusSeeOther, a.status, a.body)
	require.Regexp(t, `^/portal/deliveries/dlv_\w+$`, a.header.Get("Location"))
	page := p.follow(a)
	require.Contains(t, page.body, "Test event")
	require.Contains(t, page.body, `id="delivery-status">pending`)
	require.Contains(t, page.body, "herald.test")
	require.Contains(t, page.body, target)
	var list struct {
		Data []idOnly `json:"data"`
	}
	e.operator(t, "GET", "/v1/deliveries?endpoint_id="+other, "", http.StatusOK, &list)
	require.Empty(t, list.Data, "the other endpoint got nothing")
}

// TestPortalShowsNothingOfAnotherConsumer: every page and action of the
// portal, given another consumer's endpoint, delivery or event, answers
// the portal's 404 page and changes nothing.
func TestPortalShowsNothingOfAnotherConsumer(t *testing.T) {
	t.Parallel()
	e := setup(t, false)
	theirs := e.endpointFor(t, "cust_7", "https://theirs.example.com/hooks")
	ev := e.send(t, "cust_7", "order.created", `{"who":"cust_7"}`)
	e.clock.Advance(time.Second)
	e.attempt(t, func(string) store.DeliveryOutcome { return e.failed(herald.StatusDead) })
	dlv := ev.Deliveries[0].ID
	p := e.openPortal(t, "cust_42")

	for _, path := range []string{
		"/portal/endpoints/" + theirs, "/portal/endpoints/" + theirs + "/edit", "/portal/endpoints/" + theirs + "/delete",
		"/portal/deliveries/" + dlv, "/portal/events/" + ev.ID, "/portal/nowhere/else",
	} {
		a := p.get(path)
		require.Equal(t, http.StatusNotFound, a.status, path)
		require.Contains(t, a.body, "<h1>Not found</h1>", path)
		require.Contains(t, a.body, "Signed in as consumer cust_42", "%s: the portal's own page", path)
		require.NotContains(t, a.body, "theirs.example.com", path)
	}
	for _, path := range []string{
		"/portal/endpoints/" + theirs, "/portal/endpoints/" + theirs + "/delete", "/portal/endpoints/" + theirs + "/disable",
		"/portal/endpoints/" + theirs + "/secret", "/portal/endpoints/" + theirs + "/rotate-secret",
		"/portal/endpoints/" + theirs + "/test", "/portal/deliveries/" + dlv + "/replay",
	} {
		a := p.post(path, url.Values{"url": {"https://mine.example.com/"}})
		require.Equal(t, http.StatusNotFound, a.status, path)
		require.NotRegexp(t, anyWhsec, a.body, path)
	}
	var ep struct {
		URL     string `json:"url"`
		Enabled bool   `json:"enabled"`
	}
	e.operator(t, "GET", "/v1/endpoints/"+theirs, "", http.StatusOK, &ep)
	require.Equal(t, "https://theirs.example.com/hooks", ep.URL)
	require.True(t, ep.Enabled)
	var d struct {
		Status string `json:"status"`
	}
	e.operator(t, "GET", "/v1/deliveries/"+dlv, "", http.StatusOK, &d)
	require.Equal(t, "dead", d.Status)
	require.NotContains(t, p.get("/portal/deliveries?endpoint_id="+theirs).body, dlv)
}

// TestPortalFraming: with --portal-frame-ancestors, the portal's CSP names
// those origins (and it sends no X-Frame-Options), and a link opened
// inside a frame gives a cookie a browser sends from a frame of another
// site: SameSite=None, Secure, Partitioned. Opened as a page of its own,
// the cookie stays SameSite=Strict; without the setting no one may frame
// the portal.
func TestPortalFraming(t *testing.T) {
	t.Parallel()
	framed := setup(t, false, "https://app.example.com", "https://admin.example.com")
	b := framed.browser(t)
	u, _ := framed.link(t, "cust_42", "")
	a := framed.openLink(t, b, u, map[string]string{"Sec-Fetch-Dest": "iframe"})
	require.Equal(t, http.StatusSeeOther, a.status, a.body)
	cookies := (&http.Response{Header: a.header}).Cookies()
	require.Len(t, cookies, 1)
	require.Equal(t, http.SameSiteNoneMode, cookies[0].SameSite)
	require.True(t, cookies[0].Secure)
	require.True(t, cookies[0].Partitioned)
	require.True(t, cookies[0].HttpOnly)
	home := call(t, b, "GET", framed.srv.URL+"/portal/", "", "", map[string]string{"Sec-Fetch-Dest": "iframe"})
	require.Equal(t, http.StatusOK, home.status)
	csp := home.header.Get("Content-Security-Policy")
	require.Contains(t, csp, "frame-ancestors https://app.example.com https://admin.example.com;")
	require.NotContains(t, csp, "'none'; base-uri")
	require.Empty(t, home.header.Get("X-Frame-Options"))

	own := framed.browser(t)
	u, _ = framed.link(t, "cust_42", "")
	a = framed.openLink(t, own, u, map[string]string{"Sec-Fetch-Dest": "document"})
	cookies = (&http.Response{Header: a.header}).Cookies()
	require.Len(t, cookies, 1)
	require.Equal(t, http.SameSiteStrictMode, cookies[0].SameSite, "a page of its own")
	require.False(t, cookies[0].Partitioned)

	plain := setup(t, false)
	b = plain.browser(t)
	u, _ = plain.link(t, "cust_42", "")
	a = plain.openLink(t, b, u, map[string]string{"Sec-Fetch-Dest": "iframe"})
	cookies = (&http.Response{Header: a.header}).Cookies()
	require.Len(t, cookies, 1)
	require.Equal(t, http.SameSiteStrictMode, cookies[0].SameSite, "framing not allowed: no cross-site cookie")
	home, _ = plain.home(t, b)
	require.Contains(t, home.header.Get("Content-Security-Policy"), "frame-ancestors 'none'")
	require.Equal(t, "DENY", home.header.Get("X-Frame-Options"))
	require.Equal(t, "same-origin", home.header.Get("Referrer-Policy"))
}

func TestPortalEventTypes(t *testing.T) {
	t.Parallel()
	e := setup(t, false)
	e.operator(t, "POST", "/v1/event-types", `{"name":"order.created","description":"An order was placed.",`+
		`"schema":{"type":"object","properties":{"order_id":{"type":"string"}}},"example":{"order_id":"ord_1"}}`, http.StatusCreated, nil)
	e.operator(t, "POST", "/v1/event-types", `{"name":"order.note"}`, http.StatusCreated, nil)
	p := e.openPortal(t, "cust_42")

	a := p.get("/portal/event-types")
	require.Equal(t, http.StatusOK, a.status, a.body)
	require.Contains(t, a.body, `<a href="/portal/event-types" aria-current="page">Event types</a>`)
	text := html.UnescapeString(a.body)
	section := func(name string) string {
		i := strings.Index(text, `<section class="eventtype" id="type-`+name+`">`)
		require.GreaterOrEqual(t, i, 0, name)
		s := text[i:]
		return s[:strings.Index(s, "</section>")]
	}
	order := section("order.created")
	require.Contains(t, order, "An order was placed.")
	require.Contains(t, order, "<pre class=\"example\">{\n  \"order_id\": \"ord_1\"\n}</pre>")
	require.Contains(t, order, "<pre class=\"schema\">{\n  \"type\": \"object\",")
	note := section("order.note")
	require.Contains(t, note, "No example.")
	require.Contains(t, note, "No schema")
	builtIn := herald.NotificationTypes()[0]
	require.Contains(t, section(builtIn.Name), builtIn.Description)
	require.NotContains(t, a.body, "<form method=\"post\" action=\"/ui/", "the portal's list is read-only")
	require.NotContains(t, a.body, "eventtype-form")

	// The portal's session is not the dashboard's, nor is its key an operator's.
	ui := p.get("/ui/event-types")
	require.NotEqual(t, http.StatusOK, ui.status)
	require.NotContains(t, ui.body, "order.created")
}
