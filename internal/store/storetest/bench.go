package storetest

import (
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/heraldhooks/herald"
	"github.com/heraldhooks/herald/internal/bench"
	"github.com/heraldhooks/herald/internal/store"
)

// The benchmarks' shape: what issue targets and BENCHMARKS.md speak of.
const (
	// benchEndpoints is how many endpoints the queue is spread over, each
	// of its own consumer, so an event fans out to one delivery.
	benchEndpoints = 100
	// benchClaim is how many deliveries one claim asks for, as a
	// dispatcher with the default concurrency does.
	benchClaim = 64
	// benchRefill is how many events are queued at a time, timer stopped,
	// when the claim benchmarks run below half of it: a claim deals its
	// limit out over the endpoints with due work, so the queue is kept
	// deep on every endpoint, as under load.
	benchRefill = 5000
)

// Bench measures the hot paths of the backend that open returns: ingest of
// single events and of batches, claim and outcome writes. open must give a
// fresh, migrated, empty store each time it is called and close it when the
// benchmark ends. Each benchmark reports its own unit per delivery or
// event beside ns/op; time is the database's clock (Now zero), as in
// production.
//
//	func BenchmarkStore(b *testing.B) {
//		storetest.Bench(b, func(b *testing.B) store.Store { ... })
//	}
func Bench(b *testing.B, open func(b *testing.B) store.Store) {
	for _, size := range []int{256, 1024, 16 << 10} {
		b.Run(fmt.Sprintf("IngestSingle/payload=%s", sizeName(size)), func(b *testing.B) {
			benchIngest(b, open(b), 1, size, false)
		})
	}
	b.Run("IngestSingleParallel/payload=1KiB", func(b *testing.B) {
		benchIngest(b, open(b), 1, 1024, true)
	})
	for _, batch := range []int{100, 500} {
		b.Run(fmt.Sprintf("IngestBatch/batch=%d/payload=1KiB", batch), func(b *testing.B) {
			benchIngest(b, open(b), batch, 1024, false)
		})
	}
	benchFilters(b, open)
	b.Run("Claim/payload=1KiB", func(b *testing.B) {
		benchClaimComplete(b, open(b), true, false)
	})
	b.Run("Complete/payload=1KiB", func(b *testing.B) {
		benchClaimComplete(b, open(b), false, true)
	})
	b.Run("ClaimComplete/payload=1KiB", func(b *testing.B) {
		benchClaimComplete(b, open(b), true, true)
	})
}

// sizeName names a payload size: 256B, 1KiB, 16KiB.
func sizeName(n int) string {
	if n%1024 == 0 {
		return strconv.Itoa(n/1024) + "KiB"
	}
	return strconv.Itoa(n) + "B"
}

// benchEndpointsFor creates benchEndpoints endpoints, consumer "c<i>" each,
// whose in-flight cap leaves the claim benchmark room to keep deliveries
// leased between its steps.
func benchEndpointsFor(b *testing.B, s store.Store) {
	b.Helper()
	for i := range benchEndpoints {
		ep := newEndpoint("c" + strconv.Itoa(i))
		ep.MaxInFlight = 1 << 20
		if _, err := s.EndpointCreate(b.Context(), &store.EndpointCreateParams{Endpoint: ep}); err != nil {
			b.Fatal(err)
		}
	}
}

// benchItems is n events of payload, one for each consumer in turn from
// *next.
func benchItems(n int, payload []byte, next *atomic.Int64) []store.EventIngestItem {
	items := make([]store.EventIngestItem, n)
	for i := range items {
		k := next.Add(1)
		items[i] = store.EventIngestItem{
			ConsumerID:     "c" + strconv.FormatInt(k%benchEndpoints, 10),
			EventType:      "order.created",
			Payload:        payload,
			IdempotencyKey: "k" + strconv.FormatInt(k, 10),
		}
	}
	return items
}

