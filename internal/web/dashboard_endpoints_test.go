package web_test

import (
	"fmt"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhooks/herald"
	"github.com/heraldhooks/herald/internal/store"
)

var (
	rowRE  = regexp.MustCompile(`<tr id="row-([^"]+)">`)
	cellRE = regexp.MustCompile(`(?s)<td data-col="([a-z_]+)"[^>]*>(.*?)</td>`)
	tagRE  = regexp.MustCompile(`<[^>]+>`)
)

// tableRows reads the endpoints table of page: the ids of its rows in
// order, and each row's cells by column, as text, with the raw HTML of
// each cell under "<column>.html".
func tableRows(t *testing.T, page string) ([]string, map[string]map[string]string) {
	t.Helper()
	var ids []string
	rows := map[string]map[string]string{}
	for _, m := range rowRE.FindAllStringSubmatchIndex(page, -1) {
		id := page[m[2]:m[3]]
		rest := page[m[1]:]
		rest = rest[:strings.Index(rest, "</tr>")]
		cells := map[string]string{}
		for _, c := range cellRE.FindAllStringSubmatch(rest, -1) {
			cells[c[1]] = strings.TrimSpace(html.UnescapeString(tagRE.ReplaceAllString(c[2], "")))
			cells[c[1]+".html"] = c[2]
		}
		ids = append(ids, id)
		rows[id] = cells
	}
	return ids, rows
}

// createEndpointAt makes an endpoint through the store at the test clock's
// time and returns it.
func (e *dashboardEnv) createEndpointAt(t *testing.T, consumer, u string) *herald.Endpoint {
	t.Helper()
	ep, err := e.st.EndpointCreate(t.Context(), &store.EndpointCreateParams{Endpoint: &herald.Endpoint{
		ConsumerID: consumer, URL: u, EventTypes: []string{"*"}, Secret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
		Enabled: true, Timeout: 10 * time.Second, MaxInFlight: herald.DefaultMaxInFlight, SignatureScheme: herald.SchemeStandard,
	}, Now: e.clock.StoreNow()})
	require.NoError(t, err)
	e.clock.Advance(time.Millisecond)
	return ep
}

// ingestTo ingests n events for consumer.
func (e *dashboardEnv) ingestTo(t *testing.T, consumer string, n int) {
	t.Helper()
	items := make([]store.EventIngestItem, n)
	for i := range items {
		items[i] = store.EventIngestItem{ConsumerID: consumer, EventType: "order.created", Payload: []byte(`{}`)}
	}
	_, err := e.st.EventIngest(t.Context(), &store.EventIngestParams{Events: items, Now: e.clock.StoreNow()})
	require.NoError(t, err)
}

// outcomeOf is an outcome of claim c: a 200, a 503 to retry in 30 s, or a
// 400 that goes dead.
func outcomeOf(c *store.ClaimedDelivery, status herald.Status, at time.Time) store.DeliveryOutcome {
	o := store.DeliveryOutcome{
		Lease:   store.Lease{DeliveryID: c.Delivery.ID, LeaseToken: c.LeaseToken},
		Status:  status,
		Attempt: herald.Attempt{Number: c.Delivery.AttemptCount + 1, AttemptedAt: at, Duration: 50 * time.Millisecond},
	}
	switch status {
	case herald.StatusDelivered:
		o.Attempt.StatusCode = 200
	case herald.StatusPending:
		o.Attempt.StatusCode, o.Attempt.Error, o.RetryIn = 503, "HTTP 503", 30*time.Second
	case herald.StatusDead:
		o.Attempt.StatusCode, o.Attempt.Error, o.DeadReason = 400, "HTTP 400", herald.DeadClientError
	}
	return o
}

