package api_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/heraldhooks/herald"
	"github.com/heraldhooks/herald/internal/api"
	"github.com/heraldhooks/herald/internal/store"
	"github.com/heraldhooks/herald/internal/store/sqlitestore"
	"github.com/heraldhooks/herald/internal/store/sqlitestore/sqlitetest"
)

// BenchmarkIngestAPI measures POST /v1/events and /v1/events/batch through
// the API's handler (in process, no network) on SQLite, with a 1 KiB
// payload: with an empty catalog, with 20 schemas of other types in it,
// and with a schema for the event's own type. The first two must cost
// what ingest cost before the catalog existed: a type without a schema
// costs a map lookup.
func BenchmarkIngestAPI(b *testing.B) {
	payload := `{"order_id":"o_1","pad":"` + strings.Repeat("x", 1024-28) + `"}`
	schema := `{"type":"object","required":["order_id"],"properties":{"order_id":{"type":"string"},"pad":{"type":"string","maxLength":2048}}}`
	cases := []struct {
		name    string
		entries int  // other types with a schema
		own     bool // the event's type has a schema
		batch   int  // events per call; 0: POST /v1/events
		par     bool
	}{
		{name: "Single/catalog=empty"},
		{name: "Single/catalog=20,type=unlisted", entries: 20},
		{name: "Single/catalog=20,type=schema", entries: 20, own: true},
		{name: "SingleParallel/catalog=empty", par: true},
		{name: "SingleParallel/catalog=20,type=schema", entries: 20, own: true, par: true},
		{name: "Batch=100/catalog=empty", batch: 100},
		{name: "Batch=100/catalog=20,type=schema", entries: 20, own: true, batch: 100},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			st, err := sqlitestore.Open(b.Context(), sqlitetest.Path(b), nil)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { st.Close() })
			if err := st.Migrate(b.Context()); err != nil {
				b.Fatal(err)
			}
			addType := func(name string) {
				_, err := st.EventTypeCreate(b.Context(), &store.EventTypeCreateParams{
					Entry: &herald.EventTypeEntry{Name: name, Schema: json.RawMessage(schema)},
				})
				if err != nil {
					b.Fatal(err)
				}
			}
			for i := range c.entries {
				addType(fmt.Sprintf("other.type%d", i))
			}
			if c.own {
				addType("order.created")
			}
			h := api.New(api.Config{Store: st, APIKeyHash: sha256.Sum256([]byte(testKey))})
			event := `{"consumer_id":"c1","event_type":"order.created","payload":` + payload + `}`
			path, body := "/v1/events", event
			if c.batch > 0 {
				path, body = "/v1/events/batch", `{"events":[`+strings.TrimSuffix(strings.Repeat(event+",", c.batch), ",")+`]}`
			}
			send := func() {
				req := httptest.NewRequest(http.MethodPost, path, strings.NewReader(body))
				req.Header.Set("Authorization", "Bearer "+testKey)
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, req)
				if rec.Code != http.StatusAccepted {
					panic(fmt.Sprintf("%d %s", rec.Code, bytes.TrimSpace(rec.Body.Bytes())))
				}
			}
			send() // the catalog is loaded before the clock starts
			events := max(c.batch, 1)
			b.SetBytes(int64(len(payload) * events))
			b.ResetTimer()
			if c.par {
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						send()
					}
				})
			} else {
				for b.Loop() {
					send()
				}
			}
			b.ReportMetric(float64(b.N*events)/b.Elapsed().Seconds(), "events/s")
		})
	}
}
