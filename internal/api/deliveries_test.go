package api_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhooks/herald"
	"github.com/heraldhooks/herald/internal/store"
)

// attempt claims every due delivery and records for each the outcome that
// decide gives, as the dispatcher would.
func (e *env) attempt(decide func(d *store.ClaimedDelivery) store.DeliveryOutcome) {
	e.t.Helper()
	claimed, err := e.store.DeliveryClaim(e.t.Context(), &store.DeliveryClaimParams{Limit: 100, LeaseMargin: time.Second, Now: e.clock.Now()})
	require.NoError(e.t, err)
	require.NotEmpty(e.t, claimed)
	var outcomes []store.DeliveryOutcome
	for _, c := range claimed {
		o := decide(c)
		o.Lease = store.Lease{DeliveryID: c.Delivery.ID, LeaseToken: c.LeaseToken}
		outcomes = append(outcomes, o)
	}
	applied, err := e.store.DeliveryCompleteMany(e.t.Context(), &store.DeliveryCompleteManyParams{Outcomes: outcomes, Now: e.clock.Now()})
	require.NoError(e.t, err)
	for _, ok := range applied {
		require.True(e.t, ok)
	}
}

func TestDeliveryGet(t *testing.T) {
	t.Parallel()
	e := setup(t)
	good := e.createEndpoint(map[string]any{"consumer_id": "c1", "event_types": []string{"ok"}})
	bad := e.createEndpoint(map[string]any{"consumer_id": "c1", "event_types": []string{"fail"}})
	okEv := e.send("c1", "ok", `{}`)
	failEv := e.send("c1", "fail", `{}`)

	t.Run("Pending", func(t *testing.T) {
		r := e.do("GET", "/v1/deliveries/"+okEv.Deliveries[0].ID, nil)
		require.Equal(t, http.StatusOK, r.status)
		require.JSONEq(t, `{
			"id": "`+okEv.Deliveries[0].ID+`", "event_id": "`+okEv.ID+`", "endpoint_id": "`+good.ID+`",
			"consumer_id": "c1", "event_type": "ok", "status": "pending", "attempt_count": 0,
			"next_attempt_at": "2024-05-01T12:00:00Z", "last_status_code": null, "last_error": "",
			"dead_reason": null, "created_at": "2024-05-01T12:00:00Z", "updated_at": "2024-05-01T12:00:00Z",
			"delivered_at": null}`, string(r.body))
	})

	e.clock.Advance(time.Second)
	e.attempt(func(c *store.ClaimedDelivery) store.DeliveryOutcome {
		a := herald.Attempt{Number: 1, AttemptedAt: e.clock.Now(), Duration: 150 * time.Millisecond}
		if c.Delivery.EndpointID == good.ID {
			a.StatusCode = http.StatusOK
			a.Response = []byte("thanks")
			return store.DeliveryOutcome{Attempt: a, Status: herald.StatusDelivered}
		}
		a.StatusCode = http.StatusInternalServerError
		a.Response = []byte("boom")
		a.Error = "HTTP 500"
		return store.DeliveryOutcome{Attempt: a, Status: herald.StatusDead, DeadReason: herald.DeadExhausted}
	})

	t.Run("Delivered", func(t *testing.T) {
		var d deliveryOut
		e.do("GET", "/v1/deliveries/"+okEv.Deliveries[0].ID, nil).must(http.StatusOK, &d)
		require.Equal(t, "delivered", d.Status)
		require.Equal(t, 1, d.AttemptCount)
		require.Nil(t, d.NextAttemptAt)
		require.Equal(t, http.StatusOK, *d.LastStatusCode)
		require.Nil(t, d.DeadReason)
		require.NotNil(t, d.DeliveredAt)
		require.Equal(t, start.Add(time.Second), *d.DeliveredAt)
	})

	t.Run("Dead", func(t *testing.T) {
		var d deliveryOut
		e.do("GET", "/v1/deliveries/"+failEv.Deliveries[0].ID, nil).must(http.StatusOK, &d)
		require.Equal(t, "dead", d.Status)
		require.Equal(t, bad.ID, d.EndpointID)
		require.Nil(t, d.NextAttemptAt)
		require.Nil(t, d.DeliveredAt)
		require.Equal(t, http.StatusInternalServerError, *d.LastStatusCode)
		require.Equal(t, "exhausted", *d.DeadReason)
	})

	t.Run("Attempts", func(t *testing.T) {
		r := e.do("GET", "/v1/deliveries/"+failEv.Deliveries[0].ID+"/attempts", nil)
		require.Equal(t, http.StatusOK, r.status)
		var page listOut[map[string]any]
		r.must(http.StatusOK, &page)
		require.Len(t, page.Data, 1)
		a := page.Data[0]
		require.Equal(t, "2024-05-01T12:00:01Z", a["attempted_at"])
		require.Equal(t, 150.0, a["duration_ms"])
		require.Equal(t, 500.0, a["status_code"])
		require.Equal(t, "boom", a["response_body"])
		require.Equal(t, "HTTP 500", a["error"])
		require.Equal(t, failEv.Deliveries[0].ID, a["delivery_id"])
		require.Empty(t, page.NextCursor)

		e.do("GET", "/v1/deliveries/dlv_missing/attempts", nil).apiErr(http.StatusNotFound, "not_found")
		e.do("GET", "/v1/deliveries/"+failEv.Deliveries[0].ID+"/attempts?limit=0", nil).apiErr(http.StatusBadRequest, "invalid_limit")
	})

	t.Run("Missing", func(t *testing.T) {
		msg := e.do("GET", "/v1/deliveries/dlv_missing", nil).apiErr(http.StatusNotFound, "not_found")
		require.Contains(t, msg, "dlv_missing")
	})

	t.Run("ReplayDead", func(t *testing.T) {
		e.clock.Advance(time.Minute)
		path := "/v1/deliveries/" + failEv.Deliveries[0].ID
		var d deliveryOut
		e.do("POST", path+"/replay", nil).must(http.StatusAccepted, &d)
		require.Equal(t, "pending", d.Status)
		require.Equal(t, 0, d.AttemptCount, "a fresh attempt budget")
		require.Nil(t, d.DeadReason)
		require.NotNil(t, d.NextAttemptAt)
		require.Equal(t, start.Add(time.Minute+time.Second), *d.NextAttemptAt, "due now")

		// The attempt log stays.
		var page listOut[map[string]any]
		e.do("GET", path+"/attempts", nil).must(http.StatusOK, &page)
		require.Len(t, page.Data, 1)

		msg := e.do("POST", path+"/replay", nil).apiErr(http.StatusConflict, "conflict")
		require.Equal(t, "delivery "+failEv.Deliveries[0].ID+" is pending; only a delivered, dead or cancelled delivery can be replayed", msg)
	})

	t.Run("ReplayOfDisabledEndpoint", func(t *testing.T) {
		e.do("POST", "/v1/endpoints/"+bad.ID+"/disable", nil).must(http.StatusOK, nil)
		id := failEv.Deliveries[0].ID
		msg := e.do("POST", "/v1/deliveries/"+id+"/replay", nil).apiErr(http.StatusConflict, "conflict")
		require.Equal(t, "the endpoint "+bad.ID+" of delivery "+id+" is disabled or deleted; enable it (POST /v1/endpoints/"+bad.ID+"/enable) before replaying its deliveries", msg)
	})
}

