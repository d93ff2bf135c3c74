package api_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhooks/herald"
	"github.com/heraldhooks/herald/internal/store"
	"github.com/heraldhooks/herald/internal/wire"
)

func TestAuth(t *testing.T) {
	t.Parallel()
	e := setup(t)

	t.Run("Missing", func(t *testing.T) {
		t.Parallel()
		r := e.doKey("", "GET", "/v1/endpoints", nil)
		msg := r.apiErr(http.StatusUnauthorized, "unauthorized")
		require.Contains(t, msg, "Authorization")
		require.Contains(t, r.header.Get("WWW-Authenticate"), "Bearer")
	})

	t.Run("Wrong", func(t *testing.T) {
		t.Parallel()
		e.doKey("hk_wrong", "GET", "/v1/endpoints", nil).apiErr(http.StatusUnauthorized, "unauthorized")
		e.doKey(testKey+"x", "POST", "/v1/events", `{"event_type":"a","payload":1}`).apiErr(http.StatusUnauthorized, "unauthorized")
	})

	t.Run("NotBearer", func(t *testing.T) {
		t.Parallel()
		e.do("GET", "/v1/stats", nil, "Authorization", "Basic "+testKey).apiErr(http.StatusUnauthorized, "unauthorized")
		e.do("GET", "/v1/stats", nil, "Authorization", testKey).apiErr(http.StatusUnauthorized, "unauthorized")
	})

	t.Run("SchemeIsCaseInsensitive", func(t *testing.T) {
		t.Parallel()
		e.do("GET", "/v1/stats", nil, "Authorization", "bearer "+testKey).must(http.StatusOK, nil)
	})

	t.Run("BeforeRouting", func(t *testing.T) {
		t.Parallel()
		e.doKey("", "GET", "/v1/nothing-here", nil).apiErr(http.StatusUnauthorized, "unauthorized")
		e.doKey("", "DELETE", "/v1/stats", nil).apiErr(http.StatusUnauthorized, "unauthorized")
	})

	t.Run("ProbesNeedNoKey", func(t *testing.T) {
		t.Parallel()
		r := e.doKey("", "GET", "/healthz", nil)
		require.Equal(t, http.StatusOK, r.status)
		require.JSONEq(t, `{"status":"ok"}`, string(r.body))
		r = e.doKey("", "GET", "/readyz", nil)
		require.Equal(t, http.StatusOK, r.status)
		require.JSONEq(t, `{"status":"ok"}`, string(r.body))
	})

	t.Run("NothingWrittenWithoutKey", func(t *testing.T) {
		t.Parallel()
		e.doKey("", "POST", "/v1/endpoints", `{"url":"https://example.com/unauth"}`).apiErr(http.StatusUnauthorized, "unauthorized")
		page, err := e.store.EndpointList(t.Context(), &store.EndpointListParams{})
		require.NoError(t, err)
		for _, ep := range page.Items {
			require.NotEqual(t, "https://example.com/unauth", ep.URL)
		}
	})
}

func TestRouting(t *testing.T) {
	t.Parallel()
	e := setup(t)

	t.Run("UnknownPath", func(t *testing.T) {
		t.Parallel()
		msg := e.do("GET", "/v1/widgets", nil).apiErr(http.StatusNotFound, "not_found")
		require.Contains(t, msg, "/v1/widgets")
		e.do("GET", "/v1/endpoints/ep_1/nope", nil).apiErr(http.StatusNotFound, "not_found")
		e.doKey("", "GET", "/", nil).apiErr(http.StatusNotFound, "not_found")
	})

	t.Run("WrongMethod", func(t *testing.T) {
		t.Parallel()
		for _, tc := range []struct{ method, path, allow string }{
			{"PUT", "/v1/endpoints/ep_1", "DELETE, GET, HEAD, PATCH"},
			{"DELETE", "/v1/events", "GET, HEAD, POST"},
			{"GET", "/v1/deliveries/dlv_1/cancel", "POST"},
			{"POST", "/healthz", "GET, HEAD"},
		} {
			r := e.do(tc.method, tc.path, nil)
			msg := r.apiErr(http.StatusMethodNotAllowed, "method_not_allowed")
			require.Contains(t, msg, tc.method)
			require.Equal(t, tc.allow, r.header.Get("Allow"), "%s %s", tc.method, tc.path)
		}
	})
}

