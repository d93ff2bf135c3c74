package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

// BenchmarkRetryOnTime measures, on the real clock, how late a retry goes
// after its due time: each event's first attempt fails, its retry is due
// 1.2 s later (with the schedule's jitter), and the lateness is the second
// arrival's time less the delivery's next_attempt_at as the API shows it.
// The poll interval is a minute, so only the dispatcher's sleep until the
// next due time can make it punctual. Run with:
//
//	go test -run '^$' -bench RetryOnTime -benchtime 10x ./internal/e2e
func BenchmarkRetryOnTime(b *testing.B) {
	for _, backend := range []string{"SQLite", "PostgreSQL"} {
		b.Run(backend, func(b *testing.B) {
			api := benchApp(b, backend, time.Minute)

			var mu sync.Mutex
			seen := map[string]int{}
			retried := make(chan time.Time, 1)
			rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				id := r.Header.Get("webhook-id")
				mu.Lock()
				seen[id]++
				n := seen[id]
				mu.Unlock()
				if n == 1 {
					w.WriteHeader(http.StatusServiceUnavailable)
					return
				}
				retried <- time.Now()
			}))
			defer rcv.Close()
			call := func(method, path, body string, out any) {
				req, _ := http.NewRequest(method, api.URL+path, strings.NewReader(body))
				req.Header.Set("Authorization", "Bearer "+testAPIKey)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				defer resp.Body.Close()
				raw, _ := io.ReadAll(resp.Body)
				if resp.StatusCode >= 300 {
					b.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, raw)
				}
				if out != nil {
					if err := json.Unmarshal(raw, out); err != nil {
						b.Fatal(err)
					}
				}
			}
			call("POST", "/v1/endpoints", fmt.Sprintf(`{"url":%q,"retry_schedule":["0s","1200ms"]}`, rcv.URL), nil)

			var late []time.Duration
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				var ev struct {
					Deliveries []struct {
						ID string `json:"id"`
					} `json:"deliveries"`
				}
				call("POST", "/v1/events", `{"event_type":"a.b","payload":{"n":1}}`, &ev)
				var due time.Time
				for deadline := time.Now().Add(10 * time.Second); due.IsZero(); {
					var d struct {
						Status        string     `json:"status"`
						NextAttemptAt *time.Time `json:"next_attempt_at"`
						AttemptCount  int        `json:"attempt_count"`
					}
					call("GET", "/v1/deliveries/"+ev.Deliveries[0].ID, "", &d)
					if d.AttemptCount == 1 && d.Status == "pending" && d.NextAttemptAt != nil {
						due = *d.NextAttemptAt
					} else if time.Now().After(deadline) {
						b.Fatal("the first attempt's failure was not written")
					}
				}
				select {
				case at := <-retried:
					late = append(late, at.Sub(due))
				case <-time.After(30 * time.Second):
					b.Fatal("no retry")
				}
			}
			b.StopTimer()
			sort.Slice(late, func(i, j int) bool { return late[i] < late[j] })
			b.ReportMetric(float64(late[len(late)/2].Microseconds())/1000, "p50-late-ms")
			b.ReportMetric(float64(late[len(late)-1].Microseconds())/1000, "max-late-ms")
		})
	}
}
