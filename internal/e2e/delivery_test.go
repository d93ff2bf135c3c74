package e2e

import (
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhooks/herald/internal/store/sqlitestore/sqlitetest"
	"github.com/heraldhooks/herald/verify"
)

// TestFanOutEventsToTenEndpoints sends events in batches to a consumer with
// ten endpoints: every endpoint receives every event exactly once, and
// another consumer's endpoint none. 2,000 deliveries are many times what
// the node sends at once (each endpoint's in-flight cap of 10), so each
// endpoint's queue is claimed over and over while the other nine compete;
// more events would repeat the same claims, not add a case.
func TestFanOutEventsToTenEndpoints(t *testing.T) {
	t.Parallel()
	backends(t, func(t *testing.T, db string) {
		// Room for every endpoint's in-flight cap (10 × 10) at once, as a
		// node with the default concurrency has.
		e := setup(t, db, func(o *options) { o.concurrency = 128 })
		const endpoints, events, perBatch = 10, 200, 100
		var receivers []*receiver
		for i := range endpoints {
			rc := newReceiver(t, e.clock, nil)
			receivers = append(receivers, rc)
			e.createEndpoint(map[string]any{
				"consumer_id": "cust_fan", "url": rc.URL + "/hook",
				"description": fmt.Sprintf("receiver %d", i),
			})
		}
		// Another consumer's endpoint must receive nothing.
		other := newReceiver(t, e.clock, nil)
		e.createEndpoint(map[string]any{"consumer_id": "cust_other", "url": other.URL})

		for b := range events / perBatch {
			var batch []map[string]any
			for i := range perBatch {
				batch = append(batch, map[string]any{
					"consumer_id": "cust_fan", "event_type": "order.created",
					"payload": map[string]any{"n": b*perBatch + i},
				})
			}
			var out struct {
				Data []ingestJSON `json:"data"`
			}
			e.must(http.StatusAccepted, "POST", "/v1/events/batch", map[string]any{"events": batch}, &out)
			require.Len(t, out.Data, perBatch)
			require.Len(t, out.Data[0].Deliveries, endpoints)
		}

		for _, rc := range receivers {
			rc.waitHits(t, events)
		}
		var stats struct {
			Deliveries map[string]int64 `json:"deliveries"`
		}
		waitFor(t, "every delivery to be recorded delivered", func() bool {
			e.must(http.StatusOK, "GET", "/v1/stats", nil, &stats)
			return stats.Deliveries["delivered"] == endpoints*events
		})
		for i, rc := range receivers {
			seen := map[string]int{}
			for _, h := range rc.all() {
				seen[h.Headers.Get("webhook-id")]++
			}
			require.Len(t, seen, events, "receiver %d: distinct events", i)
			for id, n := range seen {
				require.Equal(t, 1, n, "receiver %d got %s %d times", i, id, n)
			}
		}
		require.Zero(t, other.count(), "another consumer's endpoint got events")
	})
}

