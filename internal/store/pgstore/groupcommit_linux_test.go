package pgstore

import (
	"fmt"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhooks/herald"
	"github.com/heraldhooks/herald/internal/store"
	"github.com/heraldhooks/herald/internal/testdb"
)

// BenchmarkIngestEventsPerTransaction: one caller ingesting single
// events, then the same events two, four and eight to a call (a group's
// transaction), to one endpoint, leased at ingest, their successes
// written in threes that ride the ingests, as at 300 events/s. It
// reports the CPU of this process and of the PostgreSQL server (when it
// runs on this machine) per event: what a transaction's statements cost
// against what its rows do.
func BenchmarkIngestEventsPerTransaction(b *testing.B) {
	for _, k := range []int{1, 2, 4, 8} {
		b.Run(fmt.Sprint("events=", k), func(b *testing.B) { benchEventsPerTransaction(b, k) })
	}
}

// takeAll is a Taker that leases as much as asked and keeps what it is
// handed.
type takeAll struct {
	mu    sync.Mutex
	taken []*store.ClaimedDelivery
}

func (t *takeAll) Reserve(n int) store.Reservation {
	return store.Reservation{Slots: n, From: time.Now(), LeaseMargin: time.Minute}
}
func (t *takeAll) ReserveBatch(n int) store.Reservation { return t.Reserve(n) }
func (t *takeAll) Take(_ store.Reservation, c []*store.ClaimedDelivery) {
	t.mu.Lock()
	t.taken = append(t.taken, c...)
	t.mu.Unlock()
}

func benchEventsPerTransaction(b *testing.B, k int) {
	s := openFresh(b)
	s.groups.linger = -1
	taker := &takeAll{}
	s.SetTaker(taker)
	groupEndpoint(b, s, "c", herald.DefaultMaxInFlight)
	payload := []byte(`{"pad":"` + strings.Repeat("x", 1000) + `"}`)
	const outcomesPerWrite = 3
	writing := make(chan struct{}, 1)
	write := func(leased []*store.ClaimedDelivery) {
		defer func() { <-writing }()
		outcomes := make([]store.DeliveryOutcome, len(leased))
		for i, c := range leased {
			outcomes[i] = store.DeliveryOutcome{
				Lease:   store.Lease{DeliveryID: c.Delivery.ID, LeaseToken: c.LeaseToken},
				Attempt: herald.Attempt{Number: 1, Duration: time.Millisecond, StatusCode: 200},
				Status:  herald.StatusDelivered,
			}
		}
		if _, err := s.DeliveryCompleteMany(b.Context(), &store.DeliveryCompleteManyParams{Outcomes: outcomes}); err != nil {
			b.Error(err)
		}
	}
	pg0, pgOK := testdb.PostgresCPU()
	self0 := selfCPU(b)
	b.ResetTimer()
	for i := 0; i < b.N; i += k {
		items := make([]store.EventIngestItem, min(k, b.N-i))
		for j := range items {
			items[j] = store.EventIngestItem{ConsumerID: "c", EventType: "a.b", Payload: payload}
		}
		_, err := s.EventIngest(b.Context(), &store.EventIngestParams{Events: items})
		require.NoError(b, err)
		taker.mu.Lock()
		if len(taker.taken) >= outcomesPerWrite {
			select {
			case writing <- struct{}{}:
				go write(taker.taken[:outcomesPerWrite:outcomesPerWrite])
				taker.taken = taker.taken[outcomesPerWrite:]
			default:
			}
		}
		taker.mu.Unlock()
	}
	writing <- struct{}{}
	<-writing
	if len(taker.taken) > 0 {
		writing <- struct{}{}
		write(taker.taken)
	}
	b.StopTimer()
	b.ReportMetric(float64((selfCPU(b)-self0).Microseconds())/1000/float64(b.N), "go-ms/event")
	if pg1, ok := testdb.PostgresCPU(); pgOK && ok {
		b.ReportMetric(float64((pg1-pg0).Microseconds())/1000/float64(b.N), "pg-ms/event")
	}
}

// selfCPU is this process's CPU time, user and system.
func selfCPU(tb testing.TB) time.Duration {
	var ru syscall.Rusage
	require.NoError(tb, syscall.Getrusage(syscall.RUSAGE_SELF, &ru))
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
