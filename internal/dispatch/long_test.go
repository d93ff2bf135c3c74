package dispatch_test

import (
	"context"
	"net/http"
	"net/http/httptest"
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

// TestHangingReceiversLeaveSlotsForOthers: a node of two slots whose
// attempts all went to a receiver that hangs (for as long as its 60 s
// timeout allows) still delivers to a healthy endpoint at once: the
// attempts that ran past LongAfter gave their slots back. Without that,
// the healthy delivery waits for the hanging ones' timeout.
func TestHangingReceiversLeaveSlotsForOthers(t *testing.T) {
	t.Parallel()
	st, c, hanging, release := setupHanging(t)
	ctx := context.Background()
	var arrived atomic.Int64
	healthy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { arrived.Add(1) }))
	t.Cleanup(healthy.Close)
	_, err := st.EndpointCreate(ctx, &store.EndpointCreateParams{
		Endpoint: &herald.Endpoint{
			ConsumerID: "c2", URL: healthy.URL, EventTypes: []string{"*"}, Enabled: true,
			Secret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", Timeout: 10 * time.Second,
			SignatureScheme: herald.SchemeStandard,
		},
		Now: c.Now(),
	})
	require.NoError(t, err)

	for range 4 {
		ingest(t, st, c)
	}
	runDispatcher(t, dispatch.Config{
		Store:       st,
		Sender:      sender.New(sender.Config{AllowPrivateNetworks: true}),
		Clock:       c,
		Concurrency: 2,
		LongAfter:   20 * time.Millisecond,
	})
	// Runs first: the hanging requests end, then the dispatcher stops.
	t.Cleanup(func() { close(release) })
	waitFor(t, func() bool { return hanging.Load() >= 2 })

	_, err = st.EventIngest(ctx, &store.EventIngestParams{
		Events: []store.EventIngestItem{{ConsumerID: "c2", EventType: "a.b", Payload: []byte(`{}`)}},
		Now:    c.Now(),
	})
	require.NoError(t, err)
	waitFor(t, func() bool { return arrived.Load() == 1 })
	require.GreaterOrEqual(t, hanging.Load(), int64(2), "delivered while the hanging attempts were still held")
}

// TestIngestTakesTheSlotsOfLongAttempts: while the claim loop sleeps,
// nothing being due, attempts to receivers that hang and have run
// LongAfter give their slots to an ingest that reserves them, and a worker
// starts in the place of each: without that, every slot stayed with the
// hanging attempts and each ingest's deliveries waited for a claim.
func TestIngestTakesTheSlotsOfLongAttempts(t *testing.T) {
	t.Parallel()
	st, c, hanging, release := setupHanging(t)
	// Two slots: the claim loop turns the first two attempts long when
	// it waits to claim the third, then finds nothing more and sleeps,
	// the third attempt holding a slot.
	for range 3 {
		ingest(t, st, c)
	}
	d := dispatch.New(dispatch.Config{
		Store:       st,
		Sender:      sender.New(sender.Config{AllowPrivateNetworks: true}),
		Clock:       c,
		Concurrency: 2,
		LongAfter:   20 * time.Millisecond,
	})
	start(t, d)
	t.Cleanup(func() { close(release) }) // before the stop, which waits for the attempts
	waitFor(t, func() bool { return hanging.Load() == 3 })

	waitFor(t, func() bool {
		r := d.Reserve(2)
		defer d.Take(r, nil)
		return r.Slots == 2
	})
	require.Equal(t, int64(3), hanging.Load(), "the slots came while every attempt still hangs")
}

// setupHanging is setup with a receiver that holds each request until
// release is closed (or the request ends), counting those it holds, and
// an endpoint timeout of a minute.
func setupHanging(t *testing.T) (store.Store, *clock.Test, *atomic.Int64, chan struct{}) {
	t.Helper()
	release := make(chan struct{})
	hanging := new(atomic.Int64)
	st, c, hung := setup(t, func(w http.ResponseWriter, r *http.Request) {
		hanging.Add(1)
		defer hanging.Add(-1)
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	hung.Timeout = time.Minute
	_, err := st.EndpointUpdate(t.Context(), &store.EndpointUpdateParams{Endpoint: hung, Now: c.Now()})
	require.NoError(t, err)
	return st, c, hanging, release
}
