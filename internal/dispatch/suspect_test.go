package dispatch_test

import (
	"context"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhooks/herald"
	"github.com/heraldhooks/herald/internal/clock"
	"github.com/heraldhooks/herald/internal/dispatch"
	"github.com/heraldhooks/herald/internal/sender"
	"github.com/heraldhooks/herald/internal/store"
	"github.com/heraldhooks/herald/internal/store/pgstore"
	"github.com/heraldhooks/herald/internal/store/pgstore/pgtest"
)

// dyingNode is one life of a node: once its poison is sent it is dead,
// and nothing it does reaches the store any more (no outcome, no
// hand-back, no claim), so the leases it held lapse, as a crashed
// process's do.
type dyingNode struct {
	store.Store
	dead chan struct{}
	once sync.Once
}

func (n *dyingNode) die() { n.once.Do(func() { close(n.dead) }) }

func (n *dyingNode) isDead() bool {
	select {
	case <-n.dead:
		return true
	default:
		return false
	}
}

func (n *dyingNode) DeliveryClaim(ctx context.Context, p *store.DeliveryClaimParams) ([]*store.ClaimedDelivery, error) {
	if n.isDead() {
		return nil, nil
	}
	return n.Store.DeliveryClaim(ctx, p)
}

func (n *dyingNode) DeliveryCompleteMany(ctx context.Context, p *store.DeliveryCompleteManyParams) ([]bool, error) {
	if n.isDead() {
		return make([]bool, len(p.Outcomes)), nil
	}
	return n.Store.DeliveryCompleteMany(ctx, p)
}

func (n *dyingNode) DeliveryRelease(ctx context.Context, p *store.DeliveryReleaseParams) error {
	if n.isDead() {
		return nil
	}
	return n.Store.DeliveryRelease(ctx, p)
}

// poisonSender kills its node when it sends the poison; other receivers
// answer 200 in a moment, unless the node dies first.
type poisonSender struct{ node *dyingNode }

func (s *poisonSender) Send(_ context.Context, req *sender.Request) sender.Result {
	if strings.HasSuffix(req.URL, "/poison") {
		s.node.die()
		return sender.Result{Class: sender.Retryable, Error: "connection reset"}
	}
	select {
	case <-s.node.dead:
	case <-time.After(20 * time.Millisecond):
	}
	return sender.Result{Class: sender.Success, StatusCode: http.StatusOK}
}

// TestSuspectsAreIsolated: a delivery that kills every node sending it
// (a poison payload), claimed beside four deliveries of another consumer,
// takes them down at its first crash; from then on it and they are
// suspects (they lost a lease), which a node runs one at a time, so the
// poison crashes its nodes alone, goes dead lease_lost after
// --max-lease-losses (5) crashes, and the innocent deliveries are
// delivered. Without isolation the cohort was claimed together after each
// crash and all five went dead lease_lost. The claim that ends the poison
// reports it (Hooks.DeadAtClaim: herald_deliveries_dead_total).
func TestSuspectsAreIsolated(t *testing.T) {
	t.Parallel()
	t.Run("SQLite", func(t *testing.T) {
		t.Parallel()
		st, c, ep := setup(t, func(http.ResponseWriter, *http.Request) {})
		suspectsIsolated(t, st, c, ep)
	})
	t.Run("PostgreSQL", func(t *testing.T) {
		t.Parallel()
		st, err := pgstore.Open(t.Context(), pgtest.URL(t), slog.New(slog.DiscardHandler))
		require.NoError(t, err)
		t.Cleanup(func() { require.NoError(t, st.Close()) })
		c := clock.NewTest(time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC))
		ep, err := st.EndpointCreate(t.Context(), &store.EndpointCreateParams{
			Endpoint: &herald.Endpoint{
				ConsumerID: "c1", URL: "https://r.example.com/h", EventTypes: []string{"*"}, Enabled: true,
				Secret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", Timeout: 10 * time.Second,
				SignatureScheme: herald.SchemeStandard, MaxInFlight: 10,
			},
			Now: c.Now(),
		})
		require.NoError(t, err)
		suspectsIsolated(t, st, c, ep)
	})
}

func suspectsIsolated(t *testing.T, st store.Store, c *clock.Test, ep *herald.Endpoint) {
	ctx := context.Background()
	_, err := st.EndpointCreate(ctx, &store.EndpointCreateParams{
		Endpoint: &herald.Endpoint{
			ConsumerID: "poisoned", URL: ep.URL + "/poison", EventTypes: []string{"*"}, Enabled: true,
			Secret: ep.Secret, Timeout: 10 * time.Second, SignatureScheme: herald.SchemeStandard, MaxInFlight: 10,
		},
		Now: c.Now(),
	})
	require.NoError(t, err)
	var innocents []string
	for range 4 {
		innocents = append(innocents, ingest(t, st, c))
	}
	res, err := st.EventIngest(ctx, &store.EventIngestParams{
		Events: []store.EventIngestItem{{ConsumerID: "poisoned", EventType: "a.b", Payload: []byte(`{}`)}},
		Now:    c.Now(),
	})
	require.NoError(t, err)
	poison := res[0].Deliveries[0].ID

	settled := func() bool {
		for _, id := range append([]string{poison}, innocents...) {
			d, err := st.DeliveryGet(ctx, id)
			require.NoError(t, err)
			if d.Status != herald.StatusDelivered && d.Status != herald.StatusDead {
				return false
			}
		}
		return true
	}
	var deadAtClaim []herald.DeadReason // one goroutine's: each node's claim loop, one at a time
	lives := 0
	for ; !settled(); lives++ {
		require.Less(t, lives, 20, "the deliveries never settled")
		node := &dyingNode{Store: st, dead: make(chan struct{})}
		d := dispatch.New(dispatch.Config{
			Store: node, Sender: &poisonSender{node: node}, Clock: c, Concurrency: 8,
			Hooks: dispatch.Hooks{DeadAtClaim: func(r herald.DeadReason) { deadAtClaim = append(deadAtClaim, r) }},
		})
		runCtx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() {
			defer close(done)
			require.NoError(t, d.Run(runCtx))
		}()
		waitFor(t, func() bool { return node.isDead() || settled() })
		cancel()
		<-done
		c.Advance(2 * time.Minute) // the dead node's leases lapse
	}
	p, err := st.DeliveryGet(ctx, poison)
	require.NoError(t, err)
	require.Equal(t, herald.StatusDead, p.Status)
	require.Equal(t, herald.DeadLeaseLost, p.DeadReason)
	for _, id := range innocents {
		d, err := st.DeliveryGet(ctx, id)
		require.NoError(t, err)
		require.Equal(t, herald.StatusDelivered, d.Status, "an innocent delivery went %s %s with the poison", d.Status, d.DeadReason)
	}
	require.Equal(t, []herald.DeadReason{herald.DeadLeaseLost}, deadAtClaim, "the claim that ended the poison said so (a metric)")
	t.Logf("settled after %d lives", lives)
}
