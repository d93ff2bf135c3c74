package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/require"

	"github.com/heraldhooks/herald/internal/app"
	"github.com/heraldhooks/herald/internal/config"
	"github.com/heraldhooks/herald/internal/syncbuf"
	"github.com/heraldhooks/herald/internal/testdb"
)

// scrape is one parsed /metrics answer: each sample under its name and
// sorted labels, as in `herald_attempts_total{class="success"}`; a
// histogram gives its name_count and name_sum.
type scrape map[string]float64

// get is the sample's value, 0 when the scrape lacks it (a counter never
// touched).
func (s scrape) get(series string) float64 { return s[series] }

// has says whether the scrape holds the sample.
func (s scrape) has(series string) bool {
	_, ok := s[series]
	return ok
}

// getMetrics scrapes url over HTTP, with no API key, and parses the text
// exposition format.
func getMetrics(t *testing.T, url string) scrape {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, "GET %s: %s", url, body)
	parser := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := parser.TextToMetricFamilies(strings.NewReader(string(body)))
	require.NoError(t, err, "the answer parses as the Prometheus text format")
	out := scrape{}
	for name, mf := range mfs {
		for _, m := range mf.GetMetric() {
			key := name + labelString(m.GetLabel())
			switch {
			case m.Counter != nil:
				out[key] = m.Counter.GetValue()
			case m.Gauge != nil:
				out[key] = m.Gauge.GetValue()
			case m.Histogram != nil:
				out[name+"_count"+labelString(m.GetLabel())] = float64(m.Histogram.GetSampleCount())
				out[name+"_sum"+labelString(m.GetLabel())] = m.Histogram.GetSampleSum()
			}
		}
	}
	return out
}

func labelString(lps []*dto.LabelPair) string {
	if len(lps) == 0 {
		return ""
	}
	parts := make([]string, len(lps))
	for i, lp := range lps {
		parts[i] = fmt.Sprintf("%s=%q", lp.GetName(), lp.GetValue())
	}
	sort.Strings(parts)
	return "{" + strings.Join(parts, ",") + "}"
}

// metrics scrapes the node's /metrics.
func (e *env) metrics() scrape {
	e.t.Helper()
	return getMetrics(e.t, e.api.URL+"/metrics")
}

// waitMetrics scrapes until cond holds and returns that scrape. Outcomes
// are counted just after they are written, and the queue gauges are cached
// for a second, so a scrape may trail what the API already shows.
func (e *env) waitMetrics(what string, cond func(s scrape) bool) scrape {
	e.t.Helper()
	var s scrape
	waitFor(e.t, what, func() bool {
		s = e.metrics()
		return cond(s)
	})
	return s
}

