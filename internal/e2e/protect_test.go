package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

type healthJSON struct {
	BreakerState        string     `json:"breaker_state"`
	ConsecutiveFailures int        `json:"consecutive_failures"`
	LastSuccessAt       *time.Time `json:"last_success_at"`
	LastFailureAt       *time.Time `json:"last_failure_at"`
	SuccessRate1h       *float64   `json:"success_rate_1h"`
}

func (e *env) health(id string) healthJSON {
	e.t.Helper()
	var ep struct {
		Enabled bool       `json:"enabled"`
		Health  healthJSON `json:"health"`
	}
	e.must(http.StatusOK, "GET", "/v1/endpoints/"+id, nil, &ep)
	return ep.Health
}

func TestCircuitBreaker(t *testing.T) {
	t.Parallel()
	backends(t, func(t *testing.T, db string) {
		e := setup(t, db)
		var healthy atomic.Bool
		rc := newReceiver(t, e.clock, func(_ int, _ *http.Request, w http.ResponseWriter) {
			if healthy.Load() {
				w.WriteHeader(http.StatusOK)
				return
			}
			w.WriteHeader(http.StatusInternalServerError)
		})
		ep := e.createEndpoint(map[string]any{"consumer_id": "c1", "url": rc.URL, "max_in_flight": 1})
		var ids []string
		for i := range 8 {
			ids = append(ids, e.send("c1", "a.b", fmt.Sprintf(`{"n":%d}`, i)).Deliveries[0].ID)
		}
		rc.waitHits(t, 5)
		e.settle()
		h := e.health(ep.ID)
		require.Equal(t, "open", h.BreakerState, "5 consecutive failures open the breaker")
		require.Equal(t, 5, h.ConsecutiveFailures)
		require.NotNil(t, h.LastFailureAt)

		// While open nothing goes, and waiting spends no attempt.
		e.tick(4 * time.Minute)
		e.settle()
		require.Equal(t, 5, rc.count())
		spent := 0
		for _, id := range ids {
			spent += e.delivery(id).AttemptCount
		}
		require.Equal(t, 5, spent, "only real attempts count")

		// After the 5 m cooldown one probe goes; it fails, so the breaker
		// opens again for twice as long.
		e.tick(time.Minute)
		rc.waitHits(t, 6)
		e.settle()
		require.Equal(t, 6, rc.count(), "exactly one probe")
		require.Equal(t, "open", e.health(ep.ID).BreakerState)
		e.tick(9 * time.Minute)
		e.settle()
		require.Equal(t, 6, rc.count(), "the cooldown doubled to 10 m")

		// The next probe succeeds: the breaker closes and the rest flow.
		healthy.Store(true)
		e.tick(time.Minute)
		rc.waitHits(t, 7)
		e.settle()
		require.Equal(t, "closed", e.health(ep.ID).BreakerState)
		e.tick(24 * time.Hour) // every retry falls due
		e.settle()
		for _, id := range ids {
			require.Equal(t, "delivered", e.waitStatus(id, "delivered").Status)
		}
	})
}

// concurrency tracks how many requests a receiver holds at once.
type concurrency struct {
	now, peak atomic.Int64
}

func (c *concurrency) enter() {
	n := c.now.Add(1)
	for {
		p := c.peak.Load()
		if n <= p || c.peak.CompareAndSwap(p, n) {
			return
		}
	}
}

func (c *concurrency) leave() { c.now.Add(-1) }

func TestRateLimitAndInFlightCapAcrossNodes(t *testing.T) {
	t.Parallel()
	t.Run("RateLimit", func(t *testing.T) {
		t.Parallel()
		backends(t, func(t *testing.T, db string) {
			e := setup(t, db, func(o *options) { o.noDispatch = true })
			rc := newReceiver(t, e.clock, nil)
			e.createEndpoint(map[string]any{"consumer_id": "c1", "url": rc.URL,
				"rate_limit": map[string]any{"per_second": 20, "burst": 1}, "max_in_flight": 50})
			var batch []map[string]any
			for i := range 400 {
				batch = append(batch, map[string]any{"consumer_id": "c1", "event_type": "a.b", "payload": i})
			}
			e.must(http.StatusAccepted, "POST", "/v1/events/batch", map[string]any{"events": batch}, nil)
			e.dispatcher(16)
			e.dispatcher(16)
			// Five seconds of test time in 50 ms steps; each step lets both
			// nodes claim what the shared bucket allows and deliver it.
			for range 100 {
				e.tick(50 * time.Millisecond)
				e.settle()
			}
			var at []time.Time
			for _, h := range rc.all() {
				at = append(at, h.At)
			}
			sort.Slice(at, func(i, j int) bool { return at[i].Before(at[j]) })
			require.GreaterOrEqual(t, len(at), 90, "about 20/s for 5 s")
			require.LessOrEqual(t, len(at), 102)
			for i := range at {
				j := i
				for j < len(at) && at[j].Sub(at[i]) < time.Second {
					j++
				}
				require.LessOrEqual(t, j-i, 21, "requests in the second from %s", at[i])
			}
		})
	})
	t.Run("InFlightCap", func(t *testing.T) {
		t.Parallel()
		backends(t, func(t *testing.T, db string) {
			e := setup(t, db, func(o *options) { o.noDispatch = true })
			var c concurrency
			release := make(chan struct{})
			var once sync.Once
			t.Cleanup(func() { once.Do(func() { close(release) }) })
			rc := newReceiver(t, e.clock, func(_ int, _ *http.Request, w http.ResponseWriter) {
				c.enter()
				defer c.leave()
				<-release
			})
			e.createEndpoint(map[string]any{"consumer_id": "c1", "url": rc.URL, "max_in_flight": 3})
			var batch []map[string]any
			for i := range 30 {
				batch = append(batch, map[string]any{"consumer_id": "c1", "event_type": "a.b", "payload": i})
			}
			e.must(http.StatusAccepted, "POST", "/v1/events/batch", map[string]any{"events": batch}, nil)
			e.dispatcher(16)
			e.dispatcher(16)
			rc.waitHits(t, 3)
			e.tick(time.Second) // both nodes look again while three are held
			require.Equal(t, int64(3), e.leased(), "no more than the cap while three are held")
			require.Equal(t, 3, rc.count())
			once.Do(func() { close(release) })
			rc.waitHits(t, 30)
			require.LessOrEqual(t, c.peak.Load(), int64(3), "never more than max_in_flight at once")
		})
	})
}

