package pgstore

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhooks/herald"
	"github.com/heraldhooks/herald/internal/store"
	"github.com/heraldhooks/herald/internal/testdb"
)

// These tests cover what only a shared PostgreSQL has: several nodes (Store
// instances) on one schema. The behaviour every backend shares is in
// storetest.

// t0 is the test clock's time: a whole second, which PostgreSQL keeps exactly.
var t0 = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

// openNodes opens n stores on one fresh schema, migrated once.
func openNodes(t *testing.T, n int) []*Store {
	t.Helper()
	url := testdb.PostgresURL(t)
	nodes := make([]*Store, n)
	for i := range nodes {
		s, err := Open(t.Context(), url, slog.New(slog.DiscardHandler))
		require.NoError(t, err)
		t.Cleanup(func() { require.NoError(t, s.Close()) })
		nodes[i] = s
	}
	require.NoError(t, nodes[0].Migrate(t.Context()))
	return nodes
}

// createEndpoint makes an enabled endpoint of consumer c taking every event.
func createEndpoint(t *testing.T, s store.Store, c string) *herald.Endpoint {
	t.Helper()
	ep, err := s.EndpointCreate(t.Context(), &store.EndpointCreateParams{
		Endpoint: &herald.Endpoint{
			ConsumerID: c, URL: "https://example.com/hook", EventTypes: []string{"*"},
			Secret: "whsec_dGVzdA==", Enabled: true, Timeout: 10 * time.Second,
			SignatureScheme: herald.SchemeStandard,
		},
		Now: t0,
	})
	require.NoError(t, err)
	return ep
}

// ingest ingests n events of consumer c.
func ingest(t *testing.T, s store.Store, c string, n int) []store.EventIngestResult {
	t.Helper()
	items := make([]store.EventIngestItem, n)
	for i := range items {
		items[i] = store.EventIngestItem{ConsumerID: c, EventType: "order.created", Payload: []byte(fmt.Sprintf(`{"n":%d}`, i))}
	}
	res, err := s.EventIngest(t.Context(), &store.EventIngestParams{Events: items, Now: t0})
	require.NoError(t, err)
	return res
}

// waitWake waits for a value on ch, failing the test after a deadline.
func waitWake(t *testing.T, ch <-chan struct{}) {
	t.Helper()
	select {
	case _, ok := <-ch:
		require.True(t, ok, "subscription channel closed")
	case <-time.After(10 * time.Second):
		t.Fatal("no wake-up within 10s")
	}
}

