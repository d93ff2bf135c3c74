package api_test

import (
	"crypto/sha256"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhooks/herald"
	"github.com/heraldhooks/herald/internal/api"
	"github.com/heraldhooks/herald/internal/clock"
	"github.com/heraldhooks/herald/internal/store/pgstore"
	"github.com/heraldhooks/herald/internal/store/pgstore/pgtest"
)

// eventTypeOut is a catalog entry as answered.
type eventTypeOut struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Schema      json.RawMessage `json:"schema"`
	Example     json.RawMessage `json:"example"`
	BuiltIn     bool            `json:"built_in"`
	CreatedAt   *time.Time      `json:"created_at"`
	UpdatedAt   *time.Time      `json:"updated_at"`
}

const orderCreated = `{"name":"order.created","description":"An order was placed.",` +
	`"schema":{"type":"object","required":["order_id"],"properties":{"order_id":{"type":"string"},` +
	`"items":{"type":"array","items":{"type":"object","required":["sku"]}}}},"example":{"order_id":"o_1"}}`

func TestEventTypes(t *testing.T) {
	t.Parallel()

	t.Run("CreateGetAndTheBuiltIns", func(t *testing.T) {
		t.Parallel()
		e := setup(t)
		var got eventTypeOut
		e.do("POST", "/v1/event-types", orderCreated).must(http.StatusCreated, &got)
		require.Equal(t, "order.created", got.Name)
		require.Equal(t, "An order was placed.", got.Description)
		require.JSONEq(t, `{"order_id":"o_1"}`, string(got.Example))
		require.Contains(t, string(got.Schema), `"required":["order_id"]`)
		require.False(t, got.BuiltIn)
		require.Equal(t, start, *got.CreatedAt)

		var read eventTypeOut
		e.do("GET", "/v1/event-types/order.created", nil).must(http.StatusOK, &read)
		require.Equal(t, got, read)

		var bare eventTypeOut
		e.do("POST", "/v1/event-types", `{"name":"order.paid"}`).must(http.StatusCreated, &bare)
		require.Equal(t, "null", string(bare.Schema))
		require.Equal(t, "null", string(bare.Example))

		var dead eventTypeOut
		e.do("GET", "/v1/event-types/"+herald.NotifyDeliveryDead, nil).must(http.StatusOK, &dead)
		require.True(t, dead.BuiltIn)
		require.Nil(t, dead.CreatedAt)
		require.Contains(t, string(dead.Example), `"dead_reason":"exhausted"`)

		e.do("GET", "/v1/event-types/order.missing", nil).apiErr(http.StatusNotFound, "not_found")
		for _, odd := range []string{"%00", "%FF", "a%20b", strings.Repeat("a", herald.MaxEventTypeLen+1)} {
			e.do("GET", "/v1/event-types/"+odd, nil).apiErr(http.StatusNotFound, "not_found")
			e.do("PATCH", "/v1/event-types/"+odd, `{"description":"x"}`).apiErr(http.StatusNotFound, "not_found")
			e.do("DELETE", "/v1/event-types/"+odd, nil).apiErr(http.StatusNotFound, "not_found")
		}
		e.do("POST", "/v1/event-types", `{"name":"order.created"}`).apiErr(http.StatusConflict, "conflict")
	})

	t.Run("ListPagesInNameOrderWithTheBuiltIns", func(t *testing.T) {
		t.Parallel()
		e := setup(t)
		for _, n := range []string{"order.created", "a.first", "zeta", "invoice.paid", "herald_like"} {
			e.do("POST", "/v1/event-types", `{"name":"`+n+`"}`).must(http.StatusCreated, nil)
		}
		want := []string{"a.first"}
		for _, b := range herald.NotificationTypes() {
			want = append(want, b.Name)
		}
		want = append(want, "herald_like", "invoice.paid", "order.created", "zeta")
		for _, limit := range []int{1, 2, 3, 50} {
			var names []string
			cursor := ""
			for pages := 0; ; pages++ {
				require.Less(t, pages, 20)
				var page listOut[eventTypeOut]
				path := "/v1/event-types?limit=" + strconv.Itoa(limit)
				if cursor != "" {
					path += "&cursor=" + cursor
				}
				e.do("GET", path, nil).must(http.StatusOK, &page)
				require.LessOrEqual(t, len(page.Data), limit)
				for _, it := range page.Data {
					names = append(names, it.Name)
					require.Equal(t, strings.HasPrefix(it.Name, "herald."), it.BuiltIn, it.Name)
				}
				if page.NextCursor == "" {
					break
				}
				cursor = page.NextCursor
			}
			require.Equal(t, want, names, "limit %d", limit)
		}
	})

	t.Run("RefusesWhatIsNotAnEntry", func(t *testing.T) {
		t.Parallel()
		e := setup(t)
		var fetched atomic.Int64
		remote := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			fetched.Add(1)
			w.Write([]byte(`{"type":"string"}`))
		}))
		t.Cleanup(remote.Close)
		for _, c := range []struct{ body, code, says string }{
			{`{}`, "invalid_name", "required"},
			{`{"name":"bad name"}`, "invalid_name", "name"},
			{`{"name":"herald.endpoint.failing"}`, "invalid_name", "Herald's own"},
			{`{"name":"herald.mine"}`, "invalid_name", "Herald's own"},
			{`{"name":"."}`, "invalid_name", "other than"},
			{`{"name":".."}`, "invalid_name", "other than"},
			{`{"name":"a","description":"` + strings.Repeat("x", 1025) + `"}`, "invalid_description", "1024"},
			{`{"name":"a","schema":5}`, "invalid_schema", "object"},
			{`{"name":"a","schema":"{}"}`, "invalid_schema", "object"},
			{`{"name":"a","schema":{"type":"strung"}}`, "invalid_schema", "does not compile"},
			{`{"name":"a","schema":{"$ref":"` + remote.URL + `/s.json"}}`, "invalid_schema", "inside the schema"},
			{`{"name":"a","schema":{"properties":{"x":{"$ref":"http://169.254.169.254/latest"}}}}`, "invalid_schema", "inside the schema"},
			{`{"name":"a","schema":{"$ref":"file:///etc/passwd"}}`, "invalid_schema", "inside the schema"},
			{`{"name":"a","schema":{"type":"object","properties":{"n":{"type":"integer"}}},"example":{"n":"one"}}`, "invalid_example", "at /n: "},
			{`{"name":"a","bogus":1}`, "unknown_field", "bogus"},
		} {
			msg := e.do("POST", "/v1/event-types", c.body).apiErr(http.StatusBadRequest, c.code)
			require.Contains(t, msg, c.says, c.body)
		}
		require.Zero(t, fetched.Load(), "Herald fetched a schema from elsewhere")
		var page listOut[eventTypeOut]
		e.do("GET", "/v1/event-types", nil).must(http.StatusOK, &page)
		require.Len(t, page.Data, len(herald.NotificationTypes()), "nothing was added")
		// A boolean schema is a schema.
		e.do("POST", "/v1/event-types", `{"name":"anything","schema":true}`).must(http.StatusCreated, nil)
	})

	t.Run("Update", func(t *testing.T) {
		t.Parallel()
		e := setup(t)
		e.do("POST", "/v1/event-types", orderCreated).must(http.StatusCreated, nil)
		e.clock.Advance(time.Minute)
		var upd eventTypeOut
		e.do("PATCH", "/v1/event-types/order.created", `{"description":"Placed."}`).must(http.StatusOK, &upd)
		require.Equal(t, "Placed.", upd.Description)
		require.JSONEq(t, `{"order_id":"o_1"}`, string(upd.Example), "fields not given stay")
		require.Equal(t, start.Add(time.Minute), *upd.UpdatedAt)
		require.Equal(t, start, *upd.CreatedAt)

		msg := e.do("PATCH", "/v1/event-types/order.created", `{"schema":{"type":"object","required":["total"]}}`).
			apiErr(http.StatusBadRequest, "invalid_example")
		require.Contains(t, msg, "total", "the example kept must match a new schema")
		e.do("PATCH", "/v1/event-types/order.created", `{"example":{"order_id":7}}`).apiErr(http.StatusBadRequest, "invalid_example")
		e.do("PATCH", "/v1/event-types/order.created", `{"name":"other"}`).apiErr(http.StatusBadRequest, "unknown_field")

		e.do("PATCH", "/v1/event-types/order.created", `{"schema":null,"description":null}`).must(http.StatusOK, &upd)
		require.Equal(t, "null", string(upd.Schema))
		require.Empty(t, upd.Description)
		require.JSONEq(t, `{"order_id":"o_1"}`, string(upd.Example))

		e.do("PATCH", "/v1/event-types/order.missing", `{"description":"x"}`).apiErr(http.StatusNotFound, "not_found")
		e.do("PATCH", "/v1/event-types/herald.delivery.dead", `{"description":"x"}`).apiErr(http.StatusBadRequest, "invalid_name")
		e.do("DELETE", "/v1/event-types/herald.delivery.dead", nil).apiErr(http.StatusBadRequest, "invalid_name")
	})

	t.Run("ConsumerKeysReadOnly", func(t *testing.T) {
		t.Parallel()
		e := setup(t)
		e.do("POST", "/v1/event-types", orderCreated).must(http.StatusCreated, nil)
		key := e.createKey("consumer", "cust_1")
		var page listOut[eventTypeOut]
		e.doKey(key.Key, "GET", "/v1/event-types", nil).must(http.StatusOK, &page)
		require.Len(t, page.Data, len(herald.NotificationTypes())+1)
		e.doKey(key.Key, "GET", "/v1/event-types/order.created", nil).must(http.StatusOK, nil)
		e.doKey(key.Key, "POST", "/v1/event-types", `{"name":"mine"}`).apiErr(http.StatusForbidden, "forbidden")
		e.doKey(key.Key, "PATCH", "/v1/event-types/order.created", `{"description":"x"}`).apiErr(http.StatusForbidden, "forbidden")
		e.doKey(key.Key, "DELETE", "/v1/event-types/order.created", nil).apiErr(http.StatusForbidden, "forbidden")
		var read eventTypeOut
		e.do("GET", "/v1/event-types/order.created", nil).must(http.StatusOK, &read)
		require.Equal(t, "An order was placed.", read.Description)
	})
}