func TestFairnessAndSlowEndpoints(t *testing.T) {
	t.Parallel()
	backends(t, func(t *testing.T, db string) {
		e := setup(t, db)
		var slow concurrency
		hang := make(chan struct{})
		stuck := newReceiver(t, e.clock, func(_ int, r *http.Request, w http.ResponseWriter) {
			slow.enter()
			defer slow.leave()
			select {
			case <-hang:
			case <-r.Context().Done():
			}
		})
		// Registered after the receiver's, so it runs first: the receiver's
		// Close waits for its handlers, which wait for this.
		t.Cleanup(func() { close(hang) })
		e.createEndpoint(map[string]any{"consumer_id": "big", "url": stuck.URL, "timeout": "60s"})
		// A backlog of 1,000, a hundred times its in-flight cap: the
		// claim looks at each endpoint's head of queue, so a longer one
		// would be more of the same.
		for range 2 {
			var batch []map[string]any
			for i := range 500 {
				batch = append(batch, map[string]any{"consumer_id": "big", "event_type": "a.b", "payload": i})
			}
			e.must(http.StatusAccepted, "POST", "/v1/events/batch", map[string]any{"events": batch}, nil)
		}
		stuck.waitHits(t, 10)

		// 100 healthy endpoints each get their event while 990 wait for
		// the hanging one, which holds no more than its in-flight cap.
		var healthy []*receiver
		for i := range 100 {
			rc := newReceiver(t, e.clock, nil)
			healthy = append(healthy, rc)
			e.createEndpoint(map[string]any{"consumer_id": fmt.Sprintf("small_%d", i), "url": rc.URL})
		}
		for i := range 100 {
			e.send(fmt.Sprintf("small_%d", i), "a.b", `{}`)
		}
		for _, rc := range healthy {
			rc.waitHits(t, 1)
		}
		require.LessOrEqual(t, slow.peak.Load(), int64(10), "the hanging endpoint holds at most its cap of senders")
		require.Equal(t, 10, stuck.count())
	})
}