func TestDashboardEndpointsTable(t *testing.T) {
	t.Parallel()
	e := setupUI(t)
	c := e.browser(t)
	e.signIn(t, c, operatorKey)
	ctx := t.Context()

	// Four endpoints in known states, one consumer each: an open breaker
	// (five failures), dead deliveries, disabled, and busy (one delivered,
	// two leased, two due).
	open := e.createEndpointAt(t, "cust_a", "http://127.0.0.1:9/open")
	dead := e.createEndpointAt(t, "cust_b", "http://127.0.0.1:9/dead")
	disabled := e.createEndpointAt(t, "cust_c", "http://127.0.0.1:9/disabled")
	busy := e.createEndpointAt(t, "cust_d", "http://127.0.0.1:9/busy")
	e.ingestTo(t, "cust_a", 5)
	e.ingestTo(t, "cust_b", 2)
	e.ingestTo(t, "cust_d", 3)
	claimed, err := e.st.DeliveryClaim(ctx, &store.DeliveryClaimParams{Limit: 100, LeaseMargin: 15 * time.Second, Now: e.clock.StoreNow()})
	require.NoError(t, err)
	require.Len(t, claimed, 10)
	e.clock.Advance(time.Second)
	now := e.clock.StoreNow()
	var outcomes []store.DeliveryOutcome
	delivered := false
	for _, cd := range claimed {
		switch cd.Endpoint.ID {
		case open.ID:
			outcomes = append(outcomes, outcomeOf(cd, herald.StatusPending, now))
		case dead.ID:
			outcomes = append(outcomes, outcomeOf(cd, herald.StatusDead, now))
		case busy.ID:
			if !delivered {
				outcomes = append(outcomes, outcomeOf(cd, herald.StatusDelivered, now))
				delivered = true
			}
		}
	}
	applied, err := e.st.DeliveryCompleteMany(ctx, &store.DeliveryCompleteManyParams{Outcomes: outcomes, Now: now})
	require.NoError(t, err)
	require.Equal(t, []bool{true, true, true, true, true, true, true, true}, applied)
	e.ingestTo(t, "cust_d", 2)
	_, err = e.st.EndpointSetEnabled(ctx, &store.EndpointSetEnabledParams{ID: disabled.ID, Enabled: false, Reason: "manual", Now: now})
	require.NoError(t, err)

	t.Run("EachColumn", func(t *testing.T) {
		a := call(t, c, http.MethodGet, e.srv.URL+"/ui/endpoints?sort=consumer", "", "", nil)
		require.Equal(t, http.StatusOK, a.status, a.body)
		ids, rows := tableRows(t, a.body)
		require.Equal(t, []string{open.ID, dead.ID, disabled.ID, busy.ID}, ids)
		want := map[string]map[string]string{
			open.ID:     {"consumer": "cust_a", "url": open.URL, "state": "enabled", "score": "0", "breaker": "open", "rate": "0.0%", "in_flight": "0", "due": "0", "dead": "0"},
			dead.ID:     {"consumer": "cust_b", "url": dead.URL, "state": "enabled", "score": "0", "breaker": "closed", "rate": "0.0%", "in_flight": "0", "due": "0", "dead": "2"},
			disabled.ID: {"consumer": "cust_c", "url": disabled.URL, "state": "disabled", "score": "0", "breaker": "closed", "rate": "—", "in_flight": "0", "due": "0", "dead": "0"},
			busy.ID:     {"consumer": "cust_d", "url": busy.URL, "state": "enabled", "score": "100", "breaker": "closed", "rate": "100.0%", "in_flight": "2", "due": "2", "dead": "0"},
		}
		for id, cols := range want {
			for col, v := range cols {
				require.Equal(t, v, rows[id][col], "endpoint %s, column %s", id, col)
			}
		}
		// The score's colour follows it; dead deliveries link to the queue.
		require.Contains(t, rows[busy.ID]["score.html"], `class="badge ok"`)
		require.Contains(t, rows[open.ID]["score.html"], `class="badge bad"`)
		require.Contains(t, rows[disabled.ID]["score.html"], `class="badge bad"`)
		require.Contains(t, rows[dead.ID]["dead.html"], `href="/ui/dead?endpoint_id=`+dead.ID+`"`)
		require.NotContains(t, rows[busy.ID]["dead.html"], "href")

		// An endpoint without recent attempts has no score.
		quiet := e.createEndpointAt(t, "cust_e", "http://127.0.0.1:9/quiet")
		a = call(t, c, http.MethodGet, e.srv.URL+"/ui/endpoints?consumer_id=cust_e", "", "", nil)
		_, rows = tableRows(t, a.body)
		require.Equal(t, "—", rows[quiet.ID]["score"])
		require.Contains(t, rows[quiet.ID]["score.html"], `class="badge muted"`)
	})

	t.Run("SortedByTheFigures", func(t *testing.T) {
		// With the quiet endpoint above: the worst health first (score 0:
		// the open breaker, the dead deliveries' failures, disabled), then
		// those that failed nothing in the hour; due work first; the most
		// dead first. Each header says how the table is sorted, and
		// links the other way where there is one.
		ids := func(eps ...*herald.Endpoint) []string {
			var out []string
			for _, ep := range eps {
				out = append(out, ep.ID)
			}
			return out
		}
		quiets, err := e.st.EndpointList(ctx, &store.EndpointListParams{ConsumerID: "cust_e"})
		require.NoError(t, err)
		require.Len(t, quiets.Items, 1)
		quiet := quiets.Items[0]
		for _, tc := range []struct {
			sort, header string
			want         []string
		}{
			{"health", `<th class="num" aria-sort="ascending" title="[^"]*"><a id="sort-health" href="/ui/endpoints\?sort=-health">Health ▲</a></th>`,
				ids(open, dead, disabled, busy, quiet)},
			{"-health", `<th class="num" aria-sort="descending" title="[^"]*"><a id="sort-health" href="/ui/endpoints\?sort=health">Health ▼</a></th>`,
				ids(quiet, busy, disabled, dead, open)},
			{"due", `<th class="num" aria-sort="other" title="[^"]*"><a id="sort-due" href="/ui/endpoints\?sort=due">Due ◆</a></th>`,
				ids(busy, open, dead, disabled, quiet)},
			{"-dead", `<th class="num" aria-sort="descending" title="[^"]*"><a id="sort-dead" href="/ui/endpoints\?sort=-dead">Dead ▼</a></th>`,
				ids(dead, quiet, busy, disabled, open)},
		} {
			a := call(t, c, http.MethodGet, e.srv.URL+"/ui/endpoints?sort="+tc.sort, "", "", nil)
			require.Equal(t, http.StatusOK, a.status, a.body)
			got, _ := tableRows(t, a.body)
			require.Equal(t, tc.want, got, "sort %s", tc.sort)
			require.Regexp(t, tc.header, html.UnescapeString(a.body))
		}
		// Sorted otherwise, each links its first order.
		a := call(t, c, http.MethodGet, e.srv.URL+"/ui/endpoints?consumer_id=cust_a", "", "", nil)
		body := html.UnescapeString(a.body)
		require.Contains(t, body, `<a id="sort-health" href="/ui/endpoints?consumer_id=cust_a&sort=health">Health</a>`)
		require.Contains(t, body, `<a id="sort-due" href="/ui/endpoints?consumer_id=cust_a&sort=due">Due</a>`)
		require.Contains(t, body, `<a id="sort-dead" href="/ui/endpoints?consumer_id=cust_a&sort=-dead">Dead</a>`)
	})

	t.Run("EndpointPageShowsTheSame", func(t *testing.T) {
		for _, tc := range []struct {
			id                   string
			score, due, inFlight string
		}{
			{busy.ID, "100", "2", "2"},
			{open.ID, "0", "0", "0"},
		} {
			a := call(t, c, http.MethodGet, e.srv.URL+"/ui/endpoints/"+tc.id, "", "", nil)
			require.Equal(t, http.StatusOK, a.status)
			require.Contains(t, a.body, `id="endpoint-score">`+tc.score+`<`)
			require.Contains(t, a.body, `id="endpoint-due">`+tc.due+`<`)
			require.Contains(t, a.body, `id="endpoint-in-flight">`+tc.inFlight+`<`)
		}
	})
}

