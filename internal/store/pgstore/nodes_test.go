package pgstore

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
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

// openNodes opens n stores on one schema of their own, a copy of migrated
// that the first migrates again.
func openNodes(t *testing.T, n int) []*Store {
	t.Helper()
	return openOn(t, migrated.URL(t), n)
}

// openPlanned opens a store on a copy of migrated that no test has used:
// for tests of the planner's choices, which depend on what a table held.
func openPlanned(t *testing.T) *Store {
	t.Helper()
	return openOn(t, migrated.FreshURL(t), 1)[0]
}

// openOn opens n stores on url, the first migrating it.
func openOn(t *testing.T, url string, n int) []*Store {
	t.Helper()
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

// createEndpoint makes an enabled endpoint of consumer c taking every
// event, with the changes of each mod applied.
func createEndpoint(t *testing.T, s store.Store, c string, mods ...func(*herald.Endpoint)) *herald.Endpoint {
	t.Helper()
	in := &herald.Endpoint{
		ConsumerID: c, URL: "https://example.com/hook", EventTypes: []string{"*"},
		Secret: "whsec_dGVzdA==", Enabled: true, Timeout: 10 * time.Second,
		SignatureScheme: herald.SchemeStandard,
	}
	for _, mod := range mods {
		mod(in)
	}
	ep, err := s.EndpointCreate(t.Context(), &store.EndpointCreateParams{Endpoint: in, Now: t0})
	require.NoError(t, err)
	return ep
}

// delivered is the outcome of a 200 answer to claim c.
func delivered(c *store.ClaimedDelivery) store.DeliveryOutcome {
	return outcomeAt(c, herald.StatusDelivered, t0)
}

// failed is the outcome of a 503 answer to claim c, retried in a minute.
func failed(c *store.ClaimedDelivery) store.DeliveryOutcome {
	o := outcomeAt(c, herald.StatusPending, t0)
	o.RetryIn = time.Minute
	return o
}

// outcomeAt is the outcome of an attempt of claim c at now that ends in
// status: a 200 delivered, a 503 retried (due again at once unless the
// caller sets RetryIn), or a 400 sent dead as a client error.
func outcomeAt(c *store.ClaimedDelivery, status herald.Status, now time.Time) store.DeliveryOutcome {
	o := store.DeliveryOutcome{
		Lease:   store.Lease{DeliveryID: c.Delivery.ID, LeaseToken: c.LeaseToken},
		Attempt: herald.Attempt{AttemptedAt: now, StatusCode: 200, Duration: time.Millisecond},
		Status:  status,
	}
	switch status {
	case herald.StatusPending:
		o.Attempt.StatusCode, o.Attempt.Error = 503, "HTTP 503"
	case herald.StatusDead:
		o.Attempt.StatusCode, o.Attempt.Error, o.DeadReason = 400, "HTTP 400", herald.DeadClientError
	}
	return o
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
				// A claim finds nothing while another holds both
				// endpoints, so a worker goes on until all are done.
				for range 100 * events {
					mu.Lock()
					done := len(owner) == 2*events
					mu.Unlock()
					if done {
						return
					}
					claimed, err := s.DeliveryClaim(context.Background(), &store.DeliveryClaimParams{
						Limit: 7, LeaseMargin: time.Minute, Now: t0,
					})
					if err != nil {
						errs <- err
						return
					}
					outcomes := make([]store.DeliveryOutcome, len(claimed))
					mu.Lock()
					for i, c := range claimed {
						if prev, dup := owner[c.Delivery.ID]; dup {
							mu.Unlock()
							errs <- fmt.Errorf("delivery %s claimed by workers %d and %d", c.Delivery.ID, prev, w)
							return
						}
						owner[c.Delivery.ID] = w
						outcomes[i] = delivered(c)
					}
					mu.Unlock()
					if _, err := s.DeliveryCompleteMany(context.Background(), &store.DeliveryCompleteManyParams{Outcomes: outcomes, Now: t0}); err != nil {
						errs <- err
						return
					}
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
		url := migrated.URL(t)
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

// claimTogether has workers goroutines, spread over the nodes, each claim
// rounds times with limit at now, all starting at once, and returns every
// delivery claimed (failing the test on an error or on a delivery claimed
// twice).
func claimTogether(t *testing.T, nodes []*Store, workers, rounds, limit int, now time.Time) []*store.ClaimedDelivery {
	t.Helper()
	var (
		mu    sync.Mutex
		all   []*store.ClaimedDelivery
		errs  []error
		wg    sync.WaitGroup
		start = make(chan struct{})
	)
	for w := range workers {
		s := nodes[w%len(nodes)]
		wg.Go(func() {
			<-start
			for range rounds {
				got, err := s.DeliveryClaim(context.Background(), &store.DeliveryClaimParams{
					Limit: limit, LeaseMargin: time.Second, Now: now,
				})
				mu.Lock()
				if err != nil {
					errs = append(errs, err)
				}
				all = append(all, got...)
				mu.Unlock()
			}
		})
	}
	close(start)
	wg.Wait()
	require.Empty(t, errs)
	seen := map[string]bool{}
	for _, c := range all {
		require.False(t, seen[c.Delivery.ID], "delivery %s claimed twice", c.Delivery.ID)
		seen[c.Delivery.ID] = true
	}
	return all
}

// claimAt claims up to limit deliveries at now on node s.
func claimAt(t *testing.T, s *Store, limit int, now time.Time) []*store.ClaimedDelivery {
	t.Helper()
	got, err := s.DeliveryClaim(t.Context(), &store.DeliveryClaimParams{Limit: limit, LeaseMargin: time.Second, Now: now})
	require.NoError(t, err)
	return got
}

// completeAt writes outcomes at now on node s and requires them applied.
func completeAt(t *testing.T, s *Store, now time.Time, outcomes ...store.DeliveryOutcome) {
	t.Helper()
	applied, err := s.DeliveryCompleteMany(t.Context(), &store.DeliveryCompleteManyParams{Outcomes: outcomes, Now: now})
	require.NoError(t, err)
	for i, ok := range applied {
		require.True(t, ok, "outcome %d applied", i)
	}
}

// TestNodeLimits checks that an endpoint's limits hold for the nodes
// together: the in-flight cap, the token bucket, the breaker and FIFO
// order are decided under the endpoint's row lock, whichever node claims.
func TestNodeLimits(t *testing.T) {
	t.Parallel()

	t.Run("InFlightCapHoldsAcrossNodes", func(t *testing.T) {
		t.Parallel()
		nodes := openNodes(t, 2)
		createEndpoint(t, nodes[0], "c1", func(e *herald.Endpoint) { e.MaxInFlight = 3 })
		ingest(t, nodes[0], "c1", 20)

		// Six claimers on two nodes, three claims each, with no outcome
		// written meanwhile: together they may hold three leases.
		held := claimTogether(t, nodes, 6, 3, 10, t0)
		require.LessOrEqual(t, len(held), 3)
		held = append(held, claimAt(t, nodes[0], 10, t0)...)
		require.Len(t, held, 3, "the cap is filled, not more")

		// Each outcome frees one lease for any node.
		for round := range 5 {
			now := t0.Add(time.Duration(round+1) * time.Second)
			completeAt(t, nodes[round%2], now, delivered(held[0]), delivered(held[1]))
			held = held[2:]
			got := claimTogether(t, nodes, 6, 2, 10, now)
			require.LessOrEqual(t, len(got), 2, "round %d", round)
			held = append(held, got...)
			held = append(held, claimAt(t, nodes[1], 10, now)...)
			require.Len(t, held, 3, "round %d", round)
		}
	})

	t.Run("RateLimitHoldsAcrossNodes", func(t *testing.T) {
		t.Parallel()
		nodes := openNodes(t, 2)
		createEndpoint(t, nodes[0], "c1", func(e *herald.Endpoint) {
			e.MaxInFlight = 100
			e.RateLimit = &herald.RateLimit{PerSecond: 2, Burst: 4}
		})
		ingest(t, nodes[0], "c1", 40)

		// The bucket starts full: four tokens, however many claim.
		got := claimTogether(t, nodes, 6, 3, 10, t0)
		require.LessOrEqual(t, len(got), 4)
		total := len(got) + len(claimAt(t, nodes[1], 10, t0))
		require.Equal(t, 4, total)

		// Each 1.5 s after brings three more tokens (2 per second).
		for round := range 4 {
			now := t0.Add(time.Duration(round+1) * 1500 * time.Millisecond)
			got := claimTogether(t, nodes, 6, 3, 10, now)
			require.LessOrEqual(t, len(got), 3, "round %d", round)
			total := len(got) + len(claimAt(t, nodes[round%2], 10, now))
			require.Equal(t, 3, total, "round %d", round)
		}
	})

	t.Run("BreakerOpenedOnOneNodeStopsTheOther", func(t *testing.T) {
		t.Parallel()
		nodes := openNodes(t, 2)
		ep := createEndpoint(t, nodes[0], "c1")
		ingest(t, nodes[0], "c1", 8)

		held := claimAt(t, nodes[0], 5, t0)
		require.Len(t, held, 5)
		for _, c := range held {
			completeAt(t, nodes[0], t0, failed(c))
		}
		got, err := nodes[1].EndpointGet(t.Context(), ep.ID)
		require.NoError(t, err)
		require.Equal(t, herald.BreakerOpen, got.Health.BreakerState)

		// Three new deliveries are due, but no node sends any until the
		// probe time, five minutes on.
		require.Empty(t, claimAt(t, nodes[1], 10, t0.Add(time.Second)))
		require.Empty(t, claimAt(t, nodes[0], 10, t0.Add(5*time.Minute-time.Microsecond)))
		probe := claimAt(t, nodes[1], 10, t0.Add(5*time.Minute))
		require.Len(t, probe, 1)
		require.Equal(t, herald.BreakerHalfOpen, probe[0].Endpoint.Health.BreakerState)
		require.Empty(t, claimAt(t, nodes[0], 10, t0.Add(5*time.Minute)), "one probe at a time")

		// The probe's success on one node lets the other send the rest.
		completeAt(t, nodes[1], t0.Add(5*time.Minute), delivered(probe[0]))
		rest := claimAt(t, nodes[0], 10, t0.Add(5*time.Minute))
		require.Len(t, rest, 7)
	})

	t.Run("ProbeGoesToExactlyOneNode", func(t *testing.T) {
		t.Parallel()
		nodes := openNodes(t, 2)
		createEndpoint(t, nodes[0], "c1")
		ingest(t, nodes[0], "c1", 10)
		held := claimAt(t, nodes[0], 5, t0)
		require.Len(t, held, 5)
		outcomes := make([]store.DeliveryOutcome, len(held))
		for i, c := range held {
			outcomes[i] = failed(c)
		}
		completeAt(t, nodes[1], t0, outcomes...)

		probeAt := t0.Add(5 * time.Minute)
		for round := range 3 {
			got := claimTogether(t, nodes, 8, 3, 10, probeAt)
			require.Len(t, got, 1, "round %d", round)
			require.Equal(t, herald.BreakerHalfOpen, got[0].Endpoint.Health.BreakerState)
			// The probe fails: the breaker opens again for twice as long.
			completeAt(t, nodes[round%2], probeAt, failed(got[0]))
			ep, err := nodes[0].EndpointGet(t.Context(), got[0].Endpoint.ID)
			require.NoError(t, err)
			require.Equal(t, herald.BreakerOpen, ep.Health.BreakerState)
			cooldown := time.Duration(10<<round) * time.Minute
			require.Equal(t, cooldown, ep.Health.Cooldown)
			probeAt = probeAt.Add(cooldown)
		}
	})

	t.Run("FIFOHeadGoesToOneNodeAtATime", func(t *testing.T) {
		t.Parallel()
		nodes := openNodes(t, 2)
		createEndpoint(t, nodes[0], "c1", func(e *herald.Endpoint) { e.Ordering = herald.OrderingFIFO })
		res := ingest(t, nodes[0], "c1", 5)
		for i, r := range res {
			now := t0.Add(time.Duration(i) * time.Second)
			got := claimTogether(t, nodes, 6, 3, 10, now)
			require.Len(t, got, 1, "delivery %d", i)
			require.Equal(t, r.Deliveries[0].ID, got[0].Delivery.ID, "in ingest order")
			completeAt(t, nodes[i%2], now, delivered(got[0]))
		}
	})

	t.Run("WritersOnBothNodesDoNotDeadlock", func(t *testing.T) {
		t.Parallel()
		nodes := openNodes(t, 2)
		var eps []*herald.Endpoint
		for range 4 {
			eps = append(eps, createEndpoint(t, nodes[0], "c1", func(e *herald.Endpoint) {
				e.AutoDisableAfterFailures = 1000
			}))
		}
		createEndpoint(t, nodes[0], "c1", func(e *herald.Endpoint) { e.EventTypes = []string{"herald.*"} })
		ingest(t, nodes[0], "c1", 60)

		// Claimers write mixed outcomes in batches spanning endpoints
		// while an operator disables and enables them and replays.
		var wg sync.WaitGroup
		errs := make(chan error, 16)
		ctx := context.Background()
		for w := range 4 {
			s := nodes[w%2]
			wg.Go(func() {
				for i := range 40 {
					now := t0.Add(time.Duration(i) * time.Hour)
					got, err := s.DeliveryClaim(ctx, &store.DeliveryClaimParams{Limit: 12, LeaseMargin: time.Second, Now: now})
					if err != nil {
						errs <- fmt.Errorf("claim: %w", err)
						return
					}
					outcomes := make([]store.DeliveryOutcome, len(got))
					for j, c := range got {
						if (i+j)%3 == 0 {
							outcomes[j] = delivered(c)
						} else {
							outcomes[j] = failed(c)
						}
					}
					if _, err := s.DeliveryCompleteMany(ctx, &store.DeliveryCompleteManyParams{Outcomes: outcomes, Now: now}); err != nil {
						errs <- fmt.Errorf("complete: %w", err)
						return
					}
				}
			})
		}
		for w := range 2 {
			s := nodes[w]
			wg.Go(func() {
				for i := range 30 {
					ep := eps[(i+w)%len(eps)]
					now := t0.Add(time.Duration(i) * time.Hour)
					if _, err := s.EndpointSetEnabled(ctx, &store.EndpointSetEnabledParams{ID: ep.ID, Enabled: i%2 == 1, Now: now}); err != nil {
						errs <- fmt.Errorf("set enabled: %w", err)
						return
					}
					if _, err := s.DeliveryReplayMany(ctx, &store.DeliveryReplayManyParams{EndpointID: ep.ID, Now: now}); err != nil {
						errs <- fmt.Errorf("replay: %w", err)
						return
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err)
		}
	})
}

// TestActivityOfNodes: nodes write the activity of one minute to rows of
// their own, and the series sums them.
func TestActivityOfNodes(t *testing.T) {
	t.Parallel()
	nodes := openNodes(t, 2)
	createEndpoint(t, nodes[0], "c1")
	ingest(t, nodes[0], "c1", 4)
	for i, s := range []*Store{nodes[0], nodes[1], nodes[0], nodes[1]} {
		claimed, err := s.DeliveryClaim(t.Context(), &store.DeliveryClaimParams{Limit: 1, LeaseMargin: time.Minute, Now: t0})
		require.NoError(t, err)
		require.Len(t, claimed, 1)
		o := delivered(claimed[0])
		if i == 3 {
			o = failed(claimed[0])
		}
		applied, err := s.DeliveryCompleteMany(t.Context(), &store.DeliveryCompleteManyParams{Outcomes: []store.DeliveryOutcome{o}, Now: t0})
		require.NoError(t, err)
		require.Equal(t, []bool{true}, applied)
	}
	var rows int
	require.NoError(t, nodes[0].pool.QueryRow(t.Context(), `SELECT count(*) FROM activity_minutes`).Scan(&rows))
	require.Equal(t, 2, rows, "one row per node in the minute")
	for _, s := range nodes {
		points, err := s.ActivitySeries(t.Context(), &store.ActivitySeriesParams{Window: time.Hour, Step: time.Minute, Now: t0.Add(time.Minute)})
		require.NoError(t, err)
		last := points[len(points)-1]
		require.Equal(t, t0.Truncate(time.Minute), last.At)
		require.Equal(t, int64(4), last.Attempts)
		require.Equal(t, int64(3), last.Succeeded)
		require.Equal(t, int64(1), last.Retries)
	}
}

// TestTakeCountsTheRoomUnderTheCap: the take leases no more than the room
// under an endpoint's in-flight cap, which it counts in its own statement,
// whatever share the claim dealt on the candidates' estimate: a claim that
// committed between the candidates' snapshot and their lock is seen.
func TestTakeCountsTheRoomUnderTheCap(t *testing.T) {
	t.Parallel()
	s := openNodes(t, 1)[0]
	ctx := t.Context()
	ep := createEndpoint(t, s, "c1", func(e *herald.Endpoint) { e.MaxInFlight = 3 })
	ingest(t, s, "c1", 5)
	first, err := s.DeliveryClaim(ctx, &store.DeliveryClaimParams{Limit: 2, LeaseMargin: time.Second, Now: t0})
	require.NoError(t, err)
	require.Len(t, first, 2)

	// A share of 5, dealt as if none were in flight, under a cap of 3.
	taken := 0
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, claimQueuesSQL); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, takeSQL, t0, []string{ep.ID}, []int32{5}, []int64{1e6}, []string{}, []int64{}, []int32{3})
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			taken++
		}
		return rows.Err()
	})
	require.NoError(t, err)
	require.Equal(t, 1, taken, "2 of the cap's 3 were in flight already")
}
