package api_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestEventIngest(t *testing.T) {
	t.Parallel()

	t.Run("DeliversToMatchingEnabledEndpointsOfTheConsumer", func(t *testing.T) {
		t.Parallel()
		e := setup(t)
		orders := e.createEndpoint(map[string]any{"consumer_id": "c1", "event_types": []string{"order.*"}})
		all := e.createEndpoint(map[string]any{"consumer_id": "c1"})
		e.createEndpoint(map[string]any{"consumer_id": "c1", "event_types": []string{"invoice.paid"}})
		off := e.createEndpoint(map[string]any{"consumer_id": "c1"})
		e.do("POST", "/v1/endpoints/"+off.ID+"/disable", nil).must(http.StatusOK, nil)
		e.createEndpoint(map[string]any{"consumer_id": "c2"})

		r := e.do("POST", "/v1/events", `{"consumer_id":"c1","event_type":"order.created","payload":{"order_id":"o_1"}}`)
		var out ingestOut
		r.must(http.StatusAccepted, &out)
		require.True(t, strings.HasPrefix(out.ID, "evt_"), out.ID)
		require.False(t, out.Duplicate)
		got := map[string]bool{}
		for _, d := range out.Deliveries {
			require.True(t, strings.HasPrefix(d.ID, "dlv_"), d.ID)
			got[d.EndpointID] = true
		}
		require.Equal(t, map[string]bool{orders.ID: true, all.ID: true}, got)
	})

	t.Run("NoEndpointsGivesEmptyDeliveries", func(t *testing.T) {
		t.Parallel()
		e := setup(t)
		r := e.do("POST", "/v1/events", `{"event_type":"a","payload":1}`)
		require.Equal(t, http.StatusAccepted, r.status)
		var out map[string]json.RawMessage
		require.NoError(t, json.Unmarshal(r.body, &out))
		require.JSONEq(t, `[]`, string(out["deliveries"]))
		require.JSONEq(t, `false`, string(out["duplicate"]))
	})

	t.Run("DefaultConsumer", func(t *testing.T) {
		t.Parallel()
		e := setup(t)
		ep := e.createEndpoint(map[string]any{})
		var out ingestOut
		e.do("POST", "/v1/events", `{"event_type":"a.b","payload":{}}`).must(http.StatusAccepted, &out)
		require.Len(t, out.Deliveries, 1)
		require.Equal(t, ep.ID, out.Deliveries[0].EndpointID)
		var ev eventOut
		e.do("GET", "/v1/events/"+out.ID, nil).must(http.StatusOK, &ev)
		require.Equal(t, "default", ev.ConsumerID)
	})

	t.Run("DuplicateKeyInBody", func(t *testing.T) {
		t.Parallel()
		e := setup(t)
		e.createEndpoint(map[string]any{"consumer_id": "c1"})
		body := `{"consumer_id":"c1","event_type":"order.created","payload":{"n":1},"idempotency_key":"order-1"}`
		var first, second ingestOut
		e.do("POST", "/v1/events", body).must(http.StatusAccepted, &first)
		e.clock.Advance(time.Second)
		e.do("POST", "/v1/events", `{"consumer_id":"c1","event_type":"order.created","payload":{"n":2},"idempotency_key":"order-1"}`).
			must(http.StatusOK, &second)
		require.True(t, second.Duplicate)
		require.Equal(t, first.ID, second.ID)

		var events listOut[eventOut]
		e.do("GET", "/v1/events?consumer_id=c1", nil).must(http.StatusOK, &events)
		require.Len(t, events.Data, 1, "a duplicate creates nothing")
		require.Equal(t, `{"n":1}`, string(events.Data[0].Payload))
		var dl listOut[deliveryOut]
		e.do("GET", "/v1/deliveries?consumer_id=c1", nil).must(http.StatusOK, &dl)
		require.Len(t, dl.Data, 1)

		// The same key for another consumer is another event.
		var other ingestOut
		e.do("POST", "/v1/events", `{"consumer_id":"c2","event_type":"order.created","payload":{},"idempotency_key":"order-1"}`).
			must(http.StatusAccepted, &other)
		require.NotEqual(t, first.ID, other.ID)
	})

	t.Run("DuplicateKeyInHeader", func(t *testing.T) {
		t.Parallel()
		e := setup(t)
		var first, second, third ingestOut
		e.do("POST", "/v1/events", `{"event_type":"a","payload":1}`, "Idempotency-Key", "k-1").must(http.StatusAccepted, &first)
		e.do("POST", "/v1/events", `{"event_type":"a","payload":2}`, "Idempotency-Key", "k-1").must(http.StatusOK, &second)
		require.True(t, second.Duplicate)
		require.Equal(t, first.ID, second.ID)
		// Header and body name the same key.
		e.do("POST", "/v1/events", `{"event_type":"a","payload":3,"idempotency_key":"k-1"}`).must(http.StatusOK, &third)
		require.Equal(t, first.ID, third.ID)
		var ev eventOut
		e.do("GET", "/v1/events/"+first.ID, nil).must(http.StatusOK, &ev)
		require.Equal(t, "k-1", ev.IdempotencyKey)

		msg := e.do("POST", "/v1/events", `{"event_type":"a","payload":1,"idempotency_key":"k-2"}`, "Idempotency-Key", "k-3").
			apiErr(http.StatusBadRequest, "invalid_idempotency_key")
		require.Contains(t, msg, "differ")
	})

	t.Run("Invalid", func(t *testing.T) {
		t.Parallel()
		e := setup(t)
		for _, tc := range []struct {
			name, body, code, message string
		}{
			{"EventTypeChars", `{"event_type":"order created","payload":{}}`, "invalid_event_type", "event_type must match [a-zA-Z0-9_.-]{1,128}"},
			{"EventTypeLong", `{"event_type":"` + strings.Repeat("a", 129) + `","payload":{}}`, "invalid_event_type", "event_type must match [a-zA-Z0-9_.-]{1,128}"},
			{"EventTypeEmpty", `{"event_type":"","payload":{}}`, "invalid_event_type", "event_type must match [a-zA-Z0-9_.-]{1,128}"},
			{"EventTypeMissing", `{"payload":{}}`, "invalid_event_type", "event_type is required and must match [a-zA-Z0-9_.-]{1,128}"},
			{"EventTypeReservedForNotifications", `{"event_type":"herald.endpoint.disabled","payload":{}}`, "invalid_event_type", `event_type must not start with "herald.": those types are reserved for Herald's own notifications`},
			{"PayloadMissing", `{"event_type":"a"}`, "invalid_payload", "payload is required: any JSON value"},
			{"PayloadMalformed", `{"event_type":"a","payload":{"a":}}`, "invalid_json", ""},
			{"PayloadNotJSON", `{"event_type":"a","payload":undefined}`, "invalid_json", ""},
			{"ConsumerEmpty", `{"consumer_id":"","event_type":"a","payload":1}`, "invalid_consumer_id", ""},
			{"ConsumerNotString", `{"consumer_id":42,"event_type":"a","payload":1}`, "invalid_type", "consumer_id must be a string, not a JSON number"},
			{"KeyEmpty", `{"event_type":"a","payload":1,"idempotency_key":""}`, "invalid_idempotency_key", ""},
			{"KeyLong", `{"event_type":"a","payload":1,"idempotency_key":"` + strings.Repeat("k", 257) + `"}`, "invalid_idempotency_key", ""},
			{"UnknownField", `{"event_type":"a","payload":1,"type":"a"}`, "unknown_field", `unknown field "type"`},
			{"NotObject", `"event"`, "invalid_json", ""},
			{"Empty", ``, "invalid_json", ""},
		} {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				msg := e.do("POST", "/v1/events", tc.body).apiErr(http.StatusBadRequest, tc.code)
				if tc.message != "" {
					require.Equal(t, tc.message, msg)
				}
			})
		}
		var events listOut[eventOut]
		e.do("GET", "/v1/events", nil).must(http.StatusOK, &events)
		require.Empty(t, events.Data, "bad input never reaches the queue")
	})

	t.Run("PayloadTooLarge", func(t *testing.T) {
		t.Parallel()
		e := setup(t, func(o *options) { o.maxPayload = 1024 })
		fits := `"` + strings.Repeat("x", 1022) + `"`
		e.do("POST", "/v1/events", `{"event_type":"a","payload":`+fits+`}`).must(http.StatusAccepted, nil)

		over := `"` + strings.Repeat("x", 1023) + `"`
		msg := e.do("POST", "/v1/events", `{"event_type":"a","payload":`+over+`}`).apiErr(http.StatusRequestEntityTooLarge, "payload_too_large")
		require.Equal(t, "payload is 1025 bytes; at most 1024 are accepted", msg)

		huge := `"` + strings.Repeat("x", 1<<20) + `"`
		e.do("POST", "/v1/events", `{"event_type":"a","payload":`+huge+`}`).apiErr(http.StatusRequestEntityTooLarge, "payload_too_large")

		var events listOut[eventOut]
		e.do("GET", "/v1/events", nil).must(http.StatusOK, &events)
		require.Len(t, events.Data, 1)
	})
}