func TestSignedExactBytes(t *testing.T) {
	t.Parallel()
	backends(t, func(t *testing.T, db string) {
		e := setup(t, db)
		rc := newReceiver(t, e.clock, nil)
		ep := e.createEndpoint(map[string]any{"consumer_id": "c1", "url": rc.URL, "headers": map[string]string{"X-Team": "a"}})
		hexRC := newReceiver(t, e.clock, nil)
		hexEP := e.createEndpoint(map[string]any{"consumer_id": "c1", "url": hexRC.URL, "signature_scheme": "hmac-sha256"})

		payload := `{ "z": 1,  "a": "ünïcødé ✓", "big": 123456789012345678901234567890, "esc": "\u00e9\n", "nested": {"b":[1, 2 ,3]} }`
		ev := e.send("c1", "order.created", payload)
		rc.waitHits(t, 1)
		hexRC.waitHits(t, 1)

		h := rc.all()[0]
		require.Equal(t, payload, string(h.Body), "body must be the exact accepted bytes")
		require.Equal(t, ev.ID, h.Headers.Get("webhook-id"))
		require.Equal(t, "order.created", h.Headers.Get("X-Webhook-Event"))
		require.Equal(t, "application/json", h.Headers.Get("Content-Type"))
		require.True(t, strings.HasPrefix(h.Headers.Get("User-Agent"), "Herald/"))
		require.Equal(t, "a", h.Headers.Get("X-Team"))
		ts := h.Headers.Get("webhook-timestamp")
		require.Equal(t, fmt.Sprint(start.Unix()), ts)
		want, err := verify.SignStandard(ep.Secret, ev.ID, start.Unix(), []byte(payload))
		require.NoError(t, err)
		require.Equal(t, want, h.Headers.Get("webhook-signature"))
		_, err = base64.StdEncoding.DecodeString(strings.TrimPrefix(ep.Secret, "whsec_"))
		require.NoError(t, err)

		hh := hexRC.all()[0]
		require.Equal(t, payload, string(hh.Body))
		require.Equal(t, ev.ID, hh.Headers.Get("X-Webhook-ID"))
		require.Equal(t, verify.SignHMACSHA256(hexEP.Secret, start.Unix(), []byte(payload)), hh.Headers.Get("X-Webhook-Signature"))

		var got struct {
			Payload json_raw `json:"payload"`
		}
		e.must(http.StatusOK, "GET", "/v1/events/"+ev.ID, nil, &got)
		require.Equal(t, payload, string(got.Payload), "GET returns the exact bytes too")
	})
}

// json_raw keeps a JSON value's bytes as they came.
type json_raw []byte

func (r *json_raw) UnmarshalJSON(b []byte) error { *r = append((*r)[:0], b...); return nil }

func TestRetriesOnScheduleThenDelivers(t *testing.T) {
	t.Parallel()
	backends(t, func(t *testing.T, db string) {
		e := setup(t, db)
		rc := newReceiver(t, e.clock, func(n int, _ *http.Request, w http.ResponseWriter) {
			if n <= 2 {
				w.WriteHeader(http.StatusInternalServerError)
				fmt.Fprint(w, "boom")
				return
			}
			w.WriteHeader(http.StatusOK)
		})
		e.createEndpoint(map[string]any{"consumer_id": "c1", "url": rc.URL})
		ev := e.send("c1", "order.created", `{"id":1}`)
		id := ev.Deliveries[0].ID

		rc.waitHits(t, 1)
		d := e.waitStatus(id, "pending")
		require.Equal(t, 1, d.AttemptCount)
		require.Equal(t, 500, *d.LastStatusCode)
		require.NotNil(t, d.NextAttemptAt)
		wait := d.NextAttemptAt.Sub(start)
		require.GreaterOrEqual(t, wait, 24*time.Second, "30 s -20 %%")
		require.LessOrEqual(t, wait, 36*time.Second, "30 s +20 %%")

		// Just before it is due, nothing goes out.
		e.tick(wait - time.Second)
		require.Equal(t, 1, rc.count())
		require.Equal(t, "pending", e.delivery(id).Status)

		e.tick(time.Second)
		rc.waitHits(t, 2)
		second := rc.all()[1].At
		d = e.waitStatus(id, "pending")
		require.Equal(t, 2, d.AttemptCount)
		wait = d.NextAttemptAt.Sub(second)
		require.GreaterOrEqual(t, wait, 4*time.Minute, "5 m -20 %%")
		require.LessOrEqual(t, wait, 6*time.Minute, "5 m +20 %%")

		e.tick(wait)
		rc.waitHits(t, 3)
		d = e.waitStatus(id, "delivered")
		require.Equal(t, 3, d.AttemptCount)

		hits := rc.all()
		require.Len(t, hits, 3)
		for _, h := range hits {
			require.Equal(t, ev.ID, h.Headers.Get("webhook-id"), "every attempt carries the same webhook-id")
		}
		atts := e.attempts(id)
		require.Len(t, atts, 3)
		require.Equal(t, 500, *atts[0].StatusCode)
		require.Equal(t, "boom", atts[0].ResponseBody)
		require.Equal(t, 500, *atts[1].StatusCode)
		require.Equal(t, 200, *atts[2].StatusCode)
		require.Equal(t, hits[1].At, atts[1].AttemptedAt.UTC())
	})
}