func TestStats(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.createEndpoint(map[string]any{"consumer_id": "c1"})
	e.createEndpoint(map[string]any{"consumer_id": "c1"})
	ev := e.send("c1", "a", `{}`)
	e.send("c1", "a", `{}`)
	e.do("POST", "/v1/deliveries/"+ev.Deliveries[0].ID+"/cancel", nil).must(http.StatusOK, nil)
	e.clock.Advance(90 * time.Second)

	r := e.do("GET", "/v1/stats", nil)
	require.Equal(t, http.StatusOK, r.status)
	require.JSONEq(t, `{
		"deliveries": {"pending": 3, "delivering": 0, "delivered": 0, "dead": 0, "cancelled": 1},
		"dead_letter_depth": 0, "due_now": 3, "oldest_due_age_seconds": 90}`, string(r.body))

	e.do("POST", "/v1/endpoints/"+ev.Deliveries[1].EndpointID+"/disable", nil).must(http.StatusOK, nil)
	var out struct {
		Deliveries      map[herald.Status]int64 `json:"deliveries"`
		DeadLetterDepth int64                   `json:"dead_letter_depth"`
		DueNow          int64                   `json:"due_now"`
	}
	e.do("GET", "/v1/stats", nil).must(http.StatusOK, &out)
	require.Equal(t, int64(2), out.Deliveries[herald.StatusDead])
	require.Equal(t, int64(2), out.DeadLetterDepth)
	require.Equal(t, int64(1), out.DueNow)

	r = e.do("GET", "/v1/stats?counts=false", nil)
	require.Equal(t, http.StatusOK, r.status)
	require.JSONEq(t, `{"dead_letter_depth": 2, "due_now": 1, "oldest_due_age_seconds": 90}`, string(r.body),
		"counts=false leaves the counts by status out")

	e.do("GET", "/v1/stats?verbose=1", nil).apiErr(http.StatusBadRequest, "unknown_parameter")
	e.do("GET", "/v1/stats?counts=no", nil).apiErr(http.StatusBadRequest, "invalid_counts")
}

// TestStatsSeries: the outcome writes' activity comes back as points of a
// minute (the last hour) or 15 minutes (the last day), with rates and
// latency quantiles, up to the minute under way.
func TestStatsSeries(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.createEndpoint(map[string]any{"consumer_id": "c1"})
	for range 4 {
		e.send("c1", "a", `{}`)
	}
	now := e.clock.Now()
	claimed, err := e.store.DeliveryClaim(t.Context(), &store.DeliveryClaimParams{Limit: 10, LeaseMargin: time.Minute, Now: now})
	require.NoError(t, err)
	require.Len(t, claimed, 4)
	outcomes := make([]store.DeliveryOutcome, len(claimed))
	for i, c := range claimed {
		outcomes[i] = store.DeliveryOutcome{Lease: store.Lease{DeliveryID: c.Delivery.ID, LeaseToken: c.LeaseToken},
			Status: herald.StatusDelivered, Attempt: herald.Attempt{StatusCode: 200, Duration: 40 * time.Millisecond}}
	}
	outcomes[3].Status, outcomes[3].Attempt.StatusCode, outcomes[3].RetryIn = herald.StatusPending, 503, time.Minute
	_, err = e.store.DeliveryCompleteMany(t.Context(), &store.DeliveryCompleteManyParams{Outcomes: outcomes, Now: now})
	require.NoError(t, err)

	var s wire.StatsSeries
	e.do("GET", "/v1/stats/series", nil).must(http.StatusOK, &s)
	require.Equal(t, "1h", s.Window)
	require.Len(t, s.Points, 60)
	for _, p := range s.Points {
		require.Zero(t, p.Attempts, "the minute under way is not in the series yet")
		require.Nil(t, p.SuccessRate)
	}

	e.clock.Advance(time.Minute)
	e.do("GET", "/v1/stats/series?window=1h", nil).must(http.StatusOK, &s)
	last := s.Points[59]
	require.Equal(t, now.Truncate(time.Minute), last.At)
	require.Equal(t, int64(4), last.Attempts)
	require.Equal(t, int64(3), last.Succeeded)
	require.Equal(t, int64(1), last.Failed)
	require.Equal(t, int64(1), last.Retries)
	require.InDelta(t, 4.0/60, last.DeliveriesPerSecond, 1e-9)
	require.NotNil(t, last.SuccessRate)
	require.InDelta(t, 0.75, *last.SuccessRate, 1e-9)
	require.NotNil(t, last.LatencyP50MS)
	require.InDelta(t, 40, *last.LatencyP50MS, 15, "40 ms lies in the bucket [35, 50) ms")
	require.NotNil(t, last.LatencyP95MS)

	e.do("GET", "/v1/stats/series?window=24h", nil).must(http.StatusOK, &s)
	require.Equal(t, "15m", s.Step)
	require.Len(t, s.Points, 96)
	var sum int64
	for _, p := range s.Points {
		sum += p.Attempts
		require.InDelta(t, float64(p.Attempts)/900, p.DeliveriesPerSecond, 1e-9)
	}
	require.Equal(t, int64(4), sum)

	for _, p := range s.Points {
		require.Nil(t, p.DueNow, "no depth sampled: unknown, not 0")
		require.Nil(t, p.OldestDueSeconds)
		require.Nil(t, p.Dead)
	}

	e.do("GET", "/v1/stats/series?window=2h", nil).apiErr(http.StatusBadRequest, "invalid_window")
	e.do("GET", "/v1/stats/series?from=x", nil).apiErr(http.StatusBadRequest, "unknown_parameter")
}

