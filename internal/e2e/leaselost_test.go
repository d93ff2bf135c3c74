package e2e

import (
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestDeliveryThatKillsItsNodesGoesDead: a delivery whose every node dies
// mid-attempt is not taken again for ever. With --max-lease-losses 2, two
// nodes die with it; the node that then finds its second lease lost ends
// it dead (lease_lost) without sending it, and a replay delivers it.
func TestDeliveryThatKillsItsNodesGoesDead(t *testing.T) {
	t.Parallel()
	backends(t, func(t *testing.T, db string) {
		e := setup(t, db, func(o *options) {
			o.noDispatch = true
			o.maxLeaseLosses = 2
		})
		// The dying nodes' attempts hang until their node is gone.
		held := []chan struct{}{make(chan struct{}), make(chan struct{})}
		var once [2]sync.Once
		release := func(i int) { once[i].Do(func() { close(held[i]) }) }
		t.Cleanup(func() { release(0); release(1) })
		rc := newReceiver(t, e.clock, func(n int, r *http.Request, w http.ResponseWriter) {
			if n <= len(held) {
				select {
				case <-held[n-1]:
				case <-r.Context().Done():
				}
				w.WriteHeader(http.StatusInternalServerError)
				return
			}
			w.WriteHeader(http.StatusOK)
		})
		e.createEndpoint(map[string]any{"consumer_id": "c1", "url": rc.URL})
		id := e.send("c1", "a.b", `{}`).Deliveries[0].ID

		for i := range held {
			if i > 0 {
				e.clock.Advance(time.Minute) // the dead node's lease (2 x 10 s + 15 s) runs out
			}
			st, stop, done := e.crashingDispatcher(1)
			rc.waitHits(t, i+1)
			require.NoError(t, st.Close())
			stop()
			release(i)
			<-done
		}
		require.Equal(t, "delivering", e.delivery(id).Status)

		// This node finds the lease lost a second time: dead, not sent.
		e.clock.Advance(time.Minute)
		e.runDispatch()
		d := e.waitStatus(id, "dead")
		require.NotNil(t, d.DeadReason)
		require.Equal(t, "lease_lost", *d.DeadReason)
		require.Zero(t, d.AttemptCount, "lost leases spend no attempt")
		require.Equal(t, 2, rc.count(), "no third node was sent it")

		// A replay gives it a fresh count, and it is delivered.
		e.must(http.StatusAccepted, "POST", "/v1/deliveries/"+id+"/replay", nil, nil)
		e.waitStatus(id, "delivered")
		require.Equal(t, 3, rc.count())
	})
}
