package e2e

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/heraldhooks/herald/internal/app"
	"github.com/heraldhooks/herald/internal/config"
	"github.com/heraldhooks/herald/internal/store/pgstore/pgtest"
	"github.com/heraldhooks/herald/internal/testdb"
)

// BenchmarkIdleEventToArrival measures, on the real clock, how long a new
// event takes to reach a healthy receiver when the server is idle: one
// event at a time, from the ingest call to the receiver's handler. It is
// the wake-up path (LISTEN/NOTIFY on PostgreSQL, in process on SQLite), not
// the poll interval, that makes it fast. Run with:
//
//	go test -run '^$' -bench IdleEventToArrival -benchtime 200x ./internal/e2e
func BenchmarkIdleEventToArrival(b *testing.B) {
	for _, backend := range []string{"SQLite", "PostgreSQL"} {
		b.Run(backend, func(b *testing.B) {
			api := benchApp(b, backend, time.Minute) // only wake-ups can explain a fast arrival
			arrived := make(chan struct{}, 1)
			rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				arrived <- struct{}{}
			}))
			defer rcv.Close()
			post := func(path, body string) {
				req, _ := http.NewRequest("POST", api.URL+path, strings.NewReader(body))
				req.Header.Set("Authorization", "Bearer "+testAPIKey)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				resp.Body.Close()
				if resp.StatusCode >= 300 {
					b.Fatalf("%s: %d", path, resp.StatusCode)
				}
			}
			post("/v1/endpoints", fmt.Sprintf(`{"url":%q}`, rcv.URL))
			var worst time.Duration
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				t0 := time.Now()
				post("/v1/events", `{"event_type":"a.b","payload":{"n":1}}`)
				select {
				case <-arrived:
				case <-time.After(30 * time.Second):
					b.Fatal("no arrival")
				}
				if d := time.Since(t0); d > worst {
					worst = d
				}
			}
			b.ReportMetric(float64(worst.Microseconds())/1000, "max-ms")
		})
	}
}

// benchApp runs the whole app on backend ("SQLite" or "PostgreSQL", a fresh
// database) with the given poll interval, dispatching on the real clock,
// until the benchmark ends, and returns its API server.
func benchApp(b *testing.B, backend string, poll time.Duration) *httptest.Server {
	b.Helper()
	db := "sqlite://" + testdb.SQLitePath(b)
	if backend == "PostgreSQL" {
		db = pgtest.URL(b)
	}
	cfg := config.Default()
	cfg.DB = db
	cfg.APIKey = testAPIKey
	cfg.EncryptionKey = encryptionKeyFor(db)
	cfg.AllowPrivateNetworks = true
	cfg.PollInterval = poll
	ctx, cancel := context.WithCancel(context.Background())
	b.Cleanup(cancel)
	a, err := app.New(ctx, cfg, app.Deps{}, true)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { a.Close() })
	go func() { _ = a.Dispatcher.Run(ctx) }()
	api := httptest.NewServer(a.Handler)
	b.Cleanup(api.Close)
	return api
}
