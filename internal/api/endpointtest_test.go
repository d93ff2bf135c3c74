package api_test

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestEndpointTest: POST /v1/endpoints/{id}/test writes a herald.test event
// with one delivery, to that endpoint only, whatever its filter; the
// consumer's own key may test its endpoint, another consumer's key finds
// nothing, and a disabled endpoint is a 409.
func TestEndpointTest(t *testing.T) {
	t.Parallel()
	e := setup(t)
	target := e.createEndpoint(map[string]any{"consumer_id": "c1", "url": "https://a.example.com/hooks", "event_types": []string{"order.*"}})
	e.createEndpoint(map[string]any{"consumer_id": "c1", "url": "https://b.example.com/hooks"})
	e.createEndpoint(map[string]any{"consumer_id": "c1", "url": "https://c.example.com/hooks", "event_types": []string{"herald.*"}})
	path := "/v1/endpoints/" + target.ID + "/test"

	var res ingestOut
	e.do("POST", path, nil).must(http.StatusAccepted, &res)
	require.False(t, res.Duplicate)
	require.Len(t, res.Deliveries, 1, "to the endpoint tested only")
	require.Equal(t, target.ID, res.Deliveries[0].EndpointID)

	var ev eventOut
	e.do("GET", "/v1/events/"+res.ID, nil).must(http.StatusOK, &ev)
	require.Equal(t, "herald.test", ev.EventType)
	require.Equal(t, "c1", ev.ConsumerID)
	var payload map[string]string
	require.NoError(t, json.Unmarshal(ev.Payload, &payload))
	require.Equal(t, target.ID, payload["endpoint_id"])
	require.Equal(t, "c1", payload["consumer_id"])
	require.Contains(t, payload["message"], "test event")
	require.Len(t, ev.Deliveries, 1)

	own := e.createKey("consumer", "c1")
	e.doKey(own.Key, "POST", path, `{}`).must(http.StatusAccepted, &res)
	require.Len(t, res.Deliveries, 1)
	other := e.createKey("consumer", "c2")
	e.doKey(other.Key, "POST", path, nil).apiErr(http.StatusNotFound, "not_found")

	e.do("POST", path, `{"payload":{}}`).apiErr(http.StatusBadRequest, "unknown_field")
	e.do("POST", "/v1/endpoints/ep_missing/test", nil).apiErr(http.StatusNotFound, "not_found")
	e.do("POST", "/v1/endpoints/"+target.ID+"/disable", nil).must(http.StatusOK, nil)
	msg := e.do("POST", path, nil).apiErr(http.StatusConflict, "conflict")
	require.Contains(t, msg, "disabled")
}

// TestEndpointTestLimit: a consumer may send 10 test events a minute
// across all its endpoints and all nodes (counted in the database): the
// eleventh, to another endpoint through another node, is a 429 with
// Retry-After; another consumer has its own count, an operator is not
// limited, and once the minute has passed 10 more go. On both backends.
func TestEndpointTestLimit(t *testing.T) {
	t.Parallel()
	for _, backend := range []struct {
		name string
		opts []func(*options)
	}{{"SQLite", nil}, {"PostgreSQL", []func(*options){onPostgres}}} {
		t.Run(backend.name, func(t *testing.T) {
			t.Parallel()
			e := setup(t, backend.opts...)
			other := e.node()
			a := e.createEndpoint(map[string]any{"consumer_id": "c1", "url": "https://a.example.com/hooks"})
			b := e.createEndpoint(map[string]any{"consumer_id": "c1", "url": "https://b.example.com/hooks"})
			c := e.createEndpoint(map[string]any{"consumer_id": "c2", "url": "https://c.example.com/hooks"})
			own, theirs := e.createKey("consumer", "c1"), e.createKey("consumer", "c2")
			pathA, pathB, pathC := "/v1/endpoints/"+a.ID+"/test", "/v1/endpoints/"+b.ID+"/test", "/v1/endpoints/"+c.ID+"/test"
			for range 5 {
				e.doKey(own.Key, "POST", pathA, nil).must(http.StatusAccepted, nil)
				other.doKey(own.Key, "POST", pathB, nil).must(http.StatusAccepted, nil)
			}
			e.clock.Advance(20 * time.Second)
			for _, node := range []*env{e, other} {
				for _, path := range []string{pathA, pathB} {
					r := node.doKey(own.Key, "POST", path, nil)
					msg := r.apiErr(http.StatusTooManyRequests, "rate_limited")
					require.Contains(t, msg, "10 test events a minute across a consumer's endpoints")
					require.Equal(t, "40", r.header.Get("Retry-After"), "the first ones leave the window 40 s from now")
				}
			}
			other.doKey(theirs.Key, "POST", pathC, nil).must(http.StatusAccepted, nil)
			e.do("POST", pathA, nil).must(http.StatusAccepted, nil)

			e.clock.Advance(40 * time.Second)
			for range 10 {
				other.doKey(own.Key, "POST", pathB, nil).must(http.StatusAccepted, nil)
			}
			e.doKey(own.Key, "POST", pathA, nil).apiErr(http.StatusTooManyRequests, "rate_limited")
		})
	}
}
