package e2e

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/heraldhooks/herald/internal/notice/smtptest"
	"github.com/heraldhooks/herald/internal/testdb"
)

// TestPortalSettingsInABrowser: a consumer opens the portal in a real
// browser, sets its notification address on the Settings page, and the
// next dead delivery of one of its endpoints is mailed there.
func TestPortalSettingsInABrowser(t *testing.T) {
	t.Parallel()
	mail := smtptest.Start(t)
	e := setup(t, "sqlite://"+testdb.SQLitePath(t), func(o *options) { o.smtpURL = mail.URL })
	bad := newReceiver(t, e.clock, func(_ int, _ *http.Request, w http.ResponseWriter) {
		w.WriteHeader(http.StatusBadRequest)
	})
	ep := e.createEndpoint(map[string]any{"consumer_id": "cust_42", "url": bad.URL, "retry_schedule": []string{"0s"}})
	var link struct {
		URL string `json:"url"`
	}
	e.must(http.StatusCreated, "POST", "/v1/consumers/cust_42/portal-sessions", map[string]any{"ttl": "5m"}, &link)

	ctx := newBrowser(t)
	do := func(steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		require.NoError(t, chromedp.Do(ctx, steps...))
	}
	text := func(sel string) string {
		t.Helper()
		s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
		require.NoError(t, err)
		return strings.TrimSpace(s)
	}
	settings := chromedp.CSS(`nav a[href="/portal/settings"]`)
	do(chromedp.Navigate(link.URL), chromedp.WaitVisible(settings))
	do(chromedp.Click(settings), chromedp.WaitVisible(chromedp.CSS("#email")))
	require.Equal(t, "Never set.", text("#email-updated"))
	do(chromedp.SendKeys(chromedp.CSS("#email"), "ops@example.com"),
		chromedp.Click(chromedp.CSS("#save-settings")),
		chromedp.WaitVisible(chromedp.CSS(".flash.ok")))
	require.Contains(t, text(".flash.ok"), "ops@example.com")
	screenshot(t, ctx, "portal-settings.png")

	e.send("cust_42", "order.created", `{"n":1}`)
	got := mail.Wait(t, 1, time.Minute)[0]
	require.Equal(t, []string{"ops@example.com"}, got.To)
	require.Equal(t, "Herald: a delivery to your endpoint "+ep.ID+" went dead", got.Subject)
	require.Contains(t, got.Body, "HTTP 400")
}