func TestDeliveryCancel(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.createEndpoint(map[string]any{"consumer_id": "c1"})
	ev := e.send("c1", "a", `{}`)
	path := "/v1/deliveries/" + ev.Deliveries[0].ID

	var d deliveryOut
	e.do("POST", path+"/cancel", nil).must(http.StatusOK, &d)
	require.Equal(t, "cancelled", d.Status)
	require.Nil(t, d.NextAttemptAt)

	msg := e.do("POST", path+"/cancel", nil).apiErr(http.StatusConflict, "conflict")
	require.Equal(t, "delivery "+ev.Deliveries[0].ID+" is cancelled; only a pending or delivering delivery can be cancelled", msg)
	e.do("POST", path+"/cancel", `{"why":"x"}`).apiErr(http.StatusBadRequest, "unknown_field")
	e.do("POST", "/v1/deliveries/dlv_missing/cancel", nil).apiErr(http.StatusNotFound, "not_found")
	e.do("POST", "/v1/deliveries/dlv_missing/replay", nil).apiErr(http.StatusNotFound, "not_found")

	e.do("POST", path+"/replay", nil).must(http.StatusAccepted, &d)
	require.Equal(t, "pending", d.Status)
}

func TestDeliveryList(t *testing.T) {
	t.Parallel()
	e := setup(t)
	a := e.createEndpoint(map[string]any{"consumer_id": "c1"})
	b := e.createEndpoint(map[string]any{"consumer_id": "c1"})
	e.createEndpoint(map[string]any{"consumer_id": "c2"})
	var events []ingestOut
	for range 3 {
		events = append(events, e.send("c1", "a", `{}`))
		e.clock.Advance(time.Millisecond)
	}
	e.send("c2", "a", `{}`)
	e.do("POST", "/v1/deliveries/"+events[0].Deliveries[0].ID+"/cancel", nil).must(http.StatusOK, nil)

	count := func(query string) int {
		t.Helper()
		var page listOut[deliveryOut]
		e.do("GET", "/v1/deliveries?"+query, nil).must(http.StatusOK, &page)
		return len(page.Data)
	}
	require.Equal(t, 7, count(""))
	require.Equal(t, 6, count("consumer_id=c1"))
	require.Equal(t, 3, count("endpoint_id="+a.ID))
	require.Equal(t, 3, count("endpoint_id="+b.ID))
	require.Equal(t, 2, count("event_id="+events[1].ID))
	require.Equal(t, 1, count("status=cancelled"))
	require.Equal(t, 6, count("status=pending"))
	require.Equal(t, 0, count("status=dead"))
	require.Equal(t, 5, count("status=pending&consumer_id=c1"))

	t.Run("Pages", func(t *testing.T) {
		seen := map[string]bool{}
		cursor := ""
		for range 10 {
			var page listOut[deliveryOut]
			e.do("GET", "/v1/deliveries?consumer_id=c1&limit=4&cursor="+cursor, nil).must(http.StatusOK, &page)
			for _, d := range page.Data {
				require.False(t, seen[d.ID], "delivery %s listed twice", d.ID)
				seen[d.ID] = true
			}
			if cursor = page.NextCursor; cursor == "" {
				break
			}
		}
		require.Len(t, seen, 6)
	})

	t.Run("Invalid", func(t *testing.T) {
		msg := e.do("GET", "/v1/deliveries?status=failed", nil).apiErr(http.StatusBadRequest, "invalid_status")
		require.Contains(t, msg, "status must be")
		e.do("GET", "/v1/deliveries?endpoint="+a.ID, nil).apiErr(http.StatusBadRequest, "unknown_parameter")
		e.do("GET", "/v1/deliveries?cursor=AAAA", nil).apiErr(http.StatusBadRequest, "invalid_cursor")
	})
}

