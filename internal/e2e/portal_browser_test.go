package e2e

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/heraldhooks/herald/internal/store/sqlitestore/sqlitetest"
)

// portalLink makes a one-time portal link for consumer.
func (e *env) portalLink(consumer string) string {
	e.t.Helper()
	var link struct {
		URL string `json:"url"`
	}
	e.must(http.StatusCreated, "POST", "/v1/consumers/"+consumer+"/portal-sessions", map[string]any{"ttl": "5m"}, &link)
	return link.URL
}

// TestPortalInABrowser: a consumer opens a portal link in a real browser,
// adds an endpoint that points at a real receiver, sends it a test event,
// finds it in the message log with its attempt (succeeded), and cannot
// open another consumer's delivery by its address (the portal's 404 page).
func TestPortalInABrowser(t *testing.T) {
	t.Parallel()
	e := setup(t, "sqlite://"+sqlitetest.Path(t))
	var hits atomic.Int64
	rc := newReceiver(t, e.clock, func(_ int, _ *http.Request, w http.ResponseWriter) {
		hits.Add(1)
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write([]byte(`{"ok":true}`))
	})
	e.must(http.StatusCreated, "POST", "/v1/event-types", map[string]any{
		"name": "order.created", "description": "An order was placed.", "example": map[string]any{"order_id": "o_1"},
	}, nil)
	e.must(http.StatusCreated, "POST", "/v1/event-types", map[string]any{"name": "invoice.paid", "description": "An invoice was paid."}, nil)
	theirs := e.createEndpoint(map[string]any{"consumer_id": "globex", "url": rc.URL + "/globex"})
	theirDelivery := e.send("globex", "order.created", `{"order_id":"o_9"}`).Deliveries[0].ID
	rc.waitHits(t, 1)
	e.waitStatus(theirDelivery, "delivered")
	e.settle()

	ctx := newBrowser(t)
	do, text := browserSteps(t, ctx)

	// The link answers a page whose button opens the session: the GET
	// alone (a mail scanner's, a chat preview's) opens nothing.
	do(chromedp.Navigate(e.portalLink("acme")), chromedp.WaitVisible(chromedp.CSS("#open-portal")))
	require.NotContains(t, text("main"), "acme")
	do(chromedp.Click(chromedp.CSS("#open-portal")), chromedp.WaitVisible(chromedp.CSS("#new-endpoint")))
	require.Contains(t, text("header.top"), "Signed in as consumer acme")

	// Adding an endpoint, with a type ticked in the picker.
	do(
		chromedp.Click(chromedp.CSS("#new-endpoint")),
		chromedp.WaitVisible(chromedp.CSS("#url")),
		chromedp.SendKeys(chromedp.CSS("#url"), rc.URL+"/acme"),
		chromedp.SendKeys(chromedp.CSS("#description"), "orders"),
		chromedp.Click(chromedp.CSS(`input[value="order.created"]`)),
	)
	screenshot(t, ctx, "portal-endpoint-new.png")
	do(chromedp.Click(chromedp.CSS("#save")), chromedp.WaitVisible(chromedp.CSS("#endpoint-state")))
	require.Equal(t, "enabled", text("#endpoint-state"))
	require.Equal(t, "order.created", text("#endpoint-types"))
	require.NotEmpty(t, text("#endpoint-id"))

	// The secret, on request.
	do(chromedp.Click(chromedp.CSS("#reveal")), chromedp.WaitVisible(chromedp.CSS("#secret")))
	require.True(t, strings.HasPrefix(text("#secret"), "whsec_"))

	// A test event: the button leads to its delivery, which the receiver
	// gets once the dispatcher has run.
	do(chromedp.Click(chromedp.CSS("#send-test")), chromedp.WaitVisible(chromedp.CSS("#delivery-status")))
	loc, err := chromedp.Run(ctx, chromedp.Location())
	require.NoError(t, err)
	u, err := url.Parse(loc)
	require.NoError(t, err)
	dlv := strings.TrimPrefix(u.Path, "/portal/deliveries/")
	require.True(t, strings.HasPrefix(dlv, "dlv_"), loc)
	e.waitStatus(dlv, "delivered")
	e.settle()
	require.Equal(t, int64(2), hits.Load(), "one for globex, one test event")
	got := rc.all()[1]
	require.Equal(t, "herald.test", got.Headers.Get("X-Webhook-Event"))
	require.Contains(t, string(got.Body), `"endpoint_id":"`)

	do(chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS("#attempts")))
	require.Equal(t, "delivered", text("#delivery-status"))
	require.Equal(t, "200", text("#attempts tbody tr td.status-code"))
	require.Contains(t, text("#payload"), `"message"`)
	screenshot(t, ctx, "portal-delivery.png")

	// The message log lists it.
	do(chromedp.Navigate(e.api.URL+"/portal/deliveries"), chromedp.WaitVisible(chromedp.CSS("#log")))
	row := `#log tr[data-delivery="` + dlv + `"]`
	do(chromedp.WaitVisible(chromedp.CSS(row)))
	require.Contains(t, text(row), "herald.test")
	require.Contains(t, text(row), "delivered")
	screenshot(t, ctx, "portal-log.png")

	do(chromedp.Navigate(e.api.URL+"/portal/"), chromedp.WaitVisible(chromedp.CSS("#endpoints")))
	screenshot(t, ctx, "portal-endpoints.png")

	// Another consumer's delivery and endpoint, by address: not found.
	for _, path := range []string{"/portal/deliveries/" + theirDelivery, "/portal/endpoints/" + theirs.ID} {
		do(chromedp.Navigate(e.api.URL+path), chromedp.WaitVisible(chromedp.CSS("main h1")))
		require.Equal(t, "Not found", text("main h1"), path)
		require.NotContains(t, text("main"), "globex", path)
	}
}

