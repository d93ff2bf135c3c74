package e2e

import (
	"net/http"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/heraldhooks/herald/internal/store/sqlitestore/sqlitetest"
)

// TestTracePropagationInABrowser: a consumer turns trace propagation off
// on their endpoint's portal page and sees it off; the operator's
// dashboard shows it off and turns it back on.
func TestTracePropagationInABrowser(t *testing.T) {
	t.Parallel()
	e := setup(t, "sqlite://"+sqlitetest.Path(t), func(o *options) { o.noDispatch = true })
	ep := e.createEndpoint(map[string]any{"consumer_id": "acme", "url": "https://hooks.acme.example/in"})
	var got struct {
		TracePropagation bool `json:"trace_propagation"`
	}

	ctx := newBrowser(t)
	do, text := browserSteps(t, ctx)
	do(chromedp.Navigate(e.portalLink("acme")), chromedp.WaitVisible(chromedp.CSS("#open-portal")))
	do(chromedp.Click(chromedp.CSS("#open-portal")), chromedp.WaitVisible(chromedp.CSS("#new-endpoint")))
	page := e.api.URL + "/portal/endpoints/" + ep.ID
	do(chromedp.Navigate(page), chromedp.WaitVisible(chromedp.CSS("#trace-propagation-form")))
	require.Equal(t, "on", text("#endpoint-trace-propagation"))
	do(
		chromedp.Click(chromedp.CSS("#trace-propagation")), // unchecks it
		chromedp.Click(chromedp.CSS("#trace-propagation-save")),
		chromedp.WaitVisible(chromedp.CSS(".flash.ok")),
	)
	require.Contains(t, text(".flash.ok"), "Trace propagation off")
	require.Equal(t, "off", text("#endpoint-trace-propagation"))
	e.must(http.StatusOK, "GET", "/v1/endpoints/"+ep.ID, nil, &got)
	require.False(t, got.TracePropagation)

	do(chromedp.Navigate(e.api.URL+"/ui/"), chromedp.WaitVisible(chromedp.CSS("#api_key")))
	do(
		chromedp.SendKeys(chromedp.CSS("#api_key"), testAPIKey),
		chromedp.Click(chromedp.CSS("#signin")),
		chromedp.WaitVisible(chromedp.CSS("#due-now")),
	)
	do(chromedp.Navigate(e.api.URL+"/ui/endpoints/"+ep.ID), chromedp.WaitVisible(chromedp.CSS("#trace-propagation-form")))
	require.Equal(t, "off", text("#endpoint-trace-propagation"))
	do(
		chromedp.Click(chromedp.CSS("#trace-propagation")), // checks it
		chromedp.Click(chromedp.CSS("#trace-propagation-save")),
		chromedp.WaitVisible(chromedp.CSS(".flash.ok")),
	)
	require.Equal(t, "on", text("#endpoint-trace-propagation"))
	e.must(http.StatusOK, "GET", "/v1/endpoints/"+ep.ID, nil, &got)
	require.True(t, got.TracePropagation)
}
