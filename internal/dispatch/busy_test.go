package dispatch_test

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhooks/herald"
	"github.com/heraldhooks/herald/internal/clock"
	"github.com/heraldhooks/herald/internal/dispatch"
	"github.com/heraldhooks/herald/internal/sender"
	"github.com/heraldhooks/herald/internal/store"
)

// pacedSender delivers every attempt after its receiver took took on the
// test clock: each attempt moves the clock on, so attempts running
// together move it together, as a busy node's wall clock runs on.
type pacedSender struct {
	clock *clock.Test
	took  time.Duration
}

func (s *pacedSender) Send(context.Context, *sender.Request) sender.Result {
	s.clock.Advance(s.took)
	return sender.Result{Class: sender.Success, StatusCode: http.StatusOK, Duration: s.took}
}

// slowClaims is a store whose first claims answer only after the clock
// moved on by stall (a database slow to answer): the leases they took
// have run on meanwhile.
type slowClaims struct {
	store.Store
	clock  *clock.Test
	stall  time.Duration
	stalls atomic.Int64
}

func (s *slowClaims) DeliveryClaim(ctx context.Context, p *store.DeliveryClaimParams) ([]*store.ClaimedDelivery, error) {
	got, err := s.Store.DeliveryClaim(ctx, p)
	if len(got) > 0 && s.stalls.Add(-1) >= 0 {
		s.clock.Advance(s.stall)
	}
	return got, err
}

// TestBusyNodeLosesNoLease: a node with a backlog far larger than its
// workers (4 for 200 deliveries, leased at ingest and by claims, each
// receiver answering in 250 ms while the clock runs on by every attempt:
// 50 s in all, more than a lease of 2 x 10 s + 15 s) loses no lease. It holds
// no more deliveries than it has workers, so none waits for one while
// its lease runs out: nothing is handed back as too short, nothing is
// redelivered, and with --max-lease-losses 1, where a single lease
// counted lost would end a delivery dead (lease_lost), every one is
// delivered. Claims answered 30 s late (a slow database) leave leases too
// short to attempt: those are handed back, fenced by their tokens, while
// still held, so they are claimed afresh and no loss is counted either.
func TestBusyNodeLosesNoLease(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name       string
		slowClaims int64
	}{
		{"Backlog", 0},
		{"SlowClaims", 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			busyNode(t, tc.slowClaims)
		})
	}
}

func busyNode(t *testing.T, stalls int64) {
	st, c, _ := setup(t, func(http.ResponseWriter, *http.Request) {})
	start := c.Now()
	slow := &slowClaims{Store: st, clock: c, stall: 30 * time.Second}
	slow.stalls.Store(stalls)
	var redelivered, tooShort, frozen atomic.Int64
	d := dispatch.New(dispatch.Config{
		Store:          slow,
		Sender:         &pacedSender{clock: c, took: 250 * time.Millisecond},
		Clock:          c,
		Concurrency:    4,
		MaxLeaseLosses: 1,
		Hooks: dispatch.Hooks{
			Redelivered:   func(*store.ClaimedDelivery) { redelivered.Add(1) },
			LeaseTooShort: func(*store.ClaimedDelivery) { tooShort.Add(1) },
			Frozen:        func(*store.ClaimedDelivery) { frozen.Add(1) },
		},
	})
	taker := st.(interface{ SetTaker(store.Taker) })
	taker.SetTaker(d)
	t.Cleanup(func() { taker.SetTaker(nil) })
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		require.NoError(t, d.Run(ctx))
	}()
	t.Cleanup(func() { cancel(); <-done })

	const n = 200
	for range n / 10 { // some leased at ingest, the rest claimed
		items := make([]store.EventIngestItem, 10)
		for i := range items {
			items[i] = store.EventIngestItem{ConsumerID: "c1", EventType: "a.b", Payload: []byte(`{}`)}
		}
		_, err := st.EventIngest(context.Background(), &store.EventIngestParams{Events: items, Now: c.Now()})
		require.NoError(t, err)
	}
	waitFor(t, func() bool {
		s, err := st.Stats(context.Background(), &store.StatsParams{Now: c.Now()})
		require.NoError(t, err)
		require.Zero(t, s.DeadLetters, "a delivery went dead on a busy, healthy node")
		return s.ByStatus[herald.StatusDelivered] == n
	})
	require.Greater(t, c.Now().Sub(start), 2*store.AttemptTimeout(&herald.Endpoint{})+15*time.Second,
		"the backlog outlasted a lease")
	require.Zero(t, redelivered.Load(), "no lease was lost")
	require.Zero(t, frozen.Load())
	if stalls == 0 {
		require.Zero(t, tooShort.Load(), "no delivery waited out its lease on this node")
	} else {
		require.Positive(t, tooShort.Load(), "the late claims' leases were too short to attempt")
	}
}
