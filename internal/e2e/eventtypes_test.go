package e2e

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestEventTypeCatalog: through the whole app, a type's schema in the
// catalog holds ingest to it (a payload that breaks it is refused and
// never delivered, one that matches is delivered as sent), on the node
// that took the write at once and, on PostgreSQL, on a second node within
// its refresh.
func TestEventTypeCatalog(t *testing.T) {
	t.Parallel()
	backends(t, func(t *testing.T, db string) {
		e := setup(t, db)
		var other *env
		if strings.HasPrefix(db, "postgres") {
			other = setup(t, db, func(o *options) { o.noDispatch = true })
		}
		rc := newReceiver(t, e.clock, nil)
		e.createEndpoint(map[string]any{"consumer_id": "cust_a", "url": rc.URL, "event_types": []string{"order.*"}})
		bad := []byte(`{"consumer_id":"cust_a","event_type":"order.created","payload":{"order_id":7}}`)
		if other != nil {
			// The other node has read the catalog, empty, before the write.
			other.must(http.StatusAccepted, "POST", "/v1/events", []byte(`{"consumer_id":"cust_a","event_type":"order.created","payload":{"order_id":"o_0"}}`), nil)
		}

		e.must(http.StatusCreated, "POST", "/v1/event-types", []byte(`{"name":"order.created",
			"schema":{"type":"object","required":["order_id"],"properties":{"order_id":{"type":"string"}}},
			"example":{"order_id":"o_1"}}`), nil)
		var refused struct {
			Error struct {
				Code    string `json:"code"`
				Message string `json:"message"`
			} `json:"error"`
		}
		e.must(http.StatusBadRequest, "POST", "/v1/events", bad, &refused)
		require.Equal(t, "invalid_payload", refused.Error.Code)
		require.Contains(t, refused.Error.Message, "at /order_id")
		e.send("cust_a", "order.created", `{"order_id":"o_1"}`)

		if other != nil {
			other.must(http.StatusAccepted, "POST", "/v1/events", bad, nil)
			other.clock.Advance(time.Second)
			other.must(http.StatusBadRequest, "POST", "/v1/events", bad, nil)
		}

		want := 1
		if other != nil {
			want = 3 // o_0 and the bad one the other node accepted before it knew
		}
		rc.waitHits(t, want)
		e.settle()
		require.Equal(t, want, rc.count(), "a refused event is never delivered")
		var bodies []string
		for _, h := range rc.all() {
			bodies = append(bodies, string(h.Body))
		}
		require.Contains(t, bodies, `{"order_id":"o_1"}`)
	})
}
