package e2e

import (
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/heraldhooks/herald/internal/notice/smtptest"
	"github.com/heraldhooks/herald/internal/store/sqlitestore/sqlitetest"
)

// TestPortalSettingsInABrowser: a consumer opens the portal in a real
// browser and sets its notice address on the Settings page; the
// address is pending, and a dead delivery is not mailed to it. The
// confirmation mail's link, opened in the browser, shows a Confirm
// button; once pressed, the Settings page says confirmed, and the next
// dead delivery of one of its endpoints is mailed there.
func TestPortalSettingsInABrowser(t *testing.T) {
	t.Parallel()
	mail := smtptest.Start(t)
	e := setup(t, "sqlite://"+sqlitetest.Path(t), func(o *options) { o.smtpURL = mail.URL })
	bad := newReceiver(t, e.clock, func(_ int, _ *http.Request, w http.ResponseWriter) {
		w.WriteHeader(http.StatusBadRequest)
	})
	ep := e.createEndpoint(map[string]any{"consumer_id": "cust_42", "url": bad.URL, "retry_schedule": []string{"0s"}})
	var link struct {
		URL string `json:"url"`
	}
	e.must(http.StatusCreated, "POST", "/v1/consumers/cust_42/portal-sessions", map[string]any{"ttl": "5m"}, &link)

	ctx := newBrowser(t)
	do, text := browserSteps(t, ctx)
	settings := chromedp.CSS(`nav a[href="/portal/settings"]`)
	do(chromedp.Navigate(link.URL), chromedp.WaitVisible(chromedp.CSS("#open-portal")))
	do(chromedp.Click(chromedp.CSS("#open-portal")), chromedp.WaitVisible(settings))
	do(chromedp.Click(settings), chromedp.WaitVisible(chromedp.CSS("#email")))
	require.Equal(t, "Never set.", text("#email-updated"))
	do(chromedp.SendKeys(chromedp.CSS("#email"), "ops@example.com"),
		chromedp.Click(chromedp.CSS("#save-settings")),
		chromedp.WaitVisible(chromedp.CSS(".flash.ok")))
	require.Contains(t, text(".flash.ok"), "A confirmation link is being mailed to ops@example.com")
	require.Equal(t, "pending", text("#email-status"))
	screenshot(t, ctx, "portal-settings.png")

	// The confirmation mail holds a link back to this server.
	confirmation := mail.Wait(t, 1, time.Minute)[0]
	require.Equal(t, []string{"ops@example.com"}, confirmation.To)
	require.Contains(t, confirmation.Subject, "confirm this address")
	confirmURL := regexp.MustCompile(`http://\S+/portal/confirm\?\S+`).FindString(confirmation.Body)
	require.True(t, strings.HasPrefix(confirmURL, e.api.URL+"/portal/confirm?"), "%q in %s", confirmURL, confirmation.Body)

	// Pending: a dead delivery is not mailed.
	e.send("cust_42", "order.created", `{"n":1}`)
	e.waitMetrics("the dead delivery's notice held back", func(s scrape) bool {
		return s.get(`herald_notices_sent_total{kind="dead",result="unconfirmed"}`) == 1
	})
	require.Len(t, mail.Mails(), 1)

	// Opening the link shows a button; pressing it confirms.
	do(chromedp.Navigate(confirmURL), chromedp.WaitVisible(chromedp.CSS("#confirm-address")))
	require.Equal(t, "Confirm your address", text("h1"))
	screenshot(t, ctx, "portal-confirm.png")
	require.Len(t, mail.Mails(), 1)
	do(chromedp.Click(chromedp.CSS("#confirm-address")), chromedp.WaitNotPresent(chromedp.CSS("#confirm-address")),
		chromedp.WaitVisible(chromedp.CSS("main h1")))
	require.Equal(t, "Address confirmed", text("main h1"))
	require.Contains(t, text("main p"), "ops@example.com")
	do(chromedp.Navigate(e.api.URL+"/portal/settings"), chromedp.WaitVisible(chromedp.CSS("#email-status")))
	require.Equal(t, "confirmed", text("#email-status"))

	// Confirmed: the next dead delivery is mailed.
	e.send("cust_42", "order.created", `{"n":2}`)
	got := mail.Wait(t, 2, time.Minute)[1]
	require.Equal(t, []string{"ops@example.com"}, got.To)
	require.Equal(t, "Herald: a delivery to your endpoint "+ep.ID+" went dead", got.Subject)
	require.Contains(t, got.Body, "HTTP 400")
}