// benchIngest times EventIngest calls of batch events each; parallel runs
// them from GOMAXPROCS goroutines (times the -cpu flag), as concurrent API
// calls do.
func benchIngest(b *testing.B, s store.Store, batch, size int, parallel bool) {
	benchEndpointsFor(b, s)
	payload := bench.Payload(size)
	var next atomic.Int64
	ingestOnce := func() {
		res, err := s.EventIngest(b.Context(), &store.EventIngestParams{Events: benchItems(batch, payload, &next)})
		if err != nil {
			b.Fatal(err)
		}
		if len(res) != batch || len(res[0].Deliveries) != 1 {
			b.Fatalf("ingest gave %d results, the first with %d deliveries; want %d with 1", len(res), len(res[0].Deliveries), batch)
		}
	}
	b.SetBytes(int64(batch * size))
	b.ResetTimer()
	start := time.Now()
	if parallel {
		b.SetParallelism(4)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				ingestOnce()
			}
		})
	} else {
		for b.Loop() {
			ingestOnce()
		}
	}
	b.ReportMetric(float64(next.Load())/time.Since(start).Seconds(), "events/s")
}

// benchClaimComplete runs claim-then-complete rounds of benchClaim
// deliveries, each completed as delivered, and times the claims, the
// outcome writes, or both. The queue is refilled, timer stopped, whenever
// it runs below half of benchRefill.
func benchClaimComplete(b *testing.B, s store.Store, timeClaim, timeComplete bool) {
	benchEndpointsFor(b, s)
	payload := bench.Payload(1024)
	var next atomic.Int64
	queued := 0
	refill := func() {
		for i := 0; i < benchRefill; i += 500 {
			if _, err := s.EventIngest(b.Context(), &store.EventIngestParams{Events: benchItems(500, payload, &next)}); err != nil {
				b.Fatal(err)
			}
		}
		queued += benchRefill
	}
	refill()
	delivered := 0
	b.ResetTimer()
	start := time.Now()
	var paused time.Duration
	pause := func(f func()) {
		b.StopTimer()
		t := time.Now()
		f()
		paused += time.Since(t)
		b.StartTimer()
	}
	for b.Loop() {
		if queued < benchRefill/2 {
			pause(refill)
		}
		var claimed []*store.ClaimedDelivery
		claimFn := func() {
			var err error
			claimed, err = s.DeliveryClaim(b.Context(), &store.DeliveryClaimParams{Limit: benchClaim, LeaseMargin: time.Second})
			if err != nil {
				b.Fatal(err)
			}
		}
		if timeClaim {
			claimFn()
		} else {
			pause(claimFn)
		}
		if len(claimed) != benchClaim {
			b.Fatalf("claimed %d of %d queued, want %d", len(claimed), queued, benchClaim)
		}
		queued -= len(claimed)
		outcomes := make([]store.DeliveryOutcome, len(claimed))
		now := time.Now()
		for i, c := range claimed {
			outcomes[i] = store.DeliveryOutcome{
				Lease:  store.Lease{DeliveryID: c.Delivery.ID, LeaseToken: c.LeaseToken},
				Status: herald.StatusDelivered,
				Attempt: herald.Attempt{
					Number:      1,
					AttemptedAt: now,
					Duration:    time.Millisecond,
					StatusCode:  200,
					Response:    []byte("ok"),
				},
			}
		}
		completeFn := func() {
			applied, err := s.DeliveryCompleteMany(b.Context(), &store.DeliveryCompleteManyParams{Outcomes: outcomes})
			if err != nil {
				b.Fatal(err)
			}
			for i, ok := range applied {
				if !ok {
					b.Fatalf("outcome %d of %d not applied", i, len(applied))
				}
			}
		}
		if timeComplete {
			completeFn()
		} else {
			pause(completeFn)
		}
		delivered += len(claimed)
	}
	b.ReportMetric(float64(delivered)/(time.Since(start)-paused).Seconds(), "deliveries/s")
}
