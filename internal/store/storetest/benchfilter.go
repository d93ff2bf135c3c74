package storetest

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/heraldhooks/herald/internal/store"
)

// benchFilters measures ingest of single 1 KiB events for one consumer
// with 0, 10 and 100 endpoints: without filters (filter=none), with a
// filter each that passes (filter=pass: the same deliveries, and the
// filters evaluated) and with one each that fails (filter=skip: no
// deliveries, a skip recorded per endpoint). pass minus none, over the
// endpoints, is what a filter costs an event at fan-out.
func benchFilters(b *testing.B, open func(b *testing.B) store.Store) {
	b.Run("IngestFiltered/endpoints=0", func(b *testing.B) {
		benchIngestFiltered(b, open(b), 0, "")
	})
	for _, n := range []int{10, 100} {
		for _, f := range []struct{ name, filter string }{
			{"none", ""},
			{"pass", "payload.amount > 1000 && payload.currency == 'EUR'"},
			{"skip", "payload.amount > 1000 && payload.currency == 'USD'"},
		} {
			b.Run(fmt.Sprintf("IngestFiltered/endpoints=%d/filter=%s", n, f.name), func(b *testing.B) {
				benchIngestFiltered(b, open(b), n, f.filter)
			})
		}
	}
}

// benchIngestFiltered ingests single events for one consumer with n
// endpoints, each with filter ("" none).
func benchIngestFiltered(b *testing.B, s store.Store, n int, filter string) {
	for range n {
		ep := newEndpoint("bench_filtered")
		ep.Filter = filter
		if _, err := s.EndpointCreate(b.Context(), &store.EndpointCreateParams{Endpoint: ep}); err != nil {
			b.Fatal(err)
		}
	}
	payload := []byte(`{"id":"ord_1","amount":5000,"currency":"EUR","customer":{"id":"cus_9","country":"FR"},"note":"` +
		strings.Repeat("x", 900) + `"}`)
	want := n
	if strings.Contains(filter, "USD") {
		want = 0
	}
	b.SetBytes(int64(len(payload)))
	b.ResetTimer()
	start := time.Now()
	events := 0
	for b.Loop() {
		res, err := s.EventIngest(b.Context(), &store.EventIngestParams{Events: []store.EventIngestItem{{
			ConsumerID: "bench_filtered", EventType: "order.paid", Payload: payload,
		}}})
		if err != nil {
			b.Fatal(err)
		}
		if len(res[0].Deliveries) != want {
			b.Fatalf("%d deliveries, want %d", len(res[0].Deliveries), want)
		}
		events++
	}
	b.ReportMetric(float64(events)/time.Since(start).Seconds(), "events/s")
}
