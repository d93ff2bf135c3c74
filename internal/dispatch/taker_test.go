package dispatch_test

import (
	"context"
	"net/http"
	"sync"
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

// TestTakeAttemptsWhatIngestLeased: a delivery leased elsewhere than in
// the claim loop (at ingest, store.Taker) and handed over with Take goes
// out on a reserved slot and has its outcome written under its lease; once
// the dispatcher has stopped, it reserves nothing, and what an ingest
// leased to it meanwhile is handed back, due at once for a claim.
func TestTakeAttemptsWhatIngestLeased(t *testing.T) {
	t.Parallel()
	var arrived atomic.Int64
	st, c, _ := setup(t, func(http.ResponseWriter, *http.Request) { arrived.Add(1) })
	first, second := ingest(t, st, c), ingest(t, st, c)
	// Leased as an ingest would lease them: not by this dispatcher.
	leased, err := st.DeliveryClaim(t.Context(), &store.DeliveryClaimParams{Limit: 2, LeaseMargin: 15 * time.Second, Now: c.Now()})
	require.NoError(t, err)
	require.Len(t, leased, 2)
	byID := map[string]*store.ClaimedDelivery{leased[0].Delivery.ID: leased[0], leased[1].Delivery.ID: leased[1]}

	written := make(chan bool, 2)
	d := dispatch.New(dispatch.Config{
		Store:       st,
		Sender:      sender.New(sender.Config{AllowPrivateNetworks: true}),
		Clock:       c,
		Concurrency: 4,
		LeaseMargin: 15 * time.Second,
		Hooks: dispatch.Hooks{
			OutcomeWritten: func(_ *store.ClaimedDelivery, _ *store.DeliveryOutcome, _ time.Time, applied bool) {
				written <- applied
			},
		},
	})
	require.Zero(t, d.Reserve(1).Slots, "not running")
	stop := start(t, d)

	// Idle (its first claim found nothing), so every slot is free.
	waitFor(t, func() bool { return c.Waiters() == 1 })
	r := d.Reserve(3)
	require.Equal(t, 3, r.Slots)
	d.Take(r, []*store.ClaimedDelivery{byID[first]})
	require.True(t, <-written, "written under the ingest's lease")
	require.Equal(t, int64(1), arrived.Load())
	got, err := st.DeliveryGet(t.Context(), first)
	require.NoError(t, err)
	require.Equal(t, herald.StatusDelivered, got.Status)
	// The two slots not filled came back, and the one filled with its outcome.
	waitFor(t, func() bool {
		r := d.Reserve(4)
		d.Take(r, nil)
		return r.Slots == 4
	})

	r = d.Reserve(1)
	require.Equal(t, 1, r.Slots)
	stop()
	require.Zero(t, d.Reserve(1).Slots, "stopped")
	d.Take(r, []*store.ClaimedDelivery{byID[second]})
	got, err = st.DeliveryGet(t.Context(), second)
	require.NoError(t, err)
	require.Equal(t, herald.StatusPending, got.Status, "handed back")
	require.Equal(t, int64(1), arrived.Load(), "never sent")
}

// TestReserveGivesNothingToABusyNode: past 48 deliveries handed to
// workers over the last 20 ms of the node's clock, a node takes no work
// leased at ingest through Reserve, though it does through ReserveBatch:
// claims take it, many to a statement. What counts is how fast work
// comes, not how much is under way: once the window has passed, the node
// takes work leased at ingest again while all 49 still wait on their slow
// receiver.
func TestReserveGivesNothingToABusyNode(t *testing.T) {
	t.Parallel()
	var arrived atomic.Int64
	release := make(chan struct{})
	st, c, ep := setup(t, func(http.ResponseWriter, *http.Request) {
		arrived.Add(1)
		<-release
	})
	ep.MaxInFlight = 100
	_, err := st.EndpointUpdate(t.Context(), &store.EndpointUpdateParams{Endpoint: ep, Now: c.Now()})
	require.NoError(t, err)
	for range 48 {
		ingest(t, st, c)
	}
	d := newDispatcher(st, c, 64)
	start(t, d)
	t.Cleanup(func() { close(release) }) // before the stop, which waits for the attempts
	waitFor(t, func() bool { return arrived.Load() == 48 })
	one := d.Reserve(1)
	require.Equal(t, 1, one.Slots, "48 begun: still taking")
	d.Take(one, nil)

	ingest(t, st, c)
	waitFor(t, func() bool { return arrived.Load() == 49 })
	require.Zero(t, d.Reserve(1).Slots, "49 begun: busy")
	batch := d.ReserveBatch(5)
	require.Equal(t, 5, batch.Slots, "a batch is taken whatever the pace")
	d.Take(batch, nil)

	c.Advance(20 * time.Millisecond)
	one = d.Reserve(1)
	require.Equal(t, 1, one.Slots, "the window passed: the 49 under way do not count")
	d.Take(one, nil)
}

// gatedStore holds every outcome write until gate is closed.
type gatedStore struct {
	store.Store
	gate chan struct{}
}

func (g *gatedStore) DeliveryCompleteMany(ctx context.Context, p *store.DeliveryCompleteManyParams) ([]bool, error) {
	<-g.gate
	return g.Store.DeliveryCompleteMany(ctx, p)
}

// TestReserveDoesNotCountOutcomesWaitingToBeWritten: attempts that have
// ended and wait for their outcome write do not make a node busy: a slow
// database does not turn it from leasing to claims.
func TestReserveDoesNotCountOutcomesWaitingToBeWritten(t *testing.T) {
	t.Parallel()
	var arrived atomic.Int64
	st, c, _ := setup(t, func(http.ResponseWriter, *http.Request) { arrived.Add(1) })
	for range 10 {
		ingest(t, st, c)
	}
	g := &gatedStore{Store: st, gate: make(chan struct{})}
	d := newDispatcher(g, c, 64)
	start(t, d)
	t.Cleanup(func() { close(g.gate) })
	waitFor(t, func() bool { return arrived.Load() == 10 })

	under := d.Reserve(45)
	require.Equal(t, 45, under.Slots, "54 slots free, 10 held by outcomes not written")
	// 55 slots taken, 45 of them by attempts under way.
	waitFor(t, func() bool {
		r := d.Reserve(1)
		d.Take(r, nil)
		return r.Slots == 1
	})
	d.Take(under, nil)
}

// newDispatcher is a dispatcher of st on c, concurrency attempts at once,
// with the defaults for the rest.
func newDispatcher(st store.Store, c *clock.Test, concurrency int) *dispatch.Dispatcher {
	return dispatch.New(dispatch.Config{
		Store:       st,
		Sender:      sender.New(sender.Config{AllowPrivateNetworks: true}),
		Clock:       c,
		Concurrency: concurrency,
	})
}

// start runs d until the test ends or the returned function is called,
// which returns once d has stopped.
func start(t *testing.T, d *dispatch.Dispatcher) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		require.NoError(t, d.Run(ctx))
	}()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); <-done }) }
	t.Cleanup(stop)
	return stop
}