func TestIngestChecksTheCatalogSchema(t *testing.T) {
	t.Parallel()

	t.Run("Single", func(t *testing.T) {
		t.Parallel()
		e := setup(t)
		e.createEndpoint(map[string]any{"consumer_id": "c1"})
		// Accepted unchecked before the type is in the catalog.
		e.do("POST", "/v1/events", `{"consumer_id":"c1","event_type":"order.created","payload":{"order_id":1}}`).must(http.StatusAccepted, nil)
		e.do("POST", "/v1/event-types", orderCreated).must(http.StatusCreated, nil)

		// From the very next event on this node (the write invalidated the cache).
		msg := e.do("POST", "/v1/events", `{"consumer_id":"c1","event_type":"order.created","payload":{"order_id":1}}`).
			apiErr(http.StatusBadRequest, "invalid_payload")
		require.Regexp(t, `^payload does not match event type order\.created: at /order_id: .*want string`, msg)
		msg = e.do("POST", "/v1/events", `{"consumer_id":"c1","event_type":"order.created","payload":{"order_id":"o","items":[{},{"sku":"a"}]}}`).
			apiErr(http.StatusBadRequest, "invalid_payload")
		require.Regexp(t, `at /items/0: .*sku`, msg)
		msg = e.do("POST", "/v1/events", `{"consumer_id":"c1","event_type":"order.created","payload":[]}`).
			apiErr(http.StatusBadRequest, "invalid_payload")
		require.Contains(t, msg, `at "" (the payload itself)`)

		var ok ingestOut
		e.do("POST", "/v1/events", `{"consumer_id":"c1","event_type":"order.created","payload":{ "order_id" : "o_2" }}`).must(http.StatusAccepted, &ok)
		require.Len(t, ok.Deliveries, 1)
		ev, err := e.store.EventGet(t.Context(), ok.ID)
		require.NoError(t, err)
		require.Equal(t, `{ "order_id" : "o_2" }`, string(ev.Payload), "a checked payload is still kept byte for byte")

		// Types without an entry, or whose entry has no schema, pass.
		e.do("POST", "/v1/events", `{"consumer_id":"c1","event_type":"order.other","payload":7}`).must(http.StatusAccepted, nil)
		e.do("PATCH", "/v1/event-types/order.created", `{"schema":null}`).must(http.StatusOK, nil)
		e.do("POST", "/v1/events", `{"consumer_id":"c1","event_type":"order.created","payload":7}`).must(http.StatusAccepted, nil)
		e.do("PATCH", "/v1/event-types/order.created", `{"schema":{"type":"integer"}}`).must(http.StatusBadRequest, nil)
		e.do("PATCH", "/v1/event-types/order.created", `{"schema":{"type":"integer"},"example":null}`).must(http.StatusOK, nil)
		e.do("POST", "/v1/events", `{"consumer_id":"c1","event_type":"order.created","payload":"7"}`).apiErr(http.StatusBadRequest, "invalid_payload")
		e.do("DELETE", "/v1/event-types/order.created", nil).must(http.StatusNoContent, nil)
		e.do("POST", "/v1/events", `{"consumer_id":"c1","event_type":"order.created","payload":"7"}`).must(http.StatusAccepted, nil)
	})

	t.Run("BatchNamesTheIndexAndWritesNothing", func(t *testing.T) {
		t.Parallel()
		e := setup(t)
		e.createEndpoint(map[string]any{"consumer_id": "c1"})
		e.do("POST", "/v1/event-types", orderCreated).must(http.StatusCreated, nil)
		msg := e.do("POST", "/v1/events/batch", `{"events":[`+
			`{"consumer_id":"c1","event_type":"order.created","payload":{"order_id":"o_1"}},`+
			`{"consumer_id":"c1","event_type":"order.paid","payload":{}},`+
			`{"consumer_id":"c1","event_type":"order.created","payload":{}}]}`).
			apiErr(http.StatusBadRequest, "invalid_payload")
		require.Regexp(t, `^events\[2\]\.payload does not match event type order\.created: at "" \(the payload itself\): .*order_id`, msg)
		var page listOut[json.RawMessage]
		e.do("GET", "/v1/events", nil).must(http.StatusOK, &page)
		require.Empty(t, page.Data, "the whole batch was refused")

		var ok struct {
			Data []ingestOut `json:"data"`
		}
		e.do("POST", "/v1/events/batch", `{"events":[`+
			`{"consumer_id":"c1","event_type":"order.created","payload":{"order_id":"o_1"}},`+
			`{"consumer_id":"c1","event_type":"order.paid","payload":{}}]}`).must(http.StatusAccepted, &ok)
		require.Len(t, ok.Data, 2)
	})
}

