package api_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// filteredEndpointOut is the part of an endpoint answer a filter test reads.
type filteredEndpointOut struct {
	ID     string  `json:"id"`
	Filter *string `json:"filter"`
}

// filteredEventOut is an event answer with the endpoints its filters skipped.
type filteredEventOut struct {
	ID         string `json:"id"`
	Deliveries []struct {
		EndpointID string `json:"endpoint_id"`
	} `json:"deliveries"`
	Filtered []struct {
		EndpointID string `json:"endpoint_id"`
		Reason     string `json:"reason"`
	} `json:"filtered"`
}

// TestEndpointFilter: a filter is saved on create and PATCH, answered,
// cleared by null and by ""; one that does not compile, is not a bool or
// costs too much is 400 invalid_filter naming the position and the reason.
func TestEndpointFilter(t *testing.T) {
	t.Parallel()
	e := setup(t)
	var ep filteredEndpointOut
	e.do("POST", "/v1/endpoints", map[string]any{
		"consumer_id": "c1", "url": "https://example.com/hooks",
		"filter": "payload.amount > 1000 && payload.currency == 'EUR'",
	}).must(http.StatusCreated, &ep)
	require.NotNil(t, ep.Filter)
	require.Equal(t, "payload.amount > 1000 && payload.currency == 'EUR'", *ep.Filter)

	path := "/v1/endpoints/" + ep.ID
	e.do("PATCH", path, `{"description":"kept"}`).must(http.StatusOK, &ep)
	require.Equal(t, "payload.amount > 1000 && payload.currency == 'EUR'", *ep.Filter, "a PATCH without filter keeps it")
	e.do("PATCH", path, `{"filter":null}`).must(http.StatusOK, &ep)
	require.Nil(t, ep.Filter)
	e.do("PATCH", path, `{"filter":"event_type == 'a'"}`).must(http.StatusOK, &ep)
	require.Equal(t, "event_type == 'a'", *ep.Filter)
	e.do("PATCH", path, `{"filter":""}`).must(http.StatusOK, &ep)
	require.Nil(t, ep.Filter)

	for _, tc := range []struct{ name, filter, want string }{
		{"Syntax", "payload.amount >", "1:17"},
		{"Undeclared", "amount > 3", "1:1: undeclared reference to 'amount'"},
		{"NotABool", "payload.amount + 1", "must be a bool"},
		{"TooCostly", "payload.a.all(x, payload.b.all(y, payload.c.exists(z, x == y && y == z)))", "too costly"},
		{"TooLong", strings.Repeat("true && ", 1000) + "true", "at most"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			msg := e.do("PATCH", path, map[string]any{"filter": tc.filter}).apiErr(http.StatusBadRequest, "invalid_filter")
			require.Contains(t, msg, tc.want)
			msg = e.do("POST", "/v1/endpoints", map[string]any{"url": "https://example.com/hooks", "filter": tc.filter}).apiErr(http.StatusBadRequest, "invalid_filter")
			require.Contains(t, msg, tc.want)
		})
	}
}

// TestEventFiltered: an event goes only to the endpoints whose filters
// pass; its answer lists the others with the reason, a run-time error
// (a missing field) as filter_error, and the ingest still succeeds.
func TestEventFiltered(t *testing.T) {
	t.Parallel()
	for _, b := range []struct {
		name string
		opts []func(*options)
	}{{"SQLite", nil}, {"PostgreSQL", []func(*options){onPostgres}}} {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			e := setup(t, b.opts...)
			plain := e.createEndpoint(map[string]any{"consumer_id": "c1"})
			big := e.createEndpoint(map[string]any{"consumer_id": "c1", "filter": "payload.amount > 1000"})
			deep := e.createEndpoint(map[string]any{"consumer_id": "c1", "filter": "payload.customer.country == 'FR'"})

			res := e.send("c1", "order.paid", `{"amount": 5}`)
			require.Len(t, res.Deliveries, 1)
			require.Equal(t, plain.ID, res.Deliveries[0].EndpointID)
			var ev filteredEventOut
			e.do("GET", "/v1/events/"+res.ID, nil).must(http.StatusOK, &ev)
			require.Len(t, ev.Deliveries, 1)
			require.Len(t, ev.Filtered, 2)
			reasons := map[string]string{}
			for _, f := range ev.Filtered {
				reasons[f.EndpointID] = f.Reason
			}
			require.Equal(t, map[string]string{big.ID: "filter", deep.ID: "filter_error"}, reasons)

			res = e.send("c1", "order.paid", `{"amount": 5000, "customer": {"country": "FR"}}`)
			require.Len(t, res.Deliveries, 3)
			e.do("GET", "/v1/events/"+res.ID, nil).must(http.StatusOK, &ev)
			require.NotNil(t, ev.Filtered, "an empty list beside the deliveries")
			require.Empty(t, ev.Filtered)
		})
	}
}

// TestEndpointFilterTest: POST /v1/endpoints/{id}/filter-test runs the
// endpoint's filter, or one given, over the consumer's last events,
// newest first, and says which pass and why one could not; a filter that
// does not compile is 400 invalid_filter; another consumer's key finds
// no endpoint.
func TestEndpointFilterTest(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ep := e.createEndpoint(map[string]any{"consumer_id": "c1", "filter": "payload.amount > 1000"})
	e.createEndpoint(map[string]any{"consumer_id": "c2"})
	first := e.send("c1", "order.paid", `{"amount": 5}`)
	e.clock.Advance(time.Second)
	second := e.send("c1", "order.paid", `{"amount": 5000}`)
	e.clock.Advance(time.Second)
	third := e.send("c1", "order.refunded", `{"reason": "no amount"}`)
	e.send("c2", "order.paid", `{"amount": 9999}`)
	path := "/v1/endpoints/" + ep.ID + "/filter-test"

	type result struct {
		EventID   string  `json:"event_id"`
		EventType string  `json:"event_type"`
		Pass      bool    `json:"pass"`
		Error     *string `json:"error"`
	}
	var out struct {
		Data []result `json:"data"`
	}
	e.do("POST", path, nil).must(http.StatusOK, &out)
	require.Len(t, out.Data, 3, "the consumer's events only")
	require.Equal(t, []string{third.ID, second.ID, first.ID}, []string{out.Data[0].EventID, out.Data[1].EventID, out.Data[2].EventID})
	require.False(t, out.Data[0].Pass)
	require.NotNil(t, out.Data[0].Error, "a missing field is an error")
	require.True(t, out.Data[1].Pass)
	require.Nil(t, out.Data[1].Error)
	require.False(t, out.Data[2].Pass)
	require.Nil(t, out.Data[2].Error)
	require.Equal(t, "order.paid", out.Data[2].EventType)

	e.do("POST", path, `{"filter":"event_type == 'order.refunded'"}`).must(http.StatusOK, &out)
	require.Equal(t, []bool{true, false, false}, []bool{out.Data[0].Pass, out.Data[1].Pass, out.Data[2].Pass})

	msg := e.do("POST", path, `{"filter":"payload.amount >"}`).apiErr(http.StatusBadRequest, "invalid_filter")
	require.Contains(t, msg, "1:17")

	own := e.createKey("consumer", "c1")
	e.doKey(own.Key, "POST", path, `{}`).must(http.StatusOK, &out)
	other := e.createKey("consumer", "c2")
	e.doKey(other.Key, "POST", path, nil).apiErr(http.StatusNotFound, "not_found")
}
