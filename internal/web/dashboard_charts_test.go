package web_test

import (
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhooks/herald"
	"github.com/heraldhooks/herald/internal/store"
)

// TestDashboardOverviewCharts: the overview draws the activity and the queue's
// depth of the last hour and day as inline SVG charts with a title and a
// description, gives the same numbers as a table, and sums the last
// minutes into the figures of now; a minute without attempts has no
// success rate, and a minute without a depth sample no depth, so their
// lines break there. Nothing on the page is styled inline (the CSP
// forbids it).
func TestDashboardOverviewCharts(t *testing.T) {
	t.Parallel()
	e := setupUI(t)
	c := e.browser(t)
	e.signIn(t, c, operatorKey)
	op := e.srv.Client()
	ep := call(t, op, http.MethodPost, e.srv.URL+"/v1/endpoints", operatorKey,
		`{"consumer_id":"cust_42","url":"http://127.0.0.1:9/hook"}`, map[string]string{"Content-Type": "application/json"})
	require.Equal(t, http.StatusCreated, ep.status, ep.body)

	// Two minutes with attempts, a minute apart: 4 attempts (3 answered
	// 2xx, one retried) and then 2 (one delivered, one gone dead).
	attempt := func(codes ...int) {
		t.Helper()
		now := e.clock.Now()
		for range codes {
			a := call(t, op, http.MethodPost, e.srv.URL+"/v1/events", operatorKey,
				`{"consumer_id":"cust_42","event_type":"order.created","payload":{}}`, map[string]string{"Content-Type": "application/json"})
			require.Equal(t, http.StatusAccepted, a.status, a.body)
		}
		claimed, err := e.st.DeliveryClaim(t.Context(), &store.DeliveryClaimParams{Limit: 100, LeaseMargin: time.Minute, Now: now})
		require.NoError(t, err)
		require.Len(t, claimed, len(codes))
		var outcomes []store.DeliveryOutcome
		for i, c := range claimed {
			o := store.DeliveryOutcome{Lease: store.Lease{DeliveryID: c.Delivery.ID, LeaseToken: c.LeaseToken},
				Status: herald.StatusDelivered, Attempt: herald.Attempt{StatusCode: codes[i], Duration: 40 * time.Millisecond}}
			switch codes[i] {
			case 503:
				o.Status, o.RetryIn = herald.StatusPending, time.Hour
			case 400:
				o.Status, o.DeadReason = herald.StatusDead, herald.DeadClientError
			}
			outcomes = append(outcomes, o)
		}
		_, err = e.st.DeliveryCompleteMany(t.Context(), &store.DeliveryCompleteManyParams{Outcomes: outcomes, Now: now})
		require.NoError(t, err)
	}
	sample := func() {
		t.Helper()
		wrote, err := e.st.DepthSample(t.Context(), &store.DepthSampleParams{Now: e.clock.Now()})
		require.NoError(t, err)
		require.True(t, wrote)
	}
	attempt(200, 200, 200, 503)
	sample() // 05:06: nothing due (the retry is due in an hour), none dead
	e.clock.Advance(2 * time.Minute)
	attempt(200, 400)
	// Two events no dispatcher takes: due for 30 s when 05:08 is sampled,
	// beside the one dead letter. 05:07 has no sample.
	for range 2 {
		a := call(t, op, http.MethodPost, e.srv.URL+"/v1/events", operatorKey,
			`{"consumer_id":"cust_42","event_type":"order.created","payload":{}}`, map[string]string{"Content-Type": "application/json"})
		require.Equal(t, http.StatusAccepted, a.status, a.body)
	}
	e.clock.Advance(30 * time.Second)
	sample()
	e.clock.Advance(30 * time.Second)

	a := call(t, c, http.MethodGet, e.srv.URL+"/ui/", "", "", nil)
	require.Equal(t, http.StatusOK, a.status)
	body := a.body
	require.False(t, strings.Contains(body, "style="), "no inline style")

	for _, win := range []string{"hour", "day"} {
		for _, chart := range []string{"rate", "success", "latency", "retries", "due", "oldest", "dead"} {
			id := win + "-" + chart
			require.True(t, strings.Contains(body, `<figure class="chart" id="chart-`+id+`">`), id)
			require.True(t, strings.Contains(body, `aria-labelledby="`+id+`-title `+id+`-desc"`), id)
			require.True(t, regexp.MustCompile(`<desc id="`+id+`-desc">[^<]*average`).MatchString(body), "%s says its numbers in words", id)
		}
	}
	hour := body[strings.Index(body, `<section id="hour">`):strings.Index(body, `<section id="day">`)]
	day := body[strings.Index(body, `<section id="day">`):]
	polylines := func(section, class string) int {
		return len(regexp.MustCompile(`<polyline class="`+class+`" points="[0-9., ]+">`).FindAllString(section, -1))
	}
	require.Equal(t, 1, polylines(hour, "rate"), "deliveries per second is 0 between: one line")
	require.Equal(t, 2, polylines(hour, "success"), "no attempts, no success rate: the line breaks")
	require.Equal(t, 1, polylines(day, "success"), "a day's 15 minutes hold both minutes")
	require.Equal(t, 2, polylines(hour, "exhausted"))
	require.True(t, strings.Contains(hour, "Answered 2xx: average 62.5 %"), "75 % and 50 %")

	// The depth: 05:06 and 05:08 sampled, 05:07 a gap; the day's step
	// holds both samples and shows each figure's highest.
	for _, class := range []string{"due", "oldest", "dead"} {
		require.Equal(t, 2, polylines(hour, class), "%s: no sample at 05:07, the line breaks", class)
		require.Equal(t, 1, polylines(day, class), class)
	}
	require.True(t, strings.Contains(hour, "Due now: average 1, highest 2 at 05:08, last 2."), "0 and 2")
	require.True(t, strings.Contains(hour, "Oldest due waited: average 15.0 s, highest 30.0 s at 05:08, last 30.0 s."))
	require.True(t, strings.Contains(hour, "Dead letters: average 0.50, highest 1 at 05:08, last 1. Sampled once a minute; a gap is a time without a sample."))
	require.True(t, strings.Contains(day, "Due now: average 2, highest 2 at 04:54, last 2. Sampled once a minute, each point the highest sample of its 15 minutes"))

	// The numbers as a table: 60 rows for the hour, 96 for the day.
	require.Equal(t, 60, strings.Count(hour, "<tr><td>"))
	require.Equal(t, 96, strings.Count(day, "<tr><td>"))
	require.True(t, strings.Contains(hour, `<td class="num">4</td><td class="num">3</td><td class="num">1</td><td class="num">1</td><td class="num">0</td>`))
	require.True(t, strings.Contains(hour, `<tr><td>2026-03-04 05:06</td><td class="num">4</td>`))
	depthCells := func(section string) []string {
		var out []string
		for _, m := range regexp.MustCompile(`<td class="num">([^<]*)</td><td class="num">([^<]*)</td><td class="num">([^<]*)</td></tr>`).FindAllStringSubmatch(section, -1) {
			out = append(out, strings.Join(m[1:], " / "))
		}
		return out
	}
	hourDepth := depthCells(hour)
	require.Len(t, hourDepth, 60)
	require.Equal(t, []string{"0 / 0.00 s / 0", "— / — / —", "2 / 30.0 s / 1"}, hourDepth[57:], "05:06, 05:07 (no sample), 05:08")
	require.Equal(t, "— / — / —", hourDepth[0])
	dayDepth := depthCells(day)
	require.Equal(t, "2 / 30.0 s / 1", dayDepth[95])
	require.Equal(t, "— / — / —", dayDepth[94])

	// Now: the last five minutes hold all six attempts.
	require.True(t, strings.Contains(body, `id="success-now">66.7 %<`), `id="success-now">66.7 %<`)
	require.True(t, strings.Contains(body, `id="retry-now">16.7 %<`), `id="retry-now">16.7 %<`)
	require.True(t, strings.Contains(body, `id="exhausted-now">16.7 %<`), `id="exhausted-now">16.7 %<`)
	require.True(t, strings.Contains(body, `id="rate-now">0.02<`), "6 attempts in 5 minutes")
	require.True(t, regexp.MustCompile(`id="latency-now">[34][0-9]\.[0-9]+ ms / [34][0-9]\.[0-9]+ ms<`).MatchString(body), "latency now")
	require.True(t, strings.Contains(body, `id="dead-depth">1<`), `id="dead-depth">1<`)
	require.True(t, strings.Contains(body, `id="due-now">2<`), "the two events; the retry is due in an hour")
}
