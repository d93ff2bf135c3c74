package e2e

import (
	"bufio"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhooks/herald/internal/syncbuf"
)

// A node dies with attempts in flight and never hands its leases back. Once
// the leases expire another node delivers everything: nothing is lost.
func TestCrashedNodeLeasesExpireAndWorkIsDelivered(t *testing.T) {
	t.Parallel()
	backends(t, func(t *testing.T, db string) {
		e := setup(t, db, func(o *options) { o.noDispatch = true })
		const events = 20
		held := make(chan struct{})
		var once sync.Once
		rc := newReceiver(t, e.clock, func(n int, r *http.Request, w http.ResponseWriter) {
			if n <= events {
				// The first node's attempts never get an answer it can use.
				select {
				case <-held:
				case <-r.Context().Done():
				}
				w.WriteHeader(http.StatusInternalServerError)
				return
			}
			w.WriteHeader(http.StatusOK)
		})
		t.Cleanup(func() { once.Do(func() { close(held) }) })
		e.createEndpoint(map[string]any{"consumer_id": "c1", "url": rc.URL, "max_in_flight": events})
		var ids []string
		for range events {
			ids = append(ids, e.send("c1", "a.b", `{}`).Deliveries[0].ID)
		}

		// Node 1 claims everything, then "crashes": its database connection
		// goes away before it can write or release anything.
		st1, stop1, done1 := e.crashingDispatcher(events)
		rc.waitHits(t, events)
		require.NoError(t, st1.Close())
		stop1()
		once.Do(func() { close(held) })
		<-done1
		for _, id := range ids {
			require.Equal(t, "delivering", e.delivery(id).Status, "the dead node's lease still holds")
		}

		// Node 2 starts. Before the leases expire it takes nothing; after, it
		// delivers everything.
		e.dispatcher(8)
		e.tick(20 * time.Second) // leases run 2 x 10 s timeout + margin
		for _, id := range ids {
			require.Equal(t, "delivering", e.delivery(id).Status)
		}
		e.tick(time.Minute)
		for _, id := range ids {
			d := e.waitStatus(id, "delivered")
			require.Equal(t, 1, d.AttemptCount, "the lost attempt was never recorded, so it spent nothing")
		}
		require.Equal(t, 2*events, rc.count())
	})
}

// A node dies mid-attempt. The node that takes the expired leases counts
// each attempt it starts again in herald_deliveries_redelivered_total and
// logs a warning naming the delivery; what it sends afterwards from pending
// deliveries (new ones, retries) is not counted.
func TestLostLeasesAreCountedAsRedeliveries(t *testing.T) {
	t.Parallel()
	backends(t, func(t *testing.T, db string) {
		var logs syncbuf.Buffer
		logger := slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
		e := setup(t, db, func(o *options) {
			o.noDispatch = true
			o.logger = logger
		})
		const events = 3
		held := make(chan struct{})
		var once sync.Once
		rc := newReceiver(t, e.clock, func(n int, r *http.Request, w http.ResponseWriter) {
			switch {
			case n <= events: // the crashed node's attempts
				select {
				case <-held:
				case <-r.Context().Done():
				}
				w.WriteHeader(http.StatusInternalServerError)
			case n == 2*events+1: // the first attempt of the event sent last
				w.WriteHeader(http.StatusServiceUnavailable)
			default:
				w.WriteHeader(http.StatusOK)
			}
		})
		t.Cleanup(func() { once.Do(func() { close(held) }) })
		e.createEndpoint(map[string]any{"consumer_id": "c1", "url": rc.URL, "retry_schedule": []string{"0s", "1m"}})
		lost := map[string]bool{}
		for range events {
			lost[e.send("c1", "a.b", `{}`).Deliveries[0].ID] = true
		}

		// Another node claims everything and dies before it writes anything.
		st1, stop1, done1 := e.crashingDispatcher(events)
		rc.waitHits(t, events)
		require.NoError(t, st1.Close())
		stop1()
		once.Do(func() { close(held) })
		<-done1

		// This node starts; nothing is redelivered while the leases hold.
		e.runDispatch()
		e.tick(20 * time.Second) // leases run 2 x 10 s timeout + margin
		require.Zero(t, e.metrics().get(`herald_deliveries_redelivered_total`))
		e.tick(time.Minute)
		for id := range lost {
			e.waitStatus(id, "delivered")
		}
		s := e.waitMetrics("the redeliveries to be counted", func(s scrape) bool {
			return s.get(`herald_attempts_total{class="success"}`) == events
		})
		require.Equal(t, float64(events), s.get(`herald_deliveries_redelivered_total`))

		// A new delivery, failed once and retried, is no redelivery.
		id := e.send("c1", "a.b", `{}`).Deliveries[0].ID
		rc.waitHits(t, 2*events+1)
		e.waitStatus(id, "pending")
		e.tick(73 * time.Second) // 1 m, +20 % jitter at most
		e.waitStatus(id, "delivered")
		s = e.waitMetrics("the retry to be counted", func(s scrape) bool {
			return s.get(`herald_attempts_total{class="success"}`) == events+1
		})
		require.Equal(t, float64(events), s.get(`herald_deliveries_redelivered_total`))

		// Each redelivery logged one warning naming its delivery.
		warned := map[string]bool{}
		sc := bufio.NewScanner(strings.NewReader(logs.String()))
		for sc.Scan() {
			var line map[string]any
			require.NoError(t, json.Unmarshal(sc.Bytes(), &line), sc.Text())
			if strings.HasPrefix(line["msg"].(string), "redelivering") {
				require.Equal(t, "WARN", line["level"])
				id, _ := line["delivery_id"].(string)
				require.False(t, warned[id], "one warning per redelivery")
				warned[id] = true
			}
		}
		require.Equal(t, lost, warned)
	})
}