// TestStatsSeriesDepth: the queue's depth sampled once a minute comes
// back in the points of the minutes sampled, null elsewhere; a step of 15
// minutes gives the highest of its samples, not their sum.
func TestStatsSeriesDepth(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.createEndpoint(map[string]any{"consumer_id": "c1"})
	sample := func() {
		t.Helper()
		wrote, err := e.store.DepthSample(t.Context(), &store.DepthSampleParams{Now: e.clock.Now()})
		require.NoError(t, err)
		require.True(t, wrote)
	}
	sample() // 12:00, an empty queue
	e.send("c1", "a", `{}`)
	e.send("c1", "a", `{}`)
	e.clock.Advance(2*time.Minute + 30*time.Second)
	sample() // 12:02:30, two due for 2.5 minutes
	e.clock.Advance(time.Minute)
	sample() // 12:03:30, for 3.5 minutes

	type point struct {
		DueNow           *int64   `json:"due_now"`
		OldestDueSeconds *float64 `json:"oldest_due_seconds"`
		Dead             *int64   `json:"dead"`
	}
	var s struct {
		Points []point `json:"points"`
	}
	r := e.do("GET", "/v1/stats/series", nil)
	require.Equal(t, http.StatusOK, r.status)
	require.NoError(t, json.Unmarshal(r.body, &s))
	require.Contains(t, string(r.body), `"due_now":null,"oldest_due_seconds":null,"dead":null`, "no sample: null")
	require.Len(t, s.Points, 60)
	depth := func(p point) string {
		if p.DueNow == nil {
			require.Nil(t, p.OldestDueSeconds)
			require.Nil(t, p.Dead)
			return "none"
		}
		return fmt.Sprintf("%d %g %d", *p.DueNow, *p.OldestDueSeconds, *p.Dead)
	}
	// The series ends with 12:02; 12:03 is under way.
	require.Equal(t, "2 150 0", depth(s.Points[59]))
	require.Equal(t, "none", depth(s.Points[58]), "12:01 has no sample")
	require.Equal(t, "0 0 0", depth(s.Points[57]), "an empty queue is 0, not null")
	require.Equal(t, "none", depth(s.Points[0]))

	e.clock.Advance(time.Hour + 11*time.Minute + 30*time.Second) // 13:15: the steps start at quarter hours
	r = e.do("GET", "/v1/stats/series?window=24h", nil)
	require.Equal(t, http.StatusOK, r.status)
	require.NoError(t, json.Unmarshal(r.body, &s))
	require.Len(t, s.Points, 96)
	var got []string
	for _, p := range s.Points {
		if d := depth(p); d != "none" {
			got = append(got, d)
		}
	}
	require.Equal(t, []string{"2 210 0"}, got, "12:00 to 12:15 in one step: the highest of its three samples")
}

// TestStoreDown: a failing store gives 503 on /readyz and a generic 500
// elsewhere, its detail kept out of the answer.
func TestStoreDown(t *testing.T) {
	t.Parallel()
	e := setup(t)
	require.NoError(t, e.store.Close())

	e.doKey("", "GET", "/readyz", nil).apiErr(http.StatusServiceUnavailable, "not_ready")
	e.doKey("", "GET", "/healthz", nil).must(http.StatusOK, nil)

	for _, path := range []string{"/v1/endpoints", "/v1/stats", "/v1/deliveries"} {
		r := e.do("GET", path, nil)
		msg := r.apiErr(http.StatusInternalServerError, "internal_error")
		require.Equal(t, "internal error; see the server log", msg)
		require.False(t, strings.Contains(string(r.body), "closed") || strings.Contains(string(r.body), "sql"), "%s leaks: %s", path, r.body)
	}
	e.do("POST", "/v1/events", `{"event_type":"a","payload":1}`).apiErr(http.StatusInternalServerError, "internal_error")
}