// TestMetricsFollowDeliveries scrapes /metrics as Prometheus would and
// watches the counters move with one delivered, one retried and one dead
// delivery.
func TestMetricsFollowDeliveries(t *testing.T) {
	t.Parallel()
	backends(t, func(t *testing.T, db string) {
		e := setup(t, db)

		t.Run("NeedsNoKeyAndStartsAtZero", func(t *testing.T) {
			s := e.metrics() // getMetrics sends no Authorization header
			for _, series := range []string{
				`herald_events_ingested_total`,
				`herald_deliveries_total{outcome="delivered"}`,
				`herald_deliveries_total{outcome="retry"}`,
				`herald_deliveries_total{outcome="dead"}`,
				`herald_deliveries_redelivered_total`,
				`herald_attempts_skipped_lease_expired_total`,
				`herald_attempts_total{class="success"}`,
				`herald_attempts_total{class="retryable"}`,
				`herald_attempts_total{class="gone"}`,
				`herald_attempts_total{class="client_error"}`,
				`herald_attempt_duration_seconds_count`,
				`herald_delivery_latency_seconds_count`,
				`herald_attempts_in_flight`,
				`herald_dead_letter_depth`,
				`herald_queue_due`,
				`herald_queue_oldest_due_age_seconds`,
				`herald_deliveries_by_status{status="pending"}`,
			} {
				require.True(t, s.has(series), "%s is exposed from the start", series)
				require.Zero(t, s.get(series), series)
			}
			require.True(t, s.has("go_goroutines"), "the Go collector is registered")

			resp, err := http.Post(e.api.URL+"/metrics", "text/plain", nil)
			require.NoError(t, err)
			resp.Body.Close()
			require.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode)
			require.Equal(t, http.StatusUnauthorized, statusWithoutKey(t, e.api.URL+"/v1/stats"), "/v1 still needs the key")
		})

		ok := newReceiver(t, e.clock, nil)
		flaky := newReceiver(t, e.clock, func(n int, _ *http.Request, w http.ResponseWriter) {
			if n == 1 {
				w.WriteHeader(http.StatusServiceUnavailable)
				return
			}
			w.WriteHeader(http.StatusOK)
		})
		bad := newReceiver(t, e.clock, func(_ int, _ *http.Request, w http.ResponseWriter) {
			w.WriteHeader(http.StatusBadRequest)
		})
		e.createEndpoint(map[string]any{"consumer_id": "ok", "url": ok.URL})
		e.createEndpoint(map[string]any{"consumer_id": "flaky", "url": flaky.URL, "retry_schedule": []string{"0s", "1m"}})
		e.createEndpoint(map[string]any{"consumer_id": "bad", "url": bad.URL})

		t.Run("Delivered", func(t *testing.T) {
			id := e.send("ok", "order.created", `{"n":1}`).Deliveries[0].ID
			e.waitStatus(id, "delivered")
			s := e.waitMetrics("the delivery to be counted", func(s scrape) bool {
				return s.get(`herald_deliveries_total{outcome="delivered"}`) == 1
			})
			require.Equal(t, 1.0, s.get(`herald_events_ingested_total`))
			require.Equal(t, 1.0, s.get(`herald_attempts_total{class="success"}`))
			require.Equal(t, 1.0, s.get(`herald_attempt_duration_seconds_count`))
			require.Equal(t, 1.0, s.get(`herald_delivery_latency_seconds_count`))
			// The test clock stood still: accepted and delivered at the same instant.
			require.Equal(t, 0.0, s.get(`herald_delivery_latency_seconds_sum`))
			require.Equal(t, 0.0, s.get(`herald_attempts_in_flight`))
		})

		t.Run("Retry", func(t *testing.T) {
			id := e.send("flaky", "order.created", `{"n":2}`).Deliveries[0].ID
			flaky.waitHits(t, 1)
			d := e.waitStatus(id, "pending")
			require.Equal(t, 1, d.AttemptCount)
			s := e.waitMetrics("the retry to be counted", func(s scrape) bool {
				return s.get(`herald_deliveries_total{outcome="retry"}`) == 1
			})
			require.Equal(t, 2.0, s.get(`herald_events_ingested_total`))
			require.Equal(t, 1.0, s.get(`herald_attempts_total{class="retryable"}`))
			require.Equal(t, 1.0, s.get(`herald_attempts_total{class="success"}`))
			require.Equal(t, 1.0, s.get(`herald_deliveries_total{outcome="delivered"}`))
			require.Equal(t, 0.0, s.get(`herald_deliveries_total{outcome="dead"}`))
			require.Equal(t, 1.0, s.get(`herald_delivery_latency_seconds_count`), "a retry is not a delivery")
			s = e.waitMetrics("the queue gauges to show the retry waiting", func(s scrape) bool {
				return s.get(`herald_deliveries_by_status{status="pending"}`) == 1
			})
			require.Equal(t, 0.0, s.get(`herald_queue_due`), "the retry is not due yet")

			// A minute and a bit later (the schedule's 1 m, +20 % jitter at
			// most) it is due and goes out again, and is delivered.
			e.tick(73 * time.Second)
			e.waitStatus(id, "delivered")
			s = e.waitMetrics("the late delivery to be counted", func(s scrape) bool {
				return s.get(`herald_deliveries_total{outcome="delivered"}`) == 2
			})
			require.Equal(t, 2.0, s.get(`herald_attempts_total{class="success"}`))
			require.Equal(t, 2.0, s.get(`herald_delivery_latency_seconds_count`))
			require.Equal(t, 73.0, s.get(`herald_delivery_latency_seconds_sum`), "accepted 73 s before its delivery, on the test clock")
		})

		t.Run("Dead", func(t *testing.T) {
			id := e.send("bad", "order.created", `{"n":3}`).Deliveries[0].ID
			e.waitStatus(id, "dead")
			s := e.waitMetrics("the dead delivery to be counted", func(s scrape) bool {
				return s.get(`herald_deliveries_total{outcome="dead"}`) == 1
			})
			require.Equal(t, 1.0, s.get(`herald_deliveries_dead_total{reason="client_error"}`))
			require.Equal(t, 1.0, s.get(`herald_attempts_total{class="client_error"}`))
			require.Equal(t, 3.0, s.get(`herald_events_ingested_total`))
			require.Equal(t, 4.0, s.get(`herald_attempt_duration_seconds_count`), "four attempts in all")
			s = e.waitMetrics("the dead-letter depth to show it", func(s scrape) bool {
				return s.get(`herald_dead_letter_depth`) == 1
			})
			require.Equal(t, 1.0, s.get(`herald_deliveries_by_status{status="dead"}`))
			require.Equal(t, 0.0, s.get(`herald_deliveries_by_status{status="pending"}`))
			require.Equal(t, 0.0, s.get(`herald_deliveries_by_status{status="delivering"}`))
			require.False(t, s.has(`herald_deliveries_by_status{status="delivered"}`), "the delivered are history: GET /v1/stats counts them")
		})

		t.Run("DuplicatesAreNotIngested", func(t *testing.T) {
			body := []byte(`{"consumer_id":"nobody","event_type":"order.created","payload":{},"idempotency_key":"k1"}`)
			e.must(http.StatusAccepted, "POST", "/v1/events", body, nil)
			e.must(http.StatusOK, "POST", "/v1/events", body, nil)
			e.must(http.StatusAccepted, "POST", "/v1/events/batch",
				[]byte(`{"events":[{"consumer_id":"nobody","event_type":"order.created","payload":{}},`+
					`{"consumer_id":"nobody","event_type":"order.created","payload":{},"idempotency_key":"k1"}]}`), nil)
			require.Equal(t, 5.0, e.metrics().get(`herald_events_ingested_total`), "3 before, then 2 new of 4 sent")
		})
	})
}