// TestPortalFramedInABrowser: with --portal-frame-ancestors naming another
// site's origin, a page of that site (http://localhost:…, another site
// than the portal's http://127.0.0.1:…) shows the portal in an iframe, in
// a browser that blocks third-party cookies; the link opened in the frame
// signs in (its partitioned cookie is sent from the frame), and a form in
// the frame (sending a test event) goes through its CSRF checks. It fails
// with the portal's SameSite=Strict cookie (not sent into a cross-site
// frame) and with SameSite=None alone (a blocked third-party cookie): the
// cookie must be partitioned (CHIPS).
func TestPortalFramedInABrowser(t *testing.T) {
	t.Parallel()
	var frameSrc atomic.Value
	parent := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, `<!doctype html><html><body><h1 id="app">Operator's app</h1><iframe id="portal" src="%s" width="1100" height="800"></iframe></body></html>`,
			frameSrc.Load())
	}))
	t.Cleanup(parent.Close)
	parentURL := strings.Replace(parent.URL, "127.0.0.1", "localhost", 1)
	e := setup(t, "sqlite://"+sqlitetest.Path(t), func(o *options) { o.frameAncestors = []string{parentURL} })
	rc := newReceiver(t, e.clock, func(_ int, _ *http.Request, w http.ResponseWriter) { w.WriteHeader(http.StatusOK) })
	ep := e.createEndpoint(map[string]any{"consumer_id": "acme", "url": rc.URL + "/acme"})

	ctx := newBrowser(t,
		// Third-party cookies blocked, as browsers are moving to.
		chromedp.Flag("test-third-party-cookie-phaseout", true),
		// Keep the cross-site frame in the page's process, where a
		// query can reach into it.
		chromedp.Flag("disable-site-isolation-trials", true),
		chromedp.Flag("disable-features", "IsolateOrigins,site-per-process"),
	)
	// frameText reads the text of sel inside the #portal iframe, as the
	// frame shows it now; err while it is not there (yet).
	frameText := func(sel string) (string, error) {
		qctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		frames, err := chromedp.Run(qctx, chromedp.Nodes(chromedp.CSS("#portal")))
		if err != nil {
			return "", err
		}
		return chromedp.Run(qctx, chromedp.Text(chromedp.CSS(sel), chromedp.FromNode(frames[0])))
	}
	frameClick := func(sel string) {
		t.Helper()
		frames, err := chromedp.Run(ctx, chromedp.Nodes(chromedp.CSS("#portal")))
		require.NoError(t, err)
		require.NoError(t, chromedp.Do(ctx, chromedp.Click(chromedp.CSS(sel), chromedp.FromNode(frames[0]))))
	}
	// The dashboard stays unframeable whatever the portal allows.
	res, err := http.Get(e.api.URL + "/ui/sign-in")
	require.NoError(t, err)
	res.Body.Close()
	require.Contains(t, res.Header.Get("Content-Security-Policy"), "frame-ancestors 'none'")
	require.Equal(t, "DENY", res.Header.Get("X-Frame-Options"))
	res, err = http.Get(e.api.URL + "/portal/nowhere/else")
	require.NoError(t, err)
	res.Body.Close()
	require.Contains(t, res.Header.Get("Content-Security-Policy"), "frame-ancestors "+parentURL+";")

	frameSrc.Store(e.portalLink("acme"))
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(parentURL+"/"), chromedp.WaitVisible(chromedp.CSS("#app"))))
	waitFor(t, "the link's page inside the frame", func() bool {
		_, err := frameText("#open-portal")
		return err == nil
	})
	frameClick("#open-portal")
	epLink := `a[href="/portal/endpoints/` + ep.ID + `"]`
	waitFor(t, "the portal signed in inside the frame", func() bool {
		s, err := frameText(epLink)
		return err == nil && strings.Contains(s, rc.URL)
	})
	who, err := frameText("header.top")
	require.NoError(t, err)
	require.Contains(t, who, "Signed in as consumer acme")
	screenshot(t, ctx, "portal-framed.png")
	frameClick(epLink)
	waitFor(t, "the endpoint's page inside the frame", func() bool {
		_, err := frameText("#send-test")
		return err == nil
	})
	frameClick("#send-test")
	waitFor(t, "the test event's delivery page inside the frame", func() bool {
		s, err := frameText("#delivery-status")
		return err == nil && s != ""
	})
	rc.waitHits(t, 1)
}
