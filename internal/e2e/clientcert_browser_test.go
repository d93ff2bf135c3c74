package e2e

import (
	"net/http"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/heraldhooks/herald/internal/store/sqlitestore/sqlitetest"
	"github.com/heraldhooks/herald/internal/store/storetest"
)

// TestClientCertificateInABrowser: a consumer pastes a client certificate
// and its key on their endpoint's portal page and sees its subject and
// expiry; a key that is not the certificate's is refused with the API's
// reason; the operator's dashboard shows the same certificate and how
// webhooks leave; the consumer removes it.
func TestClientCertificateInABrowser(t *testing.T) {
	t.Parallel()
	e := setup(t, "sqlite://"+sqlitetest.Path(t), func(o *options) { o.noDispatch = true })
	ca := storetest.NewCA(t)
	notAfter := start.Add(90 * 24 * time.Hour)
	certPEM, keyPEM := ca.Client(t, "acme-hooks", notAfter)
	_, otherKey := ca.Client(t, "other", notAfter)
	ep := e.createEndpoint(map[string]any{"consumer_id": "acme", "url": "https://hooks.acme.example/in"})

	ctx := newBrowser(t)
	do, text := browserSteps(t, ctx)
	do(chromedp.Navigate(e.portalLink("acme")), chromedp.WaitVisible(chromedp.CSS("#open-portal")))
	do(chromedp.Click(chromedp.CSS("#open-portal")), chromedp.WaitVisible(chromedp.CSS("#new-endpoint")))
	page := e.api.URL + "/portal/endpoints/" + ep.ID
	do(chromedp.Navigate(page), chromedp.WaitVisible(chromedp.CSS("#client-cert-none")))

	// A key that is not the certificate's: refused, with the reason.
	do(
		chromedp.SetValue(chromedp.CSS("#client-certificate"), certPEM),
		chromedp.SetValue(chromedp.CSS("#client-key"), otherKey),
		chromedp.Click(chromedp.CSS("#client-cert-save")),
		chromedp.WaitVisible(chromedp.CSS(".flash.error")),
	)
	require.Contains(t, text(".flash.error"), "does not match")
	require.Equal(t, "None. A receiver that requires mutual TLS gets the certificate given here.", text("#client-cert-none"))

	// The pair: saved, shown by subject and expiry, the key nowhere.
	do(
		chromedp.SetValue(chromedp.CSS("#client-certificate"), certPEM),
		chromedp.SetValue(chromedp.CSS("#client-key"), keyPEM),
		chromedp.Click(chromedp.CSS("#client-cert-save")),
		chromedp.WaitVisible(chromedp.CSS("#client-cert-subject")),
	)
	screenshot(t, ctx, "portal-client-certificate.png")
	require.Equal(t, "CN=acme-hooks,O=Herald tests", text("#client-cert-subject"))
	require.Equal(t, notAfter.UTC().Format("2006-01-02 15:04:05")+" UTC", text("#client-cert-expires"))
	require.NotContains(t, text("main"), "PRIVATE KEY")
	var got struct {
		ClientCertificate string `json:"client_certificate"`
	}
	e.must(http.StatusOK, "GET", "/v1/endpoints/"+ep.ID, nil, &got)
	require.Equal(t, certPEM, got.ClientCertificate)

	// The operator's page shows it too, and that webhooks go direct.
	do(chromedp.Navigate(e.api.URL+"/ui/"), chromedp.WaitVisible(chromedp.CSS("#api_key")))
	do(
		chromedp.SendKeys(chromedp.CSS("#api_key"), testAPIKey),
		chromedp.Click(chromedp.CSS("#signin")),
		chromedp.WaitVisible(chromedp.CSS("#due-now")),
	)
	do(chromedp.Navigate(e.api.URL+"/ui/endpoints/"+ep.ID), chromedp.WaitVisible(chromedp.CSS("#client-cert-subject")))
	require.Equal(t, "CN=acme-hooks,O=Herald tests", text("#client-cert-subject"))
	require.Contains(t, text("#endpoint-egress"), "direct")

	// Removed from the portal.
	do(chromedp.Navigate(page), chromedp.WaitVisible(chromedp.CSS("#client-cert-clear")))
	_, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`window.confirm = () => true; true`))
	require.NoError(t, err)
	do(chromedp.Click(chromedp.CSS("#client-cert-clear")), chromedp.WaitVisible(chromedp.CSS("#client-cert-none")))
	var cleared struct {
		ClientCertificate *string `json:"client_certificate"`
	}
	e.must(http.StatusOK, "GET", "/v1/endpoints/"+ep.ID, nil, &cleared)
	require.Nil(t, cleared.ClientCertificate)
}
