package e2e

import (
	"net/http"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/heraldhooks/herald/internal/store/sqlitestore/sqlitetest"
)

// filteredJSON is an event answer's filtered list.
type filteredJSON struct {
	Deliveries []struct {
		EndpointID string `json:"endpoint_id"`
	} `json:"deliveries"`
	Filtered []struct {
		EndpointID string `json:"endpoint_id"`
		Reason     string `json:"reason"`
	} `json:"filtered"`
}

// TestFilterDeliversOnlyPassingEvents: a receiver behind a filtered
// endpoint gets only the events its filter passes, while one without a
// filter gets all; each event's answer lists the endpoint it skipped and
// why, a missing field as filter_error. On both backends.
func TestFilterDeliversOnlyPassingEvents(t *testing.T) {
	t.Parallel()
	backends(t, func(t *testing.T, db string) {
		e := setup(t, db)
		filtered := newReceiver(t, e.clock, nil)
		all := newReceiver(t, e.clock, nil)
		ep := e.createEndpoint(map[string]any{"consumer_id": "c1", "url": filtered.URL,
			"filter": "payload.amount > 1000 && payload.currency == 'EUR'"})
		e.createEndpoint(map[string]any{"consumer_id": "c1", "url": all.URL})

		pass := e.send("c1", "order.paid", `{"amount": 1500, "currency": "EUR"}`)
		usd := e.send("c1", "order.paid", `{"amount": 1500, "currency": "USD"}`)
		missing := e.send("c1", "order.paid", `{"currency": "EUR"}`)
		require.Len(t, pass.Deliveries, 2)
		require.Len(t, usd.Deliveries, 1)
		require.Len(t, missing.Deliveries, 1)

		all.waitHits(t, 3)
		filtered.waitHits(t, 1)
		e.waitStatus(pass.Deliveries[0].ID, "delivered")
		e.waitStatus(pass.Deliveries[1].ID, "delivered")
		e.settle()
		require.Equal(t, 1, filtered.count(), "only the passing event")
		require.Contains(t, string(filtered.all()[0].Body), `"EUR"`)

		for _, c := range []struct {
			id, reason string
		}{{pass.ID, ""}, {usd.ID, "filter"}, {missing.ID, "filter_error"}} {
			var got filteredJSON
			e.must(http.StatusOK, "GET", "/v1/events/"+c.id, nil, &got)
			if c.reason == "" {
				require.Empty(t, got.Filtered)
				require.Len(t, got.Deliveries, 2)
				continue
			}
			require.Len(t, got.Deliveries, 1)
			require.Len(t, got.Filtered, 1)
			require.Equal(t, ep.ID, got.Filtered[0].EndpointID)
			require.Equal(t, c.reason, got.Filtered[0].Reason)
		}
	})
}