func TestNodes(t *testing.T) {
	t.Parallel()

	t.Run("ConcurrentClaimsNeverShareADelivery", func(t *testing.T) {
		t.Parallel()
		nodes := openNodes(t, 2)
		createEndpoint(t, nodes[0], "c1")
		createEndpoint(t, nodes[0], "c1")
		const events = 150
		ingest(t, nodes[0], "c1", events)

		var mu sync.Mutex
		owner := map[string]int{} // delivery id -> claiming worker
		var wg sync.WaitGroup
		errs := make(chan error, 4)
		for w := range 4 {
			s := nodes[w%2]
			wg.Go(func() {
				for {
					claimed, err := s.DeliveryClaim(context.Background(), &store.DeliveryClaimParams{
						Limit: 7, LeaseMargin: time.Minute, Now: t0,
					})
					if err != nil {
						errs <- err
						return
					}
					if len(claimed) == 0 {
						return
					}
					mu.Lock()
					for _, c := range claimed {
						if prev, dup := owner[c.Delivery.ID]; dup {
							mu.Unlock()
							errs <- fmt.Errorf("delivery %s claimed by workers %d and %d", c.Delivery.ID, prev, w)
							return
						}
						owner[c.Delivery.ID] = w
					}
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err)
		}
		require.Len(t, owner, 2*events)
	})

	t.Run("ExpiredLeaseIsClaimedAgainAndFencesTheOldHolder", func(t *testing.T) {
		t.Parallel()
		nodes := openNodes(t, 2)
		createEndpoint(t, nodes[0], "c1")
		ingest(t, nodes[0], "c1", 1)

		first, err := nodes[0].DeliveryClaim(t.Context(), &store.DeliveryClaimParams{Limit: 10, LeaseMargin: 5 * time.Second, Now: t0})
		require.NoError(t, err)
		require.Len(t, first, 1)
		require.Equal(t, t0.Add(25*time.Second), first[0].LeaseExpiresAt)

		none, err := nodes[1].DeliveryClaim(t.Context(), &store.DeliveryClaimParams{Limit: 10, Now: t0.Add(24 * time.Second)})
		require.NoError(t, err)
		require.Empty(t, none, "lease still holds")

		second, err := nodes[1].DeliveryClaim(t.Context(), &store.DeliveryClaimParams{Limit: 10, Now: t0.Add(25 * time.Second)})
		require.NoError(t, err)
		require.Len(t, second, 1)
		require.Equal(t, first[0].Delivery.ID, second[0].Delivery.ID)
		require.Greater(t, second[0].LeaseToken, first[0].LeaseToken)

		outcome := func(l store.Lease, status herald.Status) store.DeliveryOutcome {
			return store.DeliveryOutcome{
				Lease:   l,
				Attempt: herald.Attempt{AttemptedAt: t0.Add(30 * time.Second), StatusCode: 200, Duration: time.Second},
				Status:  status,
			}
		}
		applied, err := nodes[0].DeliveryCompleteMany(t.Context(), &store.DeliveryCompleteManyParams{
			Outcomes: []store.DeliveryOutcome{
				outcome(store.Lease{DeliveryID: first[0].Delivery.ID, LeaseToken: first[0].LeaseToken}, herald.StatusDead),
				outcome(store.Lease{DeliveryID: second[0].Delivery.ID, LeaseToken: second[0].LeaseToken}, herald.StatusDelivered),
			},
			Now: t0.Add(31 * time.Second),
		})
		require.NoError(t, err)
		require.Equal(t, []bool{false, true}, applied)

		d, err := nodes[1].DeliveryGet(t.Context(), first[0].Delivery.ID)
		require.NoError(t, err)
		require.Equal(t, herald.StatusDelivered, d.Status)
		require.Equal(t, 1, d.AttemptCount)
		attempts, err := nodes[1].AttemptList(t.Context(), &store.AttemptListParams{DeliveryID: d.ID})
		require.NoError(t, err)
		require.Len(t, attempts.Items, 2, "the stale attempt is logged too")
	})

	t.Run("IngestWakesSubscriberOnAnotherNode", func(t *testing.T) {
		t.Parallel()
		nodes := openNodes(t, 2)
		createEndpoint(t, nodes[0], "c1")
		ctx, cancel := context.WithCancel(t.Context())
		wake, err := nodes[0].Subscribe(ctx)
		require.NoError(t, err)

		ingest(t, nodes[1], "c1", 1)
		waitWake(t, wake)

		cancel()
		select {
		case _, ok := <-wake:
			require.False(t, ok, "no notification was sent, so the next receive sees the close")
		case <-time.After(10 * time.Second):
			t.Fatal("channel not closed after ctx ended")
		}
	})

	t.Run("EachSchemaHasItsOwnChannel", func(t *testing.T) {
		t.Parallel()
		a := openNodes(t, 1)[0]
		b := openNodes(t, 1)[0]
		require.NotEqual(t, a.channel, b.channel)
		var schema string
		require.NoError(t, a.pool.QueryRow(t.Context(), "SELECT current_schema()").Scan(&schema))
		require.Equal(t, "herald_wake_"+schema, a.channel)
	})

	t.Run("SubscriptionReconnectsAfterTheConnectionDrops", func(t *testing.T) {
		t.Parallel()
		nodes := openNodes(t, 2)
		createEndpoint(t, nodes[0], "c1")
		wake, err := nodes[0].Subscribe(t.Context())
		require.NoError(t, err)

		var killed int
		require.NoError(t, nodes[1].pool.QueryRow(t.Context(), `
			SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
			WHERE query = 'LISTEN "' || $1 || '"'`, nodes[0].channel).Scan(&killed))
		require.Equal(t, 1, killed)
		waitWake(t, wake) // the reconnect says "look again"

		ingest(t, nodes[1], "c1", 1)
		waitWake(t, wake)
	})

	t.Run("CloseEndsSubscriptions", func(t *testing.T) {
		t.Parallel()
		url := testdb.PostgresURL(t)
		s, err := Open(t.Context(), url, nil)
		require.NoError(t, err)
		require.NoError(t, s.Migrate(t.Context()))
		wake, err := s.Subscribe(t.Context())
		require.NoError(t, err)
		require.NoError(t, s.Close())
		_, ok := <-wake // Close waits for the subscription, which closes wake
		require.False(t, ok)
		_, err = s.Subscribe(t.Context())
		require.ErrorIs(t, err, errClosed)
		require.NoError(t, s.Close(), "closing twice is fine")
	})

	t.Run("ConcurrentMigrationsApplyOnce", func(t *testing.T) {
		t.Parallel()
		url := testdb.PostgresURL(t)
		const n = 4
		var wg sync.WaitGroup
		errs := make([]error, n)
		nodes := make([]*Store, n)
		for i := range nodes {
			s, err := Open(t.Context(), url, nil)
			require.NoError(t, err)
			t.Cleanup(func() { s.Close() })
			nodes[i] = s
		}
		for i, s := range nodes {
			wg.Go(func() { errs[i] = s.Migrate(t.Context()) })
		}
		wg.Wait()
		for _, err := range errs {
			require.NoError(t, err)
		}
		all, err := migrations()
		require.NoError(t, err)
		var applied int
		require.NoError(t, nodes[0].pool.QueryRow(t.Context(), "SELECT count(*) FROM schema_migrations").Scan(&applied))
		require.Equal(t, len(all), applied)
		require.NoError(t, nodes[1].Migrate(t.Context()), "migrating again is a no-op")
	})

	t.Run("ConcurrentDuplicateIngestsMakeOneEvent", func(t *testing.T) {
		t.Parallel()
		nodes := openNodes(t, 2)
		createEndpoint(t, nodes[0], "c1")
		createEndpoint(t, nodes[0], "c1")
		const n = 8
		results := make([][]store.EventIngestResult, n)
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				results[i], errs[i] = nodes[i%2].EventIngest(context.Background(), &store.EventIngestParams{
					Events: []store.EventIngestItem{
						{ConsumerID: "c1", EventType: "a", Payload: []byte(`{}`), IdempotencyKey: "k1"},
						{ConsumerID: "c1", EventType: "a", Payload: []byte(`{}`), IdempotencyKey: "k2"},
					},
					Now: t0,
				})
			})
		}
		wg.Wait()
		fresh := 0
		for i := range n {
			require.NoError(t, errs[i])
			for j, r := range results[i] {
				require.Equal(t, results[0][j].Event.ID, r.Event.ID)
				require.Len(t, r.Deliveries, 2)
				require.Equal(t, results[0][j].Deliveries, r.Deliveries)
				if !r.Duplicate {
					fresh++
				}
			}
		}
		require.Equal(t, 2, fresh, "each key makes one event")
		page, err := nodes[0].DeliveryList(t.Context(), &store.DeliveryListParams{ConsumerID: "c1"})
		require.NoError(t, err)
		require.Len(t, page.Items, 4)
	})
}