// TestARefusedDestinationReadsAsNotAllowedToItsConsumer: an attempt
// refused because its destination resolved to a private address names
// that address to the operator (key and dashboard), and reads only as
// "destination not allowed" to the endpoint's consumer (its key, the
// portal, the events it reads), which must not learn what a name resolves
// to inside the operator's network. Other errors read the same to both.
func TestARefusedDestinationReadsAsNotAllowedToItsConsumer(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.createEndpoint(map[string]any{"consumer_id": "c1", "event_types": []string{"refused"}})
	e.createEndpoint(map[string]any{"consumer_id": "c1", "event_types": []string{"failed"}})
	refusedEv := e.send("c1", "refused", `{}`)
	failedEv := e.send("c1", "failed", `{}`)
	refusal := herald.RefusedDestinationError("10.20.30.40")
	e.clock.Advance(time.Second)
	e.attempt(func(c *store.ClaimedDelivery) store.DeliveryOutcome {
		a := herald.Attempt{Number: 1, AttemptedAt: e.clock.Now(), Error: refusal}
		if c.Delivery.EventID == failedEv.ID {
			a.StatusCode, a.Error = http.StatusInternalServerError, "HTTP 500"
		}
		return store.DeliveryOutcome{Attempt: a, Status: herald.StatusDead, DeadReason: herald.DeadExhausted}
	})
	consumer := e.createKey("consumer", "c1").Key

	for _, tc := range []struct {
		name, key, want string
	}{
		{"Operator", testKey, refusal},
		{"Consumer", consumer, herald.DestinationNotAllowed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id := refusedEv.Deliveries[0].ID
			var d deliveryOut
			e.doKey(tc.key, "GET", "/v1/deliveries/"+id, nil).must(http.StatusOK, &d)
			require.Equal(t, tc.want, d.LastError)
			var list struct{ Data []deliveryOut }
			e.doKey(tc.key, "GET", "/v1/deliveries?event_id="+refusedEv.ID, nil).must(http.StatusOK, &list)
			require.Len(t, list.Data, 1)
			require.Equal(t, tc.want, list.Data[0].LastError)
			var attempts struct {
				Data []struct {
					Error string `json:"error"`
				}
			}
			e.doKey(tc.key, "GET", "/v1/deliveries/"+id+"/attempts", nil).must(http.StatusOK, &attempts)
			require.Len(t, attempts.Data, 1)
			require.Equal(t, tc.want, attempts.Data[0].Error)
			ev := e.doKey(tc.key, "GET", "/v1/events/"+refusedEv.ID, nil)
			require.Equal(t, http.StatusOK, ev.status)
			require.Contains(t, string(ev.body), `"last_error":"`+tc.want+`"`)
			if tc.key == consumer {
				require.NotContains(t, string(ev.body), "10.20.30.40")
			}

			var other deliveryOut
			e.doKey(tc.key, "GET", "/v1/deliveries/"+failedEv.Deliveries[0].ID, nil).must(http.StatusOK, &other)
			require.Equal(t, "HTTP 500", other.LastError, "other errors read the same to both")
		})
	}
}