func TestDashboardEndpointsSortAndPages(t *testing.T) {
	t.Parallel()
	e := setupUI(t)
	c := e.browser(t)
	e.signIn(t, c, operatorKey)

	// 53 endpoints: a page and three, URLs in another order than their
	// creation, consumers c0 to c2.
	type made struct{ id, consumer, url string }
	var all []made
	for i := range 53 {
		ep := e.createEndpointAt(t, fmt.Sprintf("c%d", i%3), fmt.Sprintf("http://127.0.0.1:9/%02d", (i*7)%53))
		all = append(all, made{ep.ID, ep.ConsumerID, ep.URL})
	}
	byURL := slices.Clone(all)
	slices.SortFunc(byURL, func(a, b made) int { return strings.Compare(a.url, b.url) })
	ids := func(ms []made) []string {
		var out []string
		for _, m := range ms {
			out = append(out, m.id)
		}
		return out
	}
	nextRE := regexp.MustCompile(`<a href="([^"]+)" rel="next">`)
	// walk follows the Next links from path, as a person would, and
	// returns the ids of every page's rows.
	walk := func(path string) (got []string, pages int) {
		for path != "" {
			a := call(t, c, http.MethodGet, e.srv.URL+html.UnescapeString(path), "", "", nil)
			require.Equal(t, http.StatusOK, a.status, a.body)
			rows, _ := tableRows(t, a.body)
			require.LessOrEqual(t, len(rows), 50)
			got = append(got, rows...)
			pages++
			path = ""
			if m := nextRE.FindStringSubmatch(a.body); m != nil {
				path = m[1]
			}
		}
		return got, pages
	}

	t.Run("ByURLAcrossPages", func(t *testing.T) {
		got, pages := walk("/ui/endpoints?sort=url")
		require.Equal(t, 2, pages)
		require.Equal(t, ids(byURL), got, "the sort survives paging")
	})

	t.Run("ByURLDescendingWithinAConsumer", func(t *testing.T) {
		var want []made
		for _, m := range slices.Backward(byURL) {
			if m.consumer == "c1" {
				want = append(want, m)
			}
		}
		got, _ := walk("/ui/endpoints?consumer_id=c1&sort=-url")
		require.Equal(t, ids(want), got)
	})

	t.Run("NewestFirstByDefault", func(t *testing.T) {
		got, pages := walk("/ui/endpoints")
		require.Equal(t, 2, pages)
		want := ids(all)
		slices.Reverse(want)
		require.Equal(t, want, got)
	})

	t.Run("HeadersLinkTheSorts", func(t *testing.T) {
		a := call(t, c, http.MethodGet, e.srv.URL+"/ui/endpoints?consumer_id=c2&sort=url", "", "", nil)
		body := html.UnescapeString(a.body)
		// Sorted by URL: its header says so and reverses it; the others
		// sort by themselves; every link keeps the consumer filter.
		require.Regexp(t, `<th aria-sort="ascending"><a id="sort-url" href="/ui/endpoints\?consumer_id=c2&sort=-url">URL ▲</a></th>`, body)
		require.Contains(t, body, `<a id="sort-consumer" href="/ui/endpoints?consumer_id=c2&sort=consumer">Consumer</a>`)
		require.Contains(t, body, `<a id="sort-created" href="/ui/endpoints?consumer_id=c2">Created</a>`)
		// The consumer filter's form keeps the sort.
		require.Contains(t, body, `<input type="hidden" name="sort" value="url">`)

		a = call(t, c, http.MethodGet, e.srv.URL+"/ui/endpoints?sort=-created", "", "", nil)
		body = html.UnescapeString(a.body)
		require.Contains(t, body, `<th aria-sort="descending"><a id="sort-created" href="/ui/endpoints?sort=created">Created ▼</a></th>`)
		require.NotContains(t, body, `name="sort"`)

		// An order the table does not offer falls back to newest first.
		a = call(t, c, http.MethodGet, e.srv.URL+"/ui/endpoints?sort=dead", "", "", nil)
		require.Equal(t, http.StatusOK, a.status)
		got, _ := tableRows(t, a.body)
		require.Equal(t, all[52].id, got[0])
	})

	t.Run("FirstPageLinkKeepsTheSort", func(t *testing.T) {
		a := call(t, c, http.MethodGet, e.srv.URL+"/ui/endpoints?sort=url", "", "", nil)
		next := nextRE.FindStringSubmatch(a.body)
		require.NotNil(t, next)
		u, err := url.Parse(html.UnescapeString(next[1]))
		require.NoError(t, err)
		require.Equal(t, "url", u.Query().Get("sort"))
		a = call(t, c, http.MethodGet, e.srv.URL+u.String(), "", "", nil)
		require.Contains(t, html.UnescapeString(a.body), `href="/ui/endpoints?sort=url">« First page</a>`)
	})
}