func TestFailureClasses(t *testing.T) {
	t.Parallel()
	backends(t, func(t *testing.T, db string) {
		e := setup(t, db)

		bad := newReceiver(t, e.clock, func(_ int, _ *http.Request, w http.ResponseWriter) {
			w.WriteHeader(http.StatusBadRequest)
		})
		gone := newReceiver(t, e.clock, func(_ int, _ *http.Request, w http.ResponseWriter) {
			w.WriteHeader(http.StatusGone)
		})
		target := newReceiver(t, e.clock, nil)
		redirect := newReceiver(t, e.clock, func(_ int, r *http.Request, w http.ResponseWriter) {
			http.Redirect(w, r, target.URL, http.StatusFound)
		})
		huge := newReceiver(t, e.clock, func(_ int, _ *http.Request, w http.ResponseWriter) {
			w.WriteHeader(http.StatusOK)
			chunk := []byte(strings.Repeat("x", 64<<10))
			for range 160 { // 10 MiB
				if _, err := w.Write(chunk); err != nil {
					return
				}
			}
		})

		epBad := e.createEndpoint(map[string]any{"consumer_id": "bad", "url": bad.URL})
		epGone := e.createEndpoint(map[string]any{"consumer_id": "gone", "url": gone.URL})
		e.createEndpoint(map[string]any{"consumer_id": "redirect", "url": redirect.URL})
		e.createEndpoint(map[string]any{"consumer_id": "huge", "url": huge.URL})

		t.Run("ClientErrorGoesDeadAtOnce", func(t *testing.T) {
			id := e.send("bad", "a.b", `{}`).Deliveries[0].ID
			d := e.waitStatus(id, "dead")
			require.Equal(t, "client_error", *d.DeadReason)
			require.Equal(t, 1, d.AttemptCount)
			require.Equal(t, 400, *d.LastStatusCode)
			e.tick(48 * time.Hour)
			require.Equal(t, 1, bad.count(), "no retry after a 400")
			var ep endpointJSON
			e.must(http.StatusOK, "GET", "/v1/endpoints/"+epBad.ID, nil, &ep)
			require.True(t, ep.Enabled, "a 400 does not disable the endpoint")
		})

		t.Run("GoneGoesDeadAndDisablesEndpoint", func(t *testing.T) {
			id := e.send("gone", "a.b", `{}`).Deliveries[0].ID
			d := e.waitStatus(id, "dead")
			require.Equal(t, "gone", *d.DeadReason)
			require.Equal(t, 410, *d.LastStatusCode)
			var ep endpointJSON
			e.must(http.StatusOK, "GET", "/v1/endpoints/"+epGone.ID, nil, &ep)
			require.False(t, ep.Enabled, "410 disables the endpoint")
			// A disabled endpoint gets no new deliveries.
			require.Empty(t, e.send("gone", "a.b", `{}`).Deliveries)
		})

		t.Run("RedirectIsNotFollowed", func(t *testing.T) {
			id := e.send("redirect", "a.b", `{}`).Deliveries[0].ID
			redirect.waitHits(t, 1)
			var d deliveryJSON
			waitFor(t, "the redirect to be recorded", func() bool {
				d = e.delivery(id)
				return d.AttemptCount == 1
			})
			require.Equal(t, "pending", d.Status, "a 3xx is retried on the schedule")
			require.Equal(t, 302, *d.LastStatusCode)
			require.Zero(t, target.count(), "the redirect target must not be called")
		})

		t.Run("HugeAnswerIsCutAt4KiB", func(t *testing.T) {
			id := e.send("huge", "a.b", `{}`).Deliveries[0].ID
			e.waitStatus(id, "delivered")
			atts := e.attempts(id)
			require.Len(t, atts, 1)
			require.Len(t, atts[0].ResponseBody, 4096)
		})
	})
}