func statusWithoutKey(t *testing.T, url string) int {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	resp.Body.Close()
	return resp.StatusCode
}

// TestWorkerServesMetrics: `herald worker --metrics-addr` serves /metrics
// while it dispatches, and stops serving when it stops.
func TestWorkerServesMetrics(t *testing.T) {
	t.Parallel()
	cfg := config.Default()
	cfg.DB = "sqlite://" + testdb.SQLitePath(t)
	cfg.MetricsAddr = "127.0.0.1:0" // the port the system picks, which the log tells
	var logs syncbuf.Buffer
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	a, err := app.New(ctx, cfg, app.Deps{Logger: slog.New(slog.NewTextHandler(&logs, nil))}, false)
	require.NoError(t, err)
	defer a.Close()
	require.Nil(t, a.Handler, "a worker has no API")
	done := make(chan error, 1)
	go func() { done <- a.Work(ctx) }()

	addr := servingAddr(t, &logs, "metrics")
	url := "http://" + addr + "/metrics"
	waitFor(t, "the worker's metrics listener", func() bool {
		resp, err := http.Get(url)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return true
	})
	s := getMetrics(t, url)
	require.True(t, s.has(`herald_attempts_in_flight`))
	require.True(t, s.has(`herald_dead_letter_depth`))
	require.Equal(t, http.StatusNotFound, statusWithoutKey(t, "http://"+addr+"/v1/stats"), "a worker serves metrics only")

	stop()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(30 * time.Second):
		t.Fatal("the worker did not stop")
	}
	_, err = http.Get(url)
	require.Error(t, err, "the metrics listener is closed with the worker")
}