// heldClaimStore holds a claim, once hold is set, until release is
// closed, and says on entered that one is held; it records each claim's
// limit.
type heldClaimStore struct {
	store.Store
	hold     atomic.Bool
	entered  chan struct{}
	release  chan struct{}
	mu       sync.Mutex
	limits   []int
	heldOnce sync.Once
}

func (h *heldClaimStore) DeliveryClaim(ctx context.Context, p *store.DeliveryClaimParams) ([]*store.ClaimedDelivery, error) {
	h.mu.Lock()
	h.limits = append(h.limits, p.Limit)
	h.mu.Unlock()
	if h.hold.Load() {
		h.heldOnce.Do(func() { close(h.entered) })
		<-h.release
	}
	return h.Store.DeliveryClaim(ctx, p)
}

// TestReserveDuringAClaim: a caught-up dispatcher's claim leaves slots
// free, so that an ingest during the claim still leases to this node
// (Reserve) rather than queue its deliveries and wake the node for
// another claim.
func TestReserveDuringAClaim(t *testing.T) {
	t.Parallel()
	st, c, _ := setup(t, func(http.ResponseWriter, *http.Request) {})
	h := &heldClaimStore{Store: st, entered: make(chan struct{}), release: make(chan struct{})}
	d := newDispatcher(h, c, 64)
	start(t, d)
	var released sync.Once
	release := func() { released.Do(func() { close(h.release) }) }
	t.Cleanup(release)                                  // before the dispatcher stops: cleanups run last first
	waitFor(t, func() bool { return c.Waiters() == 1 }) // its first claim found nothing
	h.hold.Store(true)
	ingest(t, st, c) // wakes it for a claim, which is held
	select {
	case <-h.entered:
	case <-time.After(30 * time.Second):
		t.Fatal("no claim after the wake-up")
	}
	r := d.Reserve(4)
	require.Equal(t, 4, r.Slots, "slots left to ingests during a claim")
	d.Take(r, nil)
	release()
	h.mu.Lock()
	defer h.mu.Unlock()
	require.Equal(t, 64-8, h.limits[len(h.limits)-1], "a caught-up claim leaves an eighth of its batch")
}