func TestHangingReceiverTimesOutAndIsRetried(t *testing.T) {
	t.Parallel()
	backends(t, func(t *testing.T, db string) {
		e := setup(t, db)
		release := make(chan struct{})
		t.Cleanup(func() { close(release) })
		rc := newReceiver(t, e.clock, func(n int, r *http.Request, w http.ResponseWriter) {
			if n == 1 {
				select { // hang until the test ends or the sender gives up
				case <-release:
				case <-r.Context().Done():
				}
				return
			}
			w.WriteHeader(http.StatusOK)
		})
		e.createEndpoint(map[string]any{"consumer_id": "c1", "url": rc.URL, "timeout": "1s"})
		id := e.send("c1", "a.b", `{}`).Deliveries[0].ID

		d := e.waitStatus(id, "pending")
		waitFor(t, "the timed-out attempt to be recorded", func() bool {
			d = e.delivery(id)
			return d.AttemptCount == 1
		})
		require.Nil(t, d.LastStatusCode)
		atts := e.attempts(id)
		require.Len(t, atts, 1)
		require.NotEmpty(t, atts[0].Error)
		require.GreaterOrEqual(t, atts[0].DurationMS, int64(900))

		e.tick(d.NextAttemptAt.Sub(e.clock.Now()))
		e.waitStatus(id, "delivered")
		require.Equal(t, 2, rc.count())
	})
}

func TestConcurrentDuplicateIngest(t *testing.T) {
	t.Parallel()
	backends(t, func(t *testing.T, db string) {
		e := setup(t, db)
		rc := newReceiver(t, e.clock, nil)
		e.createEndpoint(map[string]any{"consumer_id": "c1", "url": rc.URL})
		const callers = 20
		var wg sync.WaitGroup
		codes := make([]int, callers)
		ids := make([]string, callers)
		for i := range callers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var out ingestJSON
				codes[i] = e.call("POST", "/v1/events", map[string]any{
					"consumer_id": "c1", "event_type": "order.created",
					"payload": map[string]int{"order": 7}, "idempotency_key": "order-7-created",
				}, &out)
				ids[i] = out.ID
			}()
		}
		wg.Wait()
		created := 0
		for i := range callers {
			require.Contains(t, []int{http.StatusAccepted, http.StatusOK}, codes[i])
			if codes[i] == http.StatusAccepted {
				created++
			}
			require.Equal(t, ids[0], ids[i], "every caller sees the one event")
		}
		require.Equal(t, 1, created)
		rc.waitHits(t, 1)
		var list struct {
			Data []deliveryJSON `json:"data"`
		}
		e.must(http.StatusOK, "GET", "/v1/deliveries?consumer_id=c1", nil, &list)
		require.Len(t, list.Data, 1, "one set of deliveries")
	})
}