// TestFilterInABrowser: a consumer sets a filter on their endpoint's
// portal page, tries it on their recent events and sees which pass, is
// told where an invalid one is wrong, and sees on an event's page that
// the endpoint skipped it; the operator tries one on the dashboard.
func TestFilterInABrowser(t *testing.T) {
	t.Parallel()
	e := setup(t, "sqlite://"+sqlitetest.Path(t), func(o *options) { o.noDispatch = true })
	ep := e.createEndpoint(map[string]any{"consumer_id": "acme", "url": "https://hooks.acme.example/in"})

	ctx := newBrowser(t)
	do, text := browserSteps(t, ctx)
	do(chromedp.Navigate(e.portalLink("acme")), chromedp.WaitVisible(chromedp.CSS("#open-portal")))
	do(chromedp.Click(chromedp.CSS("#open-portal")), chromedp.WaitVisible(chromedp.CSS("#new-endpoint")))
	page := e.api.URL + "/portal/endpoints/" + ep.ID
	do(chromedp.Navigate(page), chromedp.WaitVisible(chromedp.CSS("#filter-form")))
	require.Equal(t, "none", text("#endpoint-filter"))

	do(
		chromedp.SetValue(chromedp.CSS("#filter"), "payload.amount > 1000"),
		chromedp.Click(chromedp.CSS("#filter-save")),
		chromedp.WaitVisible(chromedp.CSS(".flash.ok")),
	)
	require.Equal(t, "payload.amount > 1000", text("#endpoint-filter"))

	// The edit form carries the filter: saving another field keeps it.
	do(chromedp.Navigate(page+"/edit"), chromedp.WaitVisible(chromedp.CSS("#endpoint-form")))
	do(
		chromedp.SetValue(chromedp.CSS("#description"), "orders over 1000"),
		chromedp.Click(chromedp.CSS("#save")),
		chromedp.WaitVisible(chromedp.CSS("#filter-form")),
	)
	require.Equal(t, "payload.amount > 1000", text("#endpoint-filter"))

	small := e.send("acme", "order.paid", `{"amount": 5}`)
	e.clock.Advance(time.Second)
	e.send("acme", "order.paid", `{"amount": 5000}`)
	require.Empty(t, small.Deliveries)

	// Try another filter on the recent events: the answer shows which pass.
	do(chromedp.Navigate(page), chromedp.WaitVisible(chromedp.CSS("#filter-form")))
	do(
		chromedp.SetValue(chromedp.CSS("#filter"), "payload.amount > 1"),
		chromedp.Click(chromedp.CSS("#filter-test")),
		chromedp.WaitVisible(chromedp.CSS("#filter-results")),
	)
	screenshot(t, ctx, "portal-filter-test.png")
	require.Equal(t, "2 of 2 recent events pass; the others would not be delivered to this endpoint.", text("#filter-summary"))
	// The page of results has the form again: mark the page, so that
	// the next waits find the answer's page, not the one still showing.
	markPage := func() {
		t.Helper()
		_, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.body.dataset.old = "1"; true`))
		require.NoError(t, err)
	}
	markPage()
	do(
		chromedp.SetValue(chromedp.CSS("#filter"), "payload.amount > 4000"),
		chromedp.Click(chromedp.CSS("#filter-test")),
		chromedp.WaitVisible(chromedp.CSS("body:not([data-old]) #filter-results")),
	)
	require.Contains(t, text("#filter-summary"), "1 of 2")
	markPage()
	do(
		chromedp.SetValue(chromedp.CSS("#filter"), "payload.amount >"),
		chromedp.Click(chromedp.CSS("#filter-test")),
		chromedp.WaitVisible(chromedp.CSS("body:not([data-old]) #filter-error")),
	)
	require.Contains(t, text("#filter-error"), "1:17")

	// The event the filter dropped says so.
	do(chromedp.Navigate(e.api.URL+"/portal/events/"+small.ID), chromedp.WaitVisible(chromedp.CSS("#filtered")))
	require.Contains(t, text("#filtered"), ep.ID)
	require.Contains(t, text("#filtered"), "its filter is false for this event")

	// The operator's dashboard: the filter shown, and tried.
	do(chromedp.Navigate(e.api.URL+"/ui/"), chromedp.WaitVisible(chromedp.CSS("#api_key")))
	do(
		chromedp.SendKeys(chromedp.CSS("#api_key"), testAPIKey),
		chromedp.Click(chromedp.CSS("#signin")),
		chromedp.WaitVisible(chromedp.CSS("#due-now")),
	)
	do(chromedp.Navigate(e.api.URL+"/ui/endpoints/"+ep.ID), chromedp.WaitVisible(chromedp.CSS("#filter-form")))
	require.Equal(t, "payload.amount > 1000", text("#endpoint-filter"))
	do(
		chromedp.Click(chromedp.CSS("#filter-test")),
		chromedp.WaitVisible(chromedp.CSS("#filter-results")),
	)
	require.Contains(t, text("#filter-summary"), "1 of 2")
	do(chromedp.Navigate(e.api.URL+"/ui/events/"+small.ID), chromedp.WaitVisible(chromedp.CSS("#filtered")))
	require.Contains(t, text("#filtered"), ep.ID)
}
