package api_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/heraldhooks/herald"
	"github.com/heraldhooks/herald/internal/store"
)

// TestTextNoColumnHoldsNeverReachesTheStore: an id in a path, or a query
// value, with a NUL byte or invalid UTF-8 (which PostgreSQL refuses in
// text) is answered before the store sees it, on both backends: the id
// names nothing (404, as one that does not exist) and the query value is
// a bad request (400), for an operator key and a consumer key alike. Before,
// PostgreSQL's refusal was a 500 and an error in the log, which any key
// (and a consumer's portal page, by its address) could provoke.
func TestTextNoColumnHoldsNeverReachesTheStore(t *testing.T) {
	t.Parallel()
	for name, opts := range map[string][]func(*options){"SQLite": nil, "PostgreSQL": {onPostgres}} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := setup(t, opts...)
			var key struct {
				Key string `json:"key"`
			}
			e.do("POST", "/v1/api-keys", `{"name":"c1","scope":"consumer","consumer_id":"c1"}`).must(http.StatusCreated, &key)
			for _, k := range []string{testKey, key.Key} {
				for _, odd := range []string{"%00", "ep_%00", "%FF", "dlv_%C3"} {
					for _, c := range []struct{ method, path string }{
						{"GET", "/v1/endpoints/" + odd},
						{"PATCH", "/v1/endpoints/" + odd},
						{"POST", "/v1/endpoints/" + odd + "/test"},
						{"GET", "/v1/events/" + odd},
						{"GET", "/v1/deliveries/" + odd},
						{"GET", "/v1/deliveries/" + odd + "/attempts"},
						{"POST", "/v1/deliveries/" + odd + "/replay"},
					} {
						var body any
						if c.method != "GET" {
							body = `{}`
						}
						e.doKey(k, c.method, c.path, body).apiErr(http.StatusNotFound, "not_found")
					}
					for _, q := range []string{"event_type", "endpoint_id", "event_id", "cursor"} {
						e.doKey(k, "GET", "/v1/deliveries?"+q+"="+odd, nil).apiErr(http.StatusBadRequest, "invalid_parameter")
					}
					e.doKey(k, "GET", "/v1/endpoints?cursor="+odd, nil).apiErr(http.StatusBadRequest, "invalid_parameter")
					e.doKey(k, "GET", "/v1/events?event_type="+odd, nil).apiErr(http.StatusBadRequest, "invalid_parameter")
				}
			}
		})
	}
}

// TestDescriptionsWithoutControlCharacters: a description that would
// drive a terminal or rewrite a page around it (an escape sequence, a
// C1 control, a bidirectional override, a line separator) is refused
// with 400 for endpoints and event types, and so is such a disable
// reason; tabs and line breaks (CRLF too) are text and kept.
func TestDescriptionsWithoutControlCharacters(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ep := e.createEndpoint(map[string]any{"consumer_id": "c1", "description": "orders"})
	for _, bad := range []string{`\u001b[31mred\u001b[0m`, `\u001b]0;title\u0007`, `c1\u009b31m`, `abc\u202edcba`, `a\u2028b`, `bell\u0007`} {
		e.do("POST", "/v1/endpoints", `{"consumer_id":"c1","url":"https://example.com/hooks","description":"`+bad+`"}`).
			apiErr(http.StatusBadRequest, "invalid_description")
		e.do("PATCH", "/v1/endpoints/"+ep.ID, `{"description":"`+bad+`"}`).apiErr(http.StatusBadRequest, "invalid_description")
		e.do("POST", "/v1/event-types", `{"name":"order.created","description":"`+bad+`"}`).apiErr(http.StatusBadRequest, "invalid_description")
	}
	var got endpointOut
	e.do("PATCH", "/v1/endpoints/"+ep.ID, `{"description":"orders\tshipped\r\nand returned"}`).must(http.StatusOK, &got)
	require.Equal(t, "orders\tshipped\r\nand returned", got.Description)
	e.do("POST", "/v1/endpoints/"+ep.ID+"/disable", `{"reason":"moved \u202eotherwise"}`).apiErr(http.StatusBadRequest, "invalid_reason")
	e.do("POST", "/v1/event-types", `{"name":"order.created","description":"line one\nline two"}`).must(http.StatusCreated, nil)
}

// TestEndpointDescriptionWithoutNUL: a description holding a NUL byte (JSON
// "\u0000", or a portal form's %00) is refused with 400 on both backends;
// PostgreSQL, which holds no NUL in text, answered it with a 500 before.
func TestEndpointDescriptionWithoutNUL(t *testing.T) {
	t.Parallel()
	for name, opts := range map[string][]func(*options){"SQLite": nil, "PostgreSQL": {onPostgres}} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := setup(t, opts...)
			ep := e.createEndpoint(map[string]any{"consumer_id": "c1", "description": "orders"})
			e.do("POST", "/v1/endpoints", `{"consumer_id":"c1","url":"https://example.com/hooks","description":"a\u0000b"}`).
				apiErr(http.StatusBadRequest, "invalid_description")
			e.do("PATCH", "/v1/endpoints/"+ep.ID, `{"description":"a\u0000b"}`).apiErr(http.StatusBadRequest, "invalid_description")
			var got endpointOut
			e.do("GET", "/v1/endpoints/"+ep.ID, nil).must(http.StatusOK, &got)
			require.Equal(t, "orders", got.Description)
		})
	}
}

// TestAnOldDescriptionDoesNotLockItsEventType: a description kept from
// before control characters were refused is checked only when sent
// again: the event type's example can still be changed, and the
// description replaced.
func TestAnOldDescriptionDoesNotLockItsEventType(t *testing.T) {
	t.Parallel()
	e := setup(t)
	_, err := e.store.EventTypeCreate(t.Context(), &store.EventTypeCreateParams{
		Entry: &herald.EventTypeEntry{Name: "order.created", Description: "old\x1b[31m red"}, Now: e.clock.Now()})
	require.NoError(t, err)
	e.do("PATCH", "/v1/event-types/order.created", `{"example":{"id":1}}`).must(http.StatusOK, nil)
	e.do("PATCH", "/v1/event-types/order.created", `{"description":"still \u001b red"}`).apiErr(http.StatusBadRequest, "invalid_description")
	e.do("PATCH", "/v1/event-types/order.created", `{"description":"an order was placed"}`).must(http.StatusOK, nil)
}