func TestDeadLetterAndReplay(t *testing.T) {
	t.Parallel()
	backends(t, func(t *testing.T, db string) {
		e := setup(t, db)
		var mu sync.Mutex
		status := http.StatusInternalServerError
		rc := newReceiver(t, e.clock, func(_ int, _ *http.Request, w http.ResponseWriter) {
			mu.Lock()
			defer mu.Unlock()
			w.WriteHeader(status)
		})
		ep := e.createEndpoint(map[string]any{"consumer_id": "c1", "url": rc.URL, "retry_schedule": []string{"0s", "10s"}})
		first := e.send("c1", "order.created", `{"n":1}`)
		second := e.send("c1", "order.created", `{"n":2}`)
		id1, id2 := first.Deliveries[0].ID, second.Deliveries[0].ID

		rc.waitHits(t, 2)
		e.settle()               // both outcomes written before time moves
		e.tick(13 * time.Second) // past 10 s + 20 % jitter
		rc.waitHits(t, 4)
		for _, id := range []string{id1, id2} {
			d := e.waitStatus(id, "dead")
			require.Equal(t, "exhausted", *d.DeadReason)
			require.Equal(t, 2, d.AttemptCount)
		}
		var dead struct {
			Data []deliveryJSON `json:"data"`
		}
		e.must(http.StatusOK, "GET", "/v1/deliveries?status=dead&endpoint_id="+ep.ID, nil, &dead)
		require.Len(t, dead.Data, 2, "both wait in the dead-letter queue")

		mu.Lock()
		status = http.StatusOK
		mu.Unlock()

		t.Run("OneDelivery", func(t *testing.T) {
			var d deliveryJSON
			e.must(http.StatusAccepted, "POST", "/v1/deliveries/"+id1+"/replay", nil, &d)
			require.Equal(t, "pending", d.Status)
			require.Equal(t, 0, d.AttemptCount, "a fresh attempt budget")
			d = e.waitStatus(id1, "delivered")
			require.Len(t, e.attempts(id1), 3, "earlier attempts stay in the log")
			hits := rc.all()
			require.Equal(t, first.ID, hits[len(hits)-1].Headers.Get("webhook-id"), "a replay carries the same webhook-id")
			e.must(http.StatusNotFound, "POST", "/v1/deliveries/dlv_nope/replay", nil, nil)
		})

		t.Run("EndpointDeadInWindow", func(t *testing.T) {
			var out struct {
				Replayed int `json:"replayed"`
			}
			until := e.clock.Now().Add(time.Hour).Format(time.RFC3339)
			e.must(http.StatusOK, "POST", "/v1/endpoints/"+ep.ID+"/replay",
				map[string]any{"status": "dead", "since": start.Add(-time.Hour).Format(time.RFC3339), "until": until}, &out)
			require.Equal(t, 1, out.Replayed, "only the one still dead")
			e.waitStatus(id2, "delivered")
		})

		t.Run("WholeEvent", func(t *testing.T) {
			var out struct {
				Replayed int `json:"replayed"`
			}
			before := rc.count()
			e.must(http.StatusOK, "POST", "/v1/events/"+second.ID+"/replay", nil, &out)
			require.Equal(t, 1, out.Replayed)
			rc.waitHits(t, before+1)
			e.waitStatus(id2, "delivered")
			require.Equal(t, second.ID, rc.all()[rc.count()-1].Headers.Get("webhook-id"))
		})
	})
}

// TestEndpointsOnOneHostReuseConnections: ten endpoints behind one host
// (one customer's API) take up to 100 attempts at once; a node keeps their
// connections open between attempts rather than dialling anew, so it never
// opens more connections than it has slots.
func TestEndpointsOnOneHostReuseConnections(t *testing.T) {
	t.Parallel()
	const concurrency, endpoints, events = 128, 10, 100
	e := setup(t, "sqlite://"+sqlitetest.Path(t), func(o *options) { o.concurrency = concurrency })
	var opened, hits atomic.Int64
	host := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		hits.Add(1)
	}))
	host.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			opened.Add(1)
		}
	}
	host.Start()
	t.Cleanup(host.Close)
	for i := range endpoints {
		e.createEndpoint(map[string]any{"consumer_id": "one_host", "url": fmt.Sprintf("%s/hooks/%d", host.URL, i)})
	}
	var batch []map[string]any
	for i := range events {
		batch = append(batch, map[string]any{"consumer_id": "one_host", "event_type": "a.b", "payload": i})
	}
	e.must(http.StatusAccepted, "POST", "/v1/events/batch", map[string]any{"events": batch}, nil)
	waitFor(t, "every delivery", func() bool { return hits.Load() == endpoints*events })
	require.LessOrEqual(t, opened.Load(), int64(concurrency),
		"connections opened for %d deliveries to one host", endpoints*events)
}