// TestPayloadBytesRoundTrip: the payload comes back from GET, from the
// list and from the store as the exact bytes sent (invariant 5).
func TestPayloadBytesRoundTrip(t *testing.T) {
	t.Parallel()
	e := setup(t)
	for _, tc := range []struct{ name, payload string }{
		{"KeyOrderAndSpacing", `{ "z": 1,  "a": [1, 2 ,3], "m": {"b":{"c": null}} }`},
		{"Unicode", `{"u":"ünïcødé ✓ 😀","esc":"\u00e9\n\"\\","html":"<a href='x'>&amp;</a>"}`},
		{"BigNumbers", `{"big": 123456789012345678901234567890, "f": 1.0, "e": 1E400, "neg": -0.000000000000000000001}`},
		{"NewlinesAndTabs", "{\n\t\"a\" :\t1,\r\n\t\"b\" : [ ]\n}"},
		{"String", `"just a string"`},
		{"Number", `18446744073709551616.00000000000000000001`},
		{"Array", `[ {"b":2,"a":1} , 3 ]`},
		{"Null", `null`},
		{"Bool", `true`},
		{"DuplicateKeys", `{"a":1,"a":2}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			// Whitespace around the payload is not part of it.
			body := "{\"event_type\":\"round.trip\",\n \"payload\" :  " + tc.payload + "  \n,\"consumer_id\":\"" + tc.name + "\"}"
			var out ingestOut
			e.do("POST", "/v1/events", body).must(http.StatusAccepted, &out)

			r := e.do("GET", "/v1/events/"+out.ID, nil)
			require.Equal(t, http.StatusOK, r.status)
			require.True(t, json.Valid(r.body), "the answer is valid JSON: %s", r.body)
			var got eventOut
			require.NoError(t, json.Unmarshal(r.body, &got))
			require.Equal(t, tc.payload, string(got.Payload), "GET /v1/events/{id}")
			require.Equal(t, "round.trip", got.EventType)
			require.NotNil(t, got.Deliveries)

			var list listOut[eventOut]
			e.do("GET", "/v1/events?consumer_id="+tc.name, nil).must(http.StatusOK, &list)
			require.Len(t, list.Data, 1)
			require.Equal(t, tc.payload, string(list.Data[0].Payload), "GET /v1/events")

			stored, err := e.store.EventGet(t.Context(), out.ID)
			require.NoError(t, err)
			require.Equal(t, tc.payload, string(stored.Payload), "the store")
		})
	}
}

func TestEventBatch(t *testing.T) {
	t.Parallel()

	t.Run("OneResultPerEventInOrder", func(t *testing.T) {
		t.Parallel()
		e := setup(t)
		ep := e.createEndpoint(map[string]any{"consumer_id": "c1"})
		body := `{"events":[
			{"consumer_id":"c1","event_type":"a.one","payload":{"i": 0},"idempotency_key":"k0"},
			{"consumer_id":"c1","event_type":"a.two","payload":[1,  2]},
			{"consumer_id":"c1","event_type":"a.three","payload":"x","idempotency_key":"k0"},
			{"consumer_id":"c2","event_type":"a.four","payload":null}
		]}`
		var out listOut[ingestOut]
		e.do("POST", "/v1/events/batch", body).must(http.StatusAccepted, &out)
		require.Len(t, out.Data, 4)
		require.False(t, out.Data[0].Duplicate)
		require.Len(t, out.Data[0].Deliveries, 1)
		require.Equal(t, ep.ID, out.Data[0].Deliveries[0].EndpointID)
		require.True(t, out.Data[2].Duplicate, "the key was used earlier in the batch")
		require.Equal(t, out.Data[0].ID, out.Data[2].ID)
		require.Empty(t, out.Data[3].Deliveries)

		for i, want := range []struct{ typ, payload string }{{"a.one", `{"i": 0}`}, {"a.two", `[1,  2]`}, {"a.four", `null`}} {
			id := out.Data[[]int{0, 1, 3}[i]].ID
			var ev eventOut
			e.do("GET", "/v1/events/"+id, nil).must(http.StatusOK, &ev)
			require.Equal(t, want.typ, ev.EventType)
			require.Equal(t, want.payload, string(ev.Payload))
		}
	})

	t.Run("OneInvalidEventRejectsTheBatch", func(t *testing.T) {
		t.Parallel()
		e := setup(t, func(o *options) { o.maxPayload = 64 })
		e.createEndpoint(map[string]any{})
		ok := `{"event_type":"fine","payload":{}}`
		batch := func(bad string, at int) string {
			events := []string{ok, ok, ok, ok, ok}
			events[at] = bad
			return `{"events":[` + strings.Join(events, ",") + `]}`
		}
		for _, tc := range []struct {
			name, bad string
			at        int
			status    int
			code, msg string
		}{
			{"EventType", `{"event_type":"not valid","payload":{}}`, 3, http.StatusBadRequest, "invalid_event_type",
				"events[3].event_type must match [a-zA-Z0-9_.-]{1,128}"},
			{"MissingPayload", `{"event_type":"a"}`, 0, http.StatusBadRequest, "invalid_payload", "events[0].payload is required: any JSON value"},
			{"UnknownField", `{"event_type":"a","payload":1,"extra":1}`, 1, http.StatusBadRequest, "unknown_field", `events[1]: unknown field "extra"`},
			{"WrongType", `{"event_type":7,"payload":1}`, 4, http.StatusBadRequest, "invalid_type", "events[4].event_type must be a string, not a JSON number"},
			{"NotObject", `[1]`, 2, http.StatusBadRequest, "invalid_json", "events[2] must be a JSON object"},
			{"TooLarge", `{"event_type":"a","payload":"` + strings.Repeat("x", 70) + `"}`, 2, http.StatusRequestEntityTooLarge, "payload_too_large",
				"events[2].payload is 72 bytes; at most 64 are accepted"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				msg := e.do("POST", "/v1/events/batch", batch(tc.bad, tc.at)).apiErr(tc.status, tc.code)
				require.Equal(t, tc.msg, msg)
			})
		}
		var events listOut[eventOut]
		e.do("GET", "/v1/events", nil).must(http.StatusOK, &events)
		require.Empty(t, events.Data, "a rejected batch stores nothing")
		var dl listOut[deliveryOut]
		e.do("GET", "/v1/deliveries", nil).must(http.StatusOK, &dl)
		require.Empty(t, dl.Data)
	})

	t.Run("Size", func(t *testing.T) {
		t.Parallel()
		e := setup(t)
		e.do("POST", "/v1/events/batch", `{"events":[]}`).apiErr(http.StatusBadRequest, "invalid_events")
		e.do("POST", "/v1/events/batch", `{}`).apiErr(http.StatusBadRequest, "invalid_events")
		e.do("POST", "/v1/events/batch", `{"events":null}`).apiErr(http.StatusBadRequest, "invalid_events")
		e.do("POST", "/v1/events/batch", `{"events":{}}`).apiErr(http.StatusBadRequest, "invalid_type")
		many := `{"events":[` + strings.TrimSuffix(strings.Repeat(`{"event_type":"a","payload":1},`, 1001), ",") + `]}`
		msg := e.do("POST", "/v1/events/batch", many).apiErr(http.StatusBadRequest, "invalid_events")
		require.Contains(t, msg, "1 to 1000")

		full := `{"events":[` + strings.TrimSuffix(strings.Repeat(`{"event_type":"a","payload":1},`, 1000), ",") + `]}`
		var out listOut[ingestOut]
		e.do("POST", "/v1/events/batch", full).must(http.StatusAccepted, &out)
		require.Len(t, out.Data, 1000)

		// Lists give 50 by default and at most 1000 a page.
		var page listOut[eventOut]
		e.do("GET", "/v1/events", nil).must(http.StatusOK, &page)
		require.Len(t, page.Data, 50)
		require.NotEmpty(t, page.NextCursor)
		e.do("GET", "/v1/events?limit=1000", nil).must(http.StatusOK, &page)
		require.Len(t, page.Data, 1000)
		require.Empty(t, page.NextCursor)
	})

	t.Run("HeaderKeyRefused", func(t *testing.T) {
		t.Parallel()
		e := setup(t)
		e.do("POST", "/v1/events/batch", `{"events":[{"event_type":"a","payload":1}]}`, "Idempotency-Key", "k").
			apiErr(http.StatusBadRequest, "invalid_idempotency_key")
	})
}

func TestEventList(t *testing.T) {
	t.Parallel()
	e := setup(t)
	var ids []string
	for i := range 5 {
		typ := "order.created"
		if i%2 == 1 {
			typ = "order.paid"
		}
		ids = append(ids, e.send("c1", typ, fmt.Sprintf(`{"i":%d}`, i)).ID)
		e.clock.Advance(time.Minute)
	}
	e.send("c2", "order.created", `{}`)

	t.Run("Filters", func(t *testing.T) {
		t.Parallel()
		var page listOut[eventOut]
		e.do("GET", "/v1/events?consumer_id=c1&event_type=order.paid", nil).must(http.StatusOK, &page)
		require.Len(t, page.Data, 2)
		require.Equal(t, []string{ids[3], ids[1]}, []string{page.Data[0].ID, page.Data[1].ID})

		e.do("GET", "/v1/events?consumer_id=c1&since=2024-05-01T12:01:00Z&until=2024-05-01T12:03:00Z", nil).must(http.StatusOK, &page)
		require.Len(t, page.Data, 2)
		require.Equal(t, []string{ids[2], ids[1]}, []string{page.Data[0].ID, page.Data[1].ID})
		require.Equal(t, start.Add(2*time.Minute), page.Data[0].CreatedAt)

		// All four together; since is inclusive, until exclusive.
		e.do("GET", "/v1/events?consumer_id=c1&event_type=order.created&since=2024-05-01T12:02:00Z&until=2024-05-01T12:04:00Z", nil).must(http.StatusOK, &page)
		require.Len(t, page.Data, 1)
		require.Equal(t, ids[2], page.Data[0].ID)
		e.do("GET", "/v1/events?event_type=order.created&since=2024-05-01T12:02:00Z", nil).must(http.StatusOK, &page)
		require.Len(t, page.Data, 3, "both consumers")
		e.do("GET", "/v1/events?consumer_id=c1&until=2024-05-01T12:01:00Z", nil).must(http.StatusOK, &page)
		require.Len(t, page.Data, 1)
		require.Equal(t, ids[0], page.Data[0].ID)
	})

	t.Run("Pages", func(t *testing.T) {
		t.Parallel()
		var got []string
		cursor := ""
		for range 10 {
			var page listOut[eventOut]
			e.do("GET", "/v1/events?consumer_id=c1&limit=2&cursor="+cursor, nil).must(http.StatusOK, &page)
			for _, ev := range page.Data {
				got = append(got, ev.ID)
			}
			if cursor = page.NextCursor; cursor == "" {
				break
			}
		}
		require.Equal(t, []string{ids[4], ids[3], ids[2], ids[1], ids[0]}, got)
	})

	t.Run("Invalid", func(t *testing.T) {
		t.Parallel()
		e.do("GET", "/v1/events?since=now", nil).apiErr(http.StatusBadRequest, "invalid_since")
		e.do("GET", "/v1/events?until=1714564800", nil).apiErr(http.StatusBadRequest, "invalid_until")
		e.do("GET", "/v1/events?event_type=a%20b", nil).apiErr(http.StatusBadRequest, "invalid_event_type")
		e.do("GET", "/v1/events?type=a", nil).apiErr(http.StatusBadRequest, "unknown_parameter")
		e.do("GET", "/v1/events?limit=-1", nil).apiErr(http.StatusBadRequest, "invalid_limit")
		e.do("GET", "/v1/events/evt_missing", nil).apiErr(http.StatusNotFound, "not_found")
	})
}

func TestEventReplay(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.createEndpoint(map[string]any{"consumer_id": "c1"})
	e.createEndpoint(map[string]any{"consumer_id": "c1"})
	ev := e.send("c1", "a", `{}`)
	require.Len(t, ev.Deliveries, 2)
	path := "/v1/events/" + ev.ID + "/replay"

	var out replayedOut
	e.do("POST", path, nil).must(http.StatusOK, &out)
	require.Equal(t, replayedOut{Replayed: 0}, out, "live deliveries are not replayed")

	for _, d := range ev.Deliveries {
		e.do("POST", "/v1/deliveries/"+d.ID+"/cancel", nil).must(http.StatusOK, nil)
	}
	e.do("POST", path, `{"status":"dead"}`).must(http.StatusOK, &out)
	require.Equal(t, replayedOut{Replayed: 0}, out)
	e.do("POST", path, `{"status":"cancelled"}`).must(http.StatusOK, &out)
	require.Equal(t, replayedOut{Replayed: 2}, out)

	var got eventOut
	e.do("GET", "/v1/events/"+ev.ID, nil).must(http.StatusOK, &got)
	require.Len(t, got.Deliveries, 2)
	for _, d := range got.Deliveries {
		require.Equal(t, "pending", d.Status)
		require.Equal(t, ev.ID, d.EventID)
	}

	e.do("POST", path, `{"status":"pending"}`).apiErr(http.StatusBadRequest, "invalid_status")
	e.do("POST", "/v1/events/evt_missing/replay", nil).apiErr(http.StatusNotFound, "not_found")
}