// The configured lease margin sets the node's leases: with --lease-margin
// 2s, a delivery whose attempt hangs on a node is taken by another node
// 2 x 60 s + 2 s after it was claimed, not before.
func TestLeaseMarginSetsTheLease(t *testing.T) {
	t.Parallel()
	backends(t, func(t *testing.T, db string) {
		e := setup(t, db, func(o *options) { o.leaseMargin = 2 * time.Second })
		held := make(chan struct{})
		var once sync.Once
		rc := newReceiver(t, e.clock, func(n int, r *http.Request, w http.ResponseWriter) {
			if n == 1 {
				select {
				case <-held:
				case <-r.Context().Done():
				}
				w.WriteHeader(http.StatusInternalServerError)
				return
			}
			w.WriteHeader(http.StatusOK)
		})
		t.Cleanup(func() { once.Do(func() { close(held) }) })
		e.createEndpoint(map[string]any{"consumer_id": "c1", "url": rc.URL, "timeout": "60s"})
		id := e.send("c1", "a.b", `{}`).Deliveries[0].ID
		rc.waitHits(t, 1) // this node's attempt hangs

		e.dispatcher(4)
		e.tick(2*time.Minute + time.Second)
		require.Equal(t, 1, rc.count(), "the lease holds for 2 x 60 s + 2 s")
		require.Equal(t, "delivering", e.delivery(id).Status)
		e.tick(time.Second)
		rc.waitHits(t, 2)
		e.waitStatus(id, "delivered")
		once.Do(func() { close(held) })
	})
}

// A node whose lease expired while its attempt hung comes back and writes
// its outcome: the write is fenced off and the newer outcome stands.
func TestStaleNodeCannotOverwriteNewerOutcome(t *testing.T) {
	t.Parallel()
	backends(t, func(t *testing.T, db string) {
		e := setup(t, db, func(o *options) { o.noDispatch = true })
		held := make(chan struct{})
		rc := newReceiver(t, e.clock, func(n int, r *http.Request, w http.ResponseWriter) {
			if n == 1 {
				<-held
				w.WriteHeader(http.StatusGone) // would kill the delivery and disable the endpoint
				return
			}
			w.WriteHeader(http.StatusOK)
		})
		ep := e.createEndpoint(map[string]any{"consumer_id": "c1", "url": rc.URL, "timeout": "60s"})
		id := e.send("c1", "a.b", `{}`).Deliveries[0].ID

		// Node 1 has one sender slot, so once its attempt hangs it claims nothing more.
		_, _, _ = e.dispatcher(1)
		rc.waitHits(t, 1)
		e.stuck.Add(1) // its only slot is held: it will not go idle on the clock

		// Its lease (2 x 60 s + margin) expires; node 2 delivers.
		e.dispatcher(4)
		e.tick(3 * time.Minute)
		e.waitStatus(id, "delivered")

		// Node 1's attempt now answers 410 and its outcome is written late.
		close(held)
		waitFor(t, "the stale attempt to be logged", func() bool { return len(e.attempts(id)) == 2 })
		d := e.delivery(id)
		require.Equal(t, "delivered", d.Status, "the newer outcome stands")
		require.Nil(t, d.DeadReason)
		var got endpointJSON
		e.must(http.StatusOK, "GET", "/v1/endpoints/"+ep.ID, nil, &got)
		require.True(t, got.Enabled, "a stale 410 does not disable the endpoint")
	})
}

// Two dispatchers share one database and never deliver the same delivery
// twice while neither lease expires.
func TestTwoDispatchersNeverClaimTheSameDelivery(t *testing.T) {
	t.Parallel()
	backends(t, func(t *testing.T, db string) {
		e := setup(t, db, func(o *options) { o.noDispatch = true })
		rc := newReceiver(t, e.clock, nil)
		e.createEndpoint(map[string]any{"consumer_id": "c1", "url": rc.URL})
		const events = 400
		var batch []map[string]any
		for i := range events {
			batch = append(batch, map[string]any{"consumer_id": "c1", "event_type": "a.b", "payload": i})
		}
		e.must(http.StatusAccepted, "POST", "/v1/events/batch", map[string]any{"events": batch}, nil)
		e.dispatcher(16)
		e.dispatcher(16)
		rc.waitHits(t, events)
		var stats struct {
			Deliveries map[string]int64 `json:"deliveries"`
		}
		waitFor(t, "all delivered", func() bool {
			e.must(http.StatusOK, "GET", "/v1/stats", nil, &stats)
			return stats.Deliveries["delivered"] == events
		})
		seen := map[string]int{}
		for _, h := range rc.all() {
			seen[h.Headers.Get("webhook-id")]++
		}
		require.Len(t, seen, events)
		for id, n := range seen {
			require.Equal(t, 1, n, "%s delivered %d times", id, n)
		}
	})
}
