package storetest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhooks/herald/internal/store"
)

// testIngestConcurrentCallsEachGetTheirOwnAnswer fires many single-event
// calls at once, as an API under load does, so that backends which write
// overlapping calls together (group commit) do so: every call gets its own
// answer, committed and readable when it returns; calls sharing an
// idempotency key make one event, the others answering it as a duplicate;
// a call whose context has ended fails alone and writes nothing.
func testIngestConcurrentCallsEachGetTheirOwnAnswer(t *testing.T, s store.Store) {
	in := newEndpoint("c")
	in.MaxInFlight = 64 // one claim takes them all
	ep := createEndpoint(t, s, in, at(0))

	const n = 64
	// Calls 0-47 have keys of their own; 48-63 share 4 keys, 4 calls each;
	// call 7 runs on a context cancelled before it starts.
	const cancelled = 7
	key := func(i int) string {
		if i < 48 {
			return fmt.Sprint("own", i)
		}
		return fmt.Sprint("shared", i%4)
	}
	done, cancel := context.WithCancel(t.Context())
	cancel()
	var (
		wg      sync.WaitGroup
		start   = make(chan struct{})
		results = make([][]store.EventIngestResult, n)
		errs    = make([]error, n)
	)
	for i := range n {
		ctx := t.Context()
		if i == cancelled {
			ctx = done
		}
		wg.Go(func() {
			<-start
			results[i], errs[i] = s.EventIngest(ctx, &store.EventIngestParams{
				Events: []store.EventIngestItem{{
					ConsumerID: "c", EventType: "order.created",
					Payload: fmt.Appendf(nil, `{"i":%d}`, i), IdempotencyKey: key(i),
				}},
				Now: at(time.Second),
			})
		})
	}
	close(start)
	wg.Wait()

	require.ErrorIs(t, errs[cancelled], context.Canceled)
	require.Empty(t, results[cancelled])
	first := map[string]store.EventIngestResult{} // the call that made each key's event
	for i := range n {
		if i == cancelled {
			continue
		}
		require.NoError(t, errs[i], "call %d", i)
		require.Len(t, results[i], 1, "call %d", i)
		if res := results[i][0]; !res.Duplicate {
			_, seen := first[key(i)]
			require.False(t, seen, "call %d made a second event with key %s", i, key(i))
			first[key(i)] = res
		}
	}
	require.Len(t, first, 47+4, "one event per key, none for the cancelled call")
	for i := range n {
		if i == cancelled {
			continue
		}
		res, made := results[i][0], first[key(i)]
		require.Equal(t, made.Event.ID, res.Event.ID, "call %d", i)
		require.Equal(t, made.Deliveries, res.Deliveries, "call %d", i)
		if !res.Duplicate {
			require.Equal(t, fmt.Sprintf(`{"i":%d}`, i), string(res.Event.Payload))
		}
		require.Len(t, res.Deliveries, 1, "call %d", i)
		require.Equal(t, ep.ID, res.Deliveries[0].EndpointID)
	}
	for k, made := range first {
		ev, err := s.EventGet(t.Context(), made.Event.ID)
		require.NoError(t, err, k)
		require.Equal(t, k, ev.IdempotencyKey)
		require.Equal(t, string(made.Event.Payload), string(ev.Payload))
		d := getDelivery(t, s, made.Deliveries[0].ID)
		require.Equal(t, made.Event.ID, d.EventID)
	}
	require.Len(t, eventIDsOf(t, s, "c"), len(first))
	require.Len(t, deliveryIDsOf(t, s, "c"), len(first))
	require.Len(t, claimAll(t, s, at(time.Second)), len(first), "every delivery is due")
}