func TestAutoDisableAndNotifications(t *testing.T) {
	t.Parallel()
	backends(t, func(t *testing.T, db string) {
		e := setup(t, db)
		bad := newReceiver(t, e.clock, func(_ int, _ *http.Request, w http.ResponseWriter) {
			w.WriteHeader(http.StatusServiceUnavailable)
		})
		ops := newReceiver(t, e.clock, nil)
		// A notification endpoint that itself fails must not loop.
		brokenOps := newReceiver(t, e.clock, func(_ int, _ *http.Request, w http.ResponseWriter) {
			w.WriteHeader(http.StatusInternalServerError)
		})
		other := newReceiver(t, e.clock, nil)
		ep := e.createEndpoint(map[string]any{"consumer_id": "c1", "url": bad.URL, "event_types": []string{"order.*"},
			"auto_disable_after_failures": 4, "retry_schedule": []string{"0s", "1s", "1s", "1s", "1s", "1s"}})
		e.createEndpoint(map[string]any{"consumer_id": "c1", "url": ops.URL, "event_types": []string{"herald.*"}})
		e.createEndpoint(map[string]any{"consumer_id": "c1", "url": brokenOps.URL, "event_types": []string{"herald.*"}})
		e.createEndpoint(map[string]any{"consumer_id": "c2", "url": other.URL, "event_types": []string{"herald.*"}})

		sent := e.send("c1", "order.created", `{"n":1}`)
		first := sent.Deliveries[0].ID
		bad.waitHits(t, 1)
		e.settle()
		for range 3 {
			e.tick(2 * time.Second)
			e.settle()
		}
		d := e.waitStatus(first, "dead")
		require.Equal(t, "endpoint_disabled", *d.DeadReason)
		var got endpointJSON
		e.must(http.StatusOK, "GET", "/v1/endpoints/"+ep.ID, nil, &got)
		require.False(t, got.Enabled, "four consecutive failures disable it")

		types := func(rc *receiver) []string {
			var out []string
			for _, h := range rc.all() {
				out = append(out, h.Headers.Get("X-Webhook-Event"))
			}
			return out
		}
		waitFor(t, "the notifications", func() bool { return len(types(ops)) >= 2 })
		// A receiver records a request before it answers, so the two are
		// still delivering here. Their outcomes must be written before the
		// clock jumps an hour below: that outlives their leases, and the
		// dispatcher would rightly send them again (at least once).
		e.settle()
		require.ElementsMatch(t, []string{"herald.endpoint.failing", "herald.endpoint.disabled"}, types(ops))
		var payload map[string]any
		for _, h := range ops.all() {
			if h.Headers.Get("X-Webhook-Event") == "herald.endpoint.disabled" {
				require.NoError(t, json.Unmarshal(h.Body, &payload))
			}
		}
		require.Equal(t, ep.ID, payload["endpoint_id"])
		require.Equal(t, "auto_disabled", payload["reason"])

		// The failing notification endpoint gets the same two, retried on its
		// schedule, and its failures make no notifications of their own.
		for range 10 {
			e.tick(time.Hour)
			e.settle()
		}
		for _, typ := range types(brokenOps) {
			require.Contains(t, []string{"herald.endpoint.failing", "herald.endpoint.disabled"}, typ)
		}
		require.ElementsMatch(t, []string{"herald.endpoint.failing", "herald.endpoint.disabled"}, types(ops), "no loop")
		require.Zero(t, other.count(), "another consumer hears nothing")

		// Enable it again, and one call replays what the disable killed.
		e.must(http.StatusOK, "POST", "/v1/endpoints/"+ep.ID+"/enable", nil, nil)
		var dry, replayed struct {
			Replayed int `json:"replayed"`
		}
		e.must(http.StatusOK, "POST", "/v1/endpoints/"+ep.ID+"/replay", map[string]any{"status": "dead", "dry_run": true}, &dry)
		require.Equal(t, 1, dry.Replayed)
		require.Equal(t, "dead", e.delivery(first).Status, "a dry run changes nothing")
		// The running dispatcher takes the replayed delivery at once, so
		// its status races ahead of a read here: what shows the replay is
		// its next request, under the same webhook-id (invariant 6).
		require.Equal(t, 4, bad.count())
		e.must(http.StatusOK, "POST", "/v1/endpoints/"+ep.ID+"/replay", map[string]any{"status": "dead"}, &replayed)
		require.Equal(t, 1, replayed.Replayed)
		bad.waitHits(t, 5)
		require.Equal(t, sent.ID, bad.all()[4].Headers.Get("webhook-id"), "the replay sends the same event again")
	})
}

func TestFIFOOrderThroughRetriesAndACrash(t *testing.T) {
	t.Parallel()
	backends(t, func(t *testing.T, db string) {
		e := setup(t, db, func(o *options) { o.noDispatch = true })
		held := make(chan struct{})
		var once sync.Once
		t.Cleanup(func() { once.Do(func() { close(held) }) })
		rc := newReceiver(t, e.clock, func(n int, r *http.Request, w http.ResponseWriter) {
			switch n {
			case 1: // the head fails once
				w.WriteHeader(http.StatusInternalServerError)
			case 2: // its retry is in flight when the node crashes
				select {
				case <-held:
				case <-r.Context().Done():
				}
				w.WriteHeader(http.StatusInternalServerError)
			default:
				w.WriteHeader(http.StatusOK)
			}
		})
		e.createEndpoint(map[string]any{"consumer_id": "c1", "url": rc.URL, "ordering": "fifo"})
		var evs []string
		for i := range 4 {
			evs = append(evs, e.send("c1", "a.b", fmt.Sprintf(`{"n":%d}`, i)).ID)
		}

		st1, stop1, done1 := e.crashingDispatcher(8)
		rc.waitHits(t, 1)
		e.settle()
		require.Equal(t, 1, rc.count(), "a head waiting on its retry holds back the rest")

		e.tick(40 * time.Second) // the head's retry
		rc.waitHits(t, 2)
		require.NoError(t, st1.Close()) // node 1 dies with the head in flight
		stop1()
		once.Do(func() { close(held) })
		<-done1

		e.dispatcher(8)
		e.tick(time.Minute) // the dead node's lease expires
		rc.waitHits(t, 6)
		var order []string
		for _, h := range rc.all() {
			order = append(order, h.Headers.Get("webhook-id"))
		}
		require.Equal(t, []string{evs[0], evs[0], evs[0], evs[1], evs[2], evs[3]}, order)
	})
}