// TestAttemptLogs runs a delivery and a failing one with a JSON logger at
// debug level: every line is JSON, each attempt logs one line (debug when it
// succeeds, warn when it fails) with the delivery's keys, and neither an
// endpoint secret nor an API key appears anywhere.
func TestAttemptLogs(t *testing.T) {
	t.Parallel()
	backends(t, func(t *testing.T, db string) {
		var logs syncbuf.Buffer
		logger := slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
		e := setup(t, db, func(o *options) { o.logger = logger })

		ok := newReceiver(t, e.clock, nil)
		failing := newReceiver(t, e.clock, func(_ int, _ *http.Request, w http.ResponseWriter) {
			w.WriteHeader(http.StatusInternalServerError)
			fmt.Fprint(w, "receiver fell over")
		})
		epOK := e.createEndpoint(map[string]any{"consumer_id": "ok", "url": ok.URL})
		epFail := e.createEndpoint(map[string]any{"consumer_id": "fail", "url": failing.URL})
		// A rotation makes two secrets sign the next deliveries.
		var rotated endpointJSON
		e.must(http.StatusOK, "POST", "/v1/endpoints/"+epOK.ID+"/rotate-secret", nil, &rotated)
		require.NotEqual(t, epOK.Secret, rotated.Secret)

		okEv := e.send("ok", "order.created", `{"n":1}`)
		failEv := e.send("fail", "order.created", `{"n":2}`)
		e.waitStatus(okEv.Deliveries[0].ID, "delivered")
		failing.waitHits(t, 1)
		waitFor(t, "the failed attempt to be recorded", func() bool {
			return e.delivery(failEv.Deliveries[0].ID).AttemptCount == 1
		})
		// A call with a wrong key must not leave that key in the log either.
		const wrongKey = "not-the-key-but-secret-all-the-same"
		req, err := http.NewRequest("GET", e.api.URL+"/v1/stats", nil)
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+wrongKey)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusUnauthorized, resp.StatusCode)

		var attempts map[string]map[string]any // by delivery id
		waitFor(t, "both attempts to be logged", func() bool {
			attempts = attemptLines(t, logs.String())
			return len(attempts) == 2
		})

		want := map[string]struct {
			endpoint, event, level string
			status                 float64
		}{
			okEv.Deliveries[0].ID:   {epOK.ID, okEv.ID, "DEBUG", 200},
			failEv.Deliveries[0].ID: {epFail.ID, failEv.ID, "WARN", 500},
		}
		for id, w := range want {
			line := attempts[id]
			require.NotNil(t, line, "an attempt line for %s", id)
			require.Equal(t, w.level, line["level"], "successes at debug, failures at warn")
			require.Equal(t, w.endpoint, line["endpoint_id"])
			require.Equal(t, w.event, line["event_id"])
			require.Equal(t, 1.0, line["attempt"])
			require.Equal(t, w.status, line["status_code"])
			require.Contains(t, line, "duration_ms")
			require.IsType(t, 0.0, line["duration_ms"])
		}

		all := logs.String()
		for name, secret := range map[string]string{
			"the API key":                 testAPIKey,
			"a wrong API key":             wrongKey,
			"the first endpoint secret":   epOK.Secret,
			"the rotated endpoint secret": rotated.Secret,
			"the failing endpoint secret": epFail.Secret,
		} {
			require.NotContains(t, all, secret, "%s is in the log", name)
			require.NotContains(t, all, strings.TrimPrefix(secret, "whsec_"), "the key part of %s is in the log", name)
		}
	})
}

// attemptLines parses every line of a JSON log, failing on one that is not
// JSON, and returns the "attempt" lines by delivery id. A delivery with
// more than one attempt line is a failure: each attempt logs once.
func attemptLines(t *testing.T, logs string) map[string]map[string]any {
	t.Helper()
	out := map[string]map[string]any{}
	sc := bufio.NewScanner(strings.NewReader(logs))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		var line map[string]any
		require.NoError(t, json.Unmarshal(sc.Bytes(), &line), "a log line that is not JSON: %s", sc.Text())
		for _, k := range []string{"time", "level", "msg"} {
			require.Contains(t, line, k)
		}
		if line["msg"] != "attempt" {
			continue
		}
		for _, k := range []string{"delivery_id", "endpoint_id", "event_id", "attempt", "status_code", "duration_ms"} {
			require.Contains(t, line, k, "attempt line %s", sc.Text())
		}
		id, _ := line["delivery_id"].(string)
		require.NotContains(t, out, id, "one line per attempt")
		out[id] = line
	}
	require.NoError(t, sc.Err())
	return out
}