// TestCatalogReachesEveryNode: two API servers share one PostgreSQL, each
// with its own cache of compiled schemas. A schema written through one is
// enforced by the other once its refresh has passed (and not before: the
// bound is the refresh), and at once by the one that took the write.
func TestCatalogReachesEveryNode(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	doc, err := parseSpec()
	require.NoError(t, err)
	clk := clock.NewTest(start)
	node := func() *env {
		st, err := pgstore.Open(t.Context(), url, nil)
		require.NoError(t, err)
		t.Cleanup(func() { st.Close() })
		require.NoError(t, st.Migrate(t.Context()))
		srv := httptest.NewServer(api.New(api.Config{
			Store: st, Clock: clk, APIKeyHash: sha256.Sum256([]byte(testKey)), CatalogRefresh: 2 * time.Second,
		}))
		t.Cleanup(srv.Close)
		return &env{t: t, url: srv.URL, store: st, clock: clk, spec: doc}
	}
	a, b := node(), node()
	bad := `{"consumer_id":"c1","event_type":"order.created","payload":{"order_id":1}}`

	// b has read the catalog (empty) before a writes to it.
	b.do("POST", "/v1/events", bad).must(http.StatusAccepted, nil)
	a.do("POST", "/v1/event-types", orderCreated).must(http.StatusCreated, nil)
	a.do("POST", "/v1/events", bad).apiErr(http.StatusBadRequest, "invalid_payload")
	clk.Advance(2*time.Second - time.Millisecond)
	b.do("POST", "/v1/events", bad).must(http.StatusAccepted, nil)
	clk.Advance(time.Millisecond)
	msg := b.do("POST", "/v1/events", bad).apiErr(http.StatusBadRequest, "invalid_payload")
	require.Contains(t, msg, "at /order_id")
	a.do("POST", "/v1/events", bad).apiErr(http.StatusBadRequest, "invalid_payload")

	// A change and a removal travel the same way.
	b.do("PATCH", "/v1/event-types/order.created", `{"schema":{"type":"object"},"example":null}`).must(http.StatusOK, nil)
	b.do("POST", "/v1/events", bad).must(http.StatusAccepted, nil)
	a.do("POST", "/v1/events", bad).apiErr(http.StatusBadRequest, "invalid_payload")
	clk.Advance(2 * time.Second)
	a.do("POST", "/v1/events", bad).must(http.StatusAccepted, nil)

	a.do("PATCH", "/v1/event-types/order.created", `{"schema":{"type":"array"}}`).must(http.StatusOK, nil)
	clk.Advance(2 * time.Second)
	b.do("POST", "/v1/events", bad).apiErr(http.StatusBadRequest, "invalid_payload")
	a.do("DELETE", "/v1/event-types/order.created", nil).must(http.StatusNoContent, nil)
	clk.Advance(2 * time.Second)
	b.do("POST", "/v1/events", bad).must(http.StatusAccepted, nil)

	// A name no type can have never reaches PostgreSQL, which refuses a
	// NUL byte or invalid UTF-8 in text.
	for _, odd := range []string{"%00", "%FF"} {
		a.do("GET", "/v1/event-types/"+odd, nil).apiErr(http.StatusNotFound, "not_found")
		a.do("DELETE", "/v1/event-types/"+odd, nil).apiErr(http.StatusNotFound, "not_found")
	}
}
