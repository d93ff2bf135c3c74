package web_test

import (
	"crypto/sha256"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/heraldhooks/herald/internal/api"
	"github.com/heraldhooks/herald/internal/auth"
	"github.com/heraldhooks/herald/internal/store/sqlitestore"
	"github.com/heraldhooks/herald/internal/testdb"
	"github.com/heraldhooks/herald/internal/web"
	"github.com/heraldhooks/herald/internal/wire"
)

// Sizes of the dashboard benchmark's data: benchEndpoints endpoints over
// benchConsumers consumers (so every event fans out to
// benchEndpoints/benchConsumers endpoints), and benchEvents events.
const (
	benchEndpoints = 100_000
	benchConsumers = 1_000
	benchEvents    = 5_000
)

// BenchmarkUIPages renders each dashboard page, server side, as a signed-in
// operator, on SQLite with 100,000 endpoints and benchEvents events fanned
// out to 100 endpoints each (500,000 deliveries). Each page must answer
// in under 100 ms; the benchmark fails when one does not.
func BenchmarkUIPages(b *testing.B) {
	ctx := b.Context()
	st, err := sqlitestore.Open(ctx, testdb.SQLitePath(b), nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	if err := st.Migrate(ctx); err != nil {
		b.Fatal(err)
	}
	srv := api.New(api.Config{Store: st, APIKeyHash: sha256.Sum256([]byte(operatorKey)), AllowPrivateNetworks: true})
	op := auth.Operator("")
	seeded := time.Now()
	var someEndpoint string
	for i := range benchEndpoints {
		var ep wire.Endpoint
		body := map[string]any{"consumer_id": fmt.Sprintf("c%d", i%benchConsumers), "url": fmt.Sprintf("http://127.0.0.1:9/hook/%d", i)}
		if err := srv.Call(ctx, op, http.MethodPost, "/v1/endpoints", body, &ep); err != nil {
			b.Fatal(err)
		}
		someEndpoint = ep.ID
	}
	var someEvent, someDelivery string
	const batch = 100
	for i := 0; i < benchEvents; i += batch {
		events := make([]map[string]any, batch)
		for j := range events {
			events[j] = map[string]any{"consumer_id": fmt.Sprintf("c%d", (i+j)%benchConsumers), "event_type": "order.created",
				"payload": map[string]any{"n": i + j, "note": strings.Repeat("x", 200)}}
		}
		var res wire.BatchResult
		if err := srv.Call(ctx, op, http.MethodPost, "/v1/events/batch", map[string]any{"events": events}, &res); err != nil {
			b.Fatal(err)
		}
		someEvent, someDelivery = res.Data[0].ID, res.Data[0].Deliveries[0].ID
	}
	b.Logf("seeded %d endpoints and %d events (%d deliveries) in %s", benchEndpoints, benchEvents,
		benchEvents*benchEndpoints/benchConsumers, time.Since(seeded).Round(time.Second))

	ui := web.NewUI(web.UIConfig{API: srv, Sessions: st})
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodPost, "/ui/sign-in", strings.NewReader(url.Values{"api_key": {operatorKey}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	ui.ServeHTTP(rec, req)
	cookies := rec.Result().Cookies()
	if rec.Code != http.StatusSeeOther || len(cookies) == 0 {
		b.Fatalf("sign-in answered %d", rec.Code)
	}

	for _, page := range []struct{ name, path string }{
		{"Overview", "/ui/"},
		{"Endpoints", "/ui/endpoints"},
		{"EndpointsOfAConsumer", "/ui/endpoints?consumer_id=c7"},
		{"Endpoint", "/ui/endpoints/" + someEndpoint},
		{"Events", "/ui/events"},
		{"EventsOfATypeAndConsumer", "/ui/events?event_type=order.created&consumer_id=c7"},
		{"Event", "/ui/events/" + someEvent},
		{"DeadLetters", "/ui/dead"},
		{"Delivery", "/ui/deliveries/" + someDelivery},
	} {
		b.Run(page.name, func(b *testing.B) {
			var worst time.Duration
			for b.Loop() {
				req := httptest.NewRequest(http.MethodGet, page.path, nil)
				req.AddCookie(cookies[0])
				rec := httptest.NewRecorder()
				t0 := time.Now()
				ui.ServeHTTP(rec, req)
				worst = max(worst, time.Since(t0))
				if rec.Code != http.StatusOK {
					b.Fatalf("%s answered %d: %s", page.path, rec.Code, rec.Body.String())
				}
			}
			b.ReportMetric(float64(worst.Microseconds())/1000, "worst-ms")
			if per := b.Elapsed() / time.Duration(b.N); per > 100*time.Millisecond {
				b.Errorf("%s takes %s a page; the dashboard's bound is 100 ms", page.path, per)
			}
		})
	}
}
