package pgstore

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhooks/herald/internal/store"
)

// writers runs functions on every node at once, each rounds times, for
// the tests of what concurrent writers leave behind.
type writers struct {
	ctx    context.Context
	nodes  []*Store
	rounds int
	wg     sync.WaitGroup
	errs   chan error
}

func newWriters(ctx context.Context, nodes []*Store, rounds int) *writers {
	return &writers{ctx: ctx, nodes: nodes, rounds: rounds, errs: make(chan error, 64)}
}

// run starts f on every node, called with the round's index (distinct
// across nodes); the node's goroutine stops at its first error.
func (w *writers) run(name string, f func(ctx context.Context, node *Store, i int) error) {
	for n, node := range w.nodes {
		w.wg.Go(func() {
			for i := range w.rounds {
				if err := f(w.ctx, node, n*w.rounds+i); err != nil {
					w.errs <- fmt.Errorf("%s: %w", name, err)
					return
				}
			}
		})
	}
}

// wait waits for every writer and fails t on any error.
func (w *writers) wait(t *testing.T) {
	t.Helper()
	w.wg.Wait()
	close(w.errs)
	for err := range w.errs {
		require.NoError(t, err)
	}
}

// ingestAndClaim ingests n events for consumer c1 and claims up to limit
// deliveries, at now.
func ingestAndClaim(ctx context.Context, node *Store, n, limit int, now time.Time) ([]*store.ClaimedDelivery, error) {
	items := make([]store.EventIngestItem, n)
	for j := range items {
		items[j] = store.EventIngestItem{ConsumerID: "c1", EventType: "order.created", Payload: []byte(`{}`)}
	}
	if _, err := node.EventIngest(ctx, &store.EventIngestParams{Events: items, Now: now}); err != nil {
		return nil, err
	}
	return node.DeliveryClaim(ctx, &store.DeliveryClaimParams{Limit: limit, LeaseMargin: time.Second, Now: now})
}
