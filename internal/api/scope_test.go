package api_test

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhooks/herald"
	"github.com/heraldhooks/herald/internal/api"
	"github.com/heraldhooks/herald/internal/store"
)

// tenant is one consumer's data in a scope test: an endpoint, an event
// whose delivery went dead after one attempt, and an event whose delivery
// is still pending, all made with the operator key.
type tenant struct {
	consumer string
	key      apiKeyOut // a consumer key of this consumer
	endpoint endpointOut
	deadEvent, liveEvent,
	deadDelivery, liveDelivery, attempt string
}

// markers are strings that belong to t alone: none may appear in an answer
// to another consumer's key.
func (tn *tenant) markers() []string {
	return []string{
		tn.consumer, tn.endpoint.ID, tn.endpoint.Secret, tn.deadEvent, tn.liveEvent,
		tn.deadDelivery, tn.liveDelivery, tn.attempt, tn.key.ID, tn.key.Key,
	}
}

// twoTenants makes consumers cust_a and cust_b, each with its data and a
// consumer key.
func twoTenants(e *env) (a, b *tenant) {
	e.t.Helper()
	a, b = &tenant{consumer: "cust_a"}, &tenant{consumer: "cust_b"}
	e.do("POST", "/v1/event-types", `{"name":"order.created","description":"An order was placed.","schema":{"type":"object","required":["owner"]}}`).
		must(http.StatusCreated, nil)
	for _, tn := range []*tenant{a, b} {
		tn.key = e.createKey("consumer", tn.consumer)
		tn.endpoint = e.createEndpoint(map[string]any{
			"consumer_id": tn.consumer, "url": "https://" + strings.ReplaceAll(tn.consumer, "_", "-") + ".example.com/hooks",
			"description": tn.consumer + " orders", "retry_schedule": []string{"0s"},
		})
		ev := e.send(tn.consumer, "order.created", `{"owner":"`+tn.consumer+`"}`)
		require.Len(e.t, ev.Deliveries, 1)
		tn.deadEvent, tn.deadDelivery = ev.ID, ev.Deliveries[0].ID
	}
	e.attempt(func(c *store.ClaimedDelivery) store.DeliveryOutcome {
		return store.DeliveryOutcome{
			Attempt: herald.Attempt{Number: 1, AttemptedAt: e.clock.Now(), Duration: time.Millisecond, StatusCode: 500, Error: "HTTP 500"},
			Status:  herald.StatusDead, DeadReason: herald.DeadExhausted,
		}
	})
	for _, tn := range []*tenant{a, b} {
		var atts listOut[struct {
			ID string `json:"id"`
		}]
		e.do("GET", "/v1/deliveries/"+tn.deadDelivery+"/attempts", nil).must(http.StatusOK, &atts)
		require.Len(e.t, atts.Data, 1)
		tn.attempt = atts.Data[0].ID
		ev := e.send(tn.consumer, "order.paid", `{"owner":"`+tn.consumer+`"}`)
		tn.liveEvent, tn.liveDelivery = ev.ID, ev.Deliveries[0].ID
		// Used once now, so its last use is written before any snapshot
		// (the clock stands still in the walk: not again).
		e.doKey(tn.key.Key, "GET", "/v1/stats", nil).must(http.StatusOK, nil)
	}
	return a, b
}

// noLeak fails when an answer to a key of one consumer holds anything of
// other.
func noLeak(t *testing.T, r *response, other *tenant, call string) {
	t.Helper()
	for _, m := range other.markers() {
		require.NotContains(t, string(r.body), m, "%s answered something of %s", call, other.consumer)
	}
}

// snapshot is what the operator sees of a tenant: it must not change when
// another consumer's key calls with the tenant's ids.
func (e *env) snapshot(tn *tenant) string {
	e.t.Helper()
	var b strings.Builder
	for _, p := range []string{
		"/v1/endpoints/" + tn.endpoint.ID, "/v1/events/" + tn.deadEvent, "/v1/events/" + tn.liveEvent,
		"/v1/deliveries/" + tn.deadDelivery, "/v1/deliveries/" + tn.liveDelivery,
		"/v1/deliveries/" + tn.deadDelivery + "/attempts", "/v1/endpoints?consumer_id=" + tn.consumer,
		"/v1/stats?consumer_id=" + tn.consumer, "/v1/api-keys?consumer_id=" + tn.consumer,
	} {
		r := e.do("GET", p, nil)
		require.Equal(e.t, http.StatusOK, r.status, "%s: %s", p, r.body)
		b.Write(r.body)
		b.WriteByte('\n')
	}
	return b.String()
}

// scopeCall is how the walk makes one route's call about a tenant's data.
type scopeCall struct {
	path func(tn *tenant) string
	body func(tn *tenant) any
	// status is the success an allowed key gets.
	status int
}

// scopeCalls has a case for every route of api.Routes(); the walk fails on
// a route without one, so a new route cannot go untested for its scope.
func scopeCalls() map[string]scopeCall {
	fixed := func(p string) func(*tenant) string { return func(*tenant) string { return p } }
	none := func(*tenant) any { return nil }
	const ep, ev, dlv = "/v1/endpoints/", "/v1/events/", "/v1/deliveries/"
	return map[string]scopeCall{
		"GET /healthz":      {fixed("/healthz"), none, http.StatusOK},
		"GET /readyz":       {fixed("/readyz"), none, http.StatusOK},
		"GET /openapi.json": {fixed("/openapi.json"), none, http.StatusOK},

		"POST /v1/endpoints":     {fixed("/v1/endpoints"), func(*tenant) any { return `{"url":"https://example.com/new"}` }, http.StatusCreated},
		"GET /v1/endpoints":      {fixed("/v1/endpoints"), none, http.StatusOK},
		"GET /v1/endpoints/{id}": {func(tn *tenant) string { return ep + tn.endpoint.ID }, none, http.StatusOK},
		"PATCH /v1/endpoints/{id}": {func(tn *tenant) string { return ep + tn.endpoint.ID },
			func(*tenant) any { return `{"description":"changed"}` }, http.StatusOK},
		"DELETE /v1/endpoints/{id}":             {func(tn *tenant) string { return ep + tn.endpoint.ID }, none, http.StatusNoContent},
		"POST /v1/endpoints/{id}/rotate-secret": {func(tn *tenant) string { return ep + tn.endpoint.ID + "/rotate-secret" }, none, http.StatusOK},
		"POST /v1/endpoints/{id}/enable":        {func(tn *tenant) string { return ep + tn.endpoint.ID + "/enable" }, none, http.StatusOK},
		"POST /v1/endpoints/{id}/disable": {func(tn *tenant) string { return ep + tn.endpoint.ID + "/disable" },
			func(*tenant) any { return `{"reason":"maintenance"}` }, http.StatusOK},
		"POST /v1/endpoints/{id}/replay": {func(tn *tenant) string { return ep + tn.endpoint.ID + "/replay" },
			func(*tenant) any { return `{"status":"dead"}` }, http.StatusOK},
		"POST /v1/endpoints/{id}/test":        {func(tn *tenant) string { return ep + tn.endpoint.ID + "/test" }, none, http.StatusAccepted},
		"POST /v1/endpoints/{id}/filter-test": {func(tn *tenant) string { return ep + tn.endpoint.ID + "/filter-test" }, none, http.StatusOK},

		"POST /v1/events": {fixed("/v1/events"), func(tn *tenant) any {
			return `{"consumer_id":"` + tn.consumer + `","event_type":"order.shipped","payload":{}}`
		}, http.StatusAccepted},
		"POST /v1/events/batch": {fixed("/v1/events/batch"), func(tn *tenant) any {
			return `{"events":[{"consumer_id":"` + tn.consumer + `","event_type":"order.shipped","payload":{}}]}`
		}, http.StatusAccepted},
		"GET /v1/events":                   {fixed("/v1/events"), none, http.StatusOK},
		"GET /v1/events/{id}":              {func(tn *tenant) string { return ev + tn.deadEvent }, none, http.StatusOK},
		"POST /v1/events/{id}/replay":      {func(tn *tenant) string { return ev + tn.deadEvent + "/replay" }, none, http.StatusOK},
		"GET /v1/deliveries":               {fixed("/v1/deliveries"), none, http.StatusOK},
		"GET /v1/deliveries/{id}":          {func(tn *tenant) string { return dlv + tn.deadDelivery }, none, http.StatusOK},
		"GET /v1/deliveries/{id}/attempts": {func(tn *tenant) string { return dlv + tn.deadDelivery + "/attempts" }, none, http.StatusOK},
		"POST /v1/deliveries/{id}/replay":  {func(tn *tenant) string { return dlv + tn.deadDelivery + "/replay" }, none, http.StatusAccepted},
		"POST /v1/deliveries/{id}/cancel":  {func(tn *tenant) string { return dlv + tn.liveDelivery + "/cancel" }, none, http.StatusOK},
		"GET /v1/stats":                    {fixed("/v1/stats"), none, http.StatusOK},
		"GET /v1/stats/series":             {fixed("/v1/stats/series?window=24h"), none, http.StatusOK},

		"POST /v1/api-keys": {fixed("/v1/api-keys"), func(tn *tenant) any {
			return `{"name":"another","scope":"consumer","consumer_id":"` + tn.consumer + `"}`
		}, http.StatusCreated},
		"GET /v1/api-keys":         {fixed("/v1/api-keys"), none, http.StatusOK},
		"GET /v1/api-keys/{id}":    {func(tn *tenant) string { return "/v1/api-keys/" + tn.key.ID }, none, http.StatusOK},
		"DELETE /v1/api-keys/{id}": {func(tn *tenant) string { return "/v1/api-keys/" + tn.key.ID }, none, http.StatusNoContent},

		"POST /v1/event-types": {fixed("/v1/event-types"), func(*tenant) any {
			return `{"name":"order.refunded","schema":{"type":"object"}}`
		}, http.StatusCreated},
		"GET /v1/event-types":        {fixed("/v1/event-types"), none, http.StatusOK},
		"GET /v1/event-types/{name}": {fixed("/v1/event-types/order.created"), none, http.StatusOK},
		"PATCH /v1/event-types/{name}": {fixed("/v1/event-types/order.created"),
			func(*tenant) any { return `{"description":"changed"}` }, http.StatusOK},
		"DELETE /v1/event-types/{name}": {fixed("/v1/event-types/order.created"), none, http.StatusNoContent},

		"POST /v1/consumers/{consumer_id}/portal-sessions": {func(tn *tenant) string {
			return "/v1/consumers/" + tn.consumer + "/portal-sessions"
		}, func(*tenant) any { return `{"ttl":"15m"}` }, http.StatusCreated},
		"DELETE /v1/consumers/{consumer_id}/portal-sessions": {func(tn *tenant) string {
			return "/v1/consumers/" + tn.consumer + "/portal-sessions"
		}, none, http.StatusOK},
		"GET /v1/consumers/{consumer_id}/notifications": {func(tn *tenant) string {
			return "/v1/consumers/" + tn.consumer + "/notifications"
		}, none, http.StatusOK},
		"PUT /v1/consumers/{consumer_id}/notifications": {func(tn *tenant) string {
			return "/v1/consumers/" + tn.consumer + "/notifications"
		}, func(*tenant) any { return `{"email":"changed@example.com"}` }, http.StatusOK},
		// A key that reaches the consumer gets as far as the token check.
		"POST /v1/consumers/{consumer_id}/notifications/confirm": {func(tn *tenant) string {
			return "/v1/consumers/" + tn.consumer + "/notifications/confirm"
		}, func(*tenant) any { return `{"token":"not-a-token"}` }, http.StatusBadRequest},
	}
}

// missingID is an id of the kind a route's {id} names that exists nowhere.
func missingID(access api.Access) string {
	switch access {
	case api.AccessEndpoint:
		return "ep_01hzzzzzzzzzzzzzzzzzzzzzzz"
	case api.AccessEvent:
		return "evt_01hzzzzzzzzzzzzzzzzzzzzzzz"
	}
	return "dlv_01hzzzzzzzzzzzzzzzzzzzzzzz"
}

// TestScopeOfEveryRoute walks the route table (api.Routes, the one that
// builds the mux and is held to openapi.json) with an operator key, the
// owner's consumer key and another consumer's key, against real data on
// SQLite. Every route must declare its scope rule and have a case here.
// Another consumer's ids answer 404 exactly as ids that do not exist, and
// change nothing; lists and answers to a consumer key hold nothing of
// another consumer; what only the operator may do answers 403 forbidden.
// Every exchange is also checked against openapi.json (env.doKey).
func TestScopeOfEveryRoute(t *testing.T) {
	t.Parallel()
	calls := scopeCalls()
	routes := api.Routes()
	for _, rt := range routes {
		name := rt.Method + " " + rt.Path
		require.NotContains(t, rt.Access.String(), "undeclared", "%s declares no scope rule", name)
		_, ok := calls[name]
		require.True(t, ok, "route %s (scope rule %s) has no case in scopeCalls: add one, so its scope is walked", name, rt.Access)
	}
	require.Len(t, calls, len(routes), "scopeCalls has a case for a route the API does not serve")

	for _, rt := range routes {
		name := rt.Method + " " + rt.Path
		c := calls[name]
		t.Run(strings.NewReplacer(" /", "_", "/", "_").Replace(name), func(t *testing.T) {
			t.Parallel()
			e := setup(t)
			a, b := twoTenants(e)
			call := func(key string, tn *tenant, path string) *response {
				t.Helper()
				return e.doKey(key, rt.Method, path, c.body(tn))
			}
			switch rt.Access {
			case api.AccessPublic:
				for _, key := range []string{"", a.key.Key, testKey} {
					require.Equal(t, c.status, call(key, a, c.path(a)).status, name)
				}

			case api.AccessOperator:
				before := e.snapshot(a) + e.snapshot(b)
				for _, pair := range [][2]*tenant{{a, b}, {b, a}} {
					me, other := pair[0], pair[1]
					for _, target := range pair {
						r := call(me.key.Key, target, c.path(target))
						require.Contains(t, r.apiErr(http.StatusForbidden, "forbidden"), "operator key")
						noLeak(t, r, other, name)
					}
				}
				require.Equal(t, before, e.snapshot(a)+e.snapshot(b), "a refused call changed nothing")
				require.Equal(t, c.status, call(testKey, b, c.path(b)).status, "the operator key may")

			case api.AccessAnyKey:
				// What belongs to no consumer: every key reads the same,
				// and nothing of a tenant is in it.
				before := e.snapshot(a) + e.snapshot(b)
				want := call(testKey, a, c.path(a))
				require.Equal(t, c.status, want.status, "%s: %s", name, want.body)
				for _, pair := range [][2]*tenant{{a, b}, {b, a}} {
					me, other := pair[0], pair[1]
					r := call(me.key.Key, me, c.path(me))
					require.Equal(t, c.status, r.status, "%s: %s", name, r.body)
					require.Equal(t, string(want.body), string(r.body), "a consumer key reads what the operator reads")
					noLeak(t, r, other, name)
				}
				require.Equal(t, before, e.snapshot(a)+e.snapshot(b))

			case api.AccessConsumerQuery:
				scopeQuery(t, e, name, c, call, a, b)

			case api.AccessConsumerBody:
				scopeBody(t, e, name, c, a, b)

			case api.AccessEndpoint, api.AccessEvent, api.AccessDelivery:
				// Another consumer's id answers as a missing one does, and
				// touches nothing.
				missing := missingID(rt.Access)
				want := e.doKey(a.key.Key, rt.Method, strings.ReplaceAll(rt.Path, "{id}", missing), c.body(a)).
					apiErr(http.StatusNotFound, "not_found")
				before := e.snapshot(b)
				theirID := ""
				for _, id := range []string{b.endpoint.ID, b.deadEvent, b.deadDelivery, b.liveDelivery} {
					if strings.Contains(c.path(b), id) {
						theirID = id
					}
				}
				require.NotEmpty(t, theirID)
				r := call(a.key.Key, b, c.path(b))
				msg := r.apiErr(http.StatusNotFound, "not_found")
				require.Equal(t, strings.ReplaceAll(want, missing, "X"), strings.ReplaceAll(msg, theirID, "X"),
					"another consumer's id answers exactly as a missing one")
				// The answer names the id asked for, as any 404 does; nothing
				// else of cust_b's.
				r.body = []byte(strings.ReplaceAll(string(r.body), theirID, missing))
				noLeak(t, r, b, name)
				require.Equal(t, before, e.snapshot(b), "%s with a consumer_id of cust_b's changed it", name)

				before = e.snapshot(a)
				call(b.key.Key, a, c.path(a)).apiErr(http.StatusNotFound, "not_found")
				require.Equal(t, before, e.snapshot(a))

				// The owner's key may; so may the operator's.
				r = call(a.key.Key, a, c.path(a))
				require.Equal(t, c.status, r.status, "%s with the owner's key: %s", name, r.body)
				noLeak(t, r, b, name)
				require.Equal(t, c.status, call(testKey, b, c.path(b)).status, "the operator key may")

			case api.AccessConsumerPath:
				scopeConsumerPath(t, e, name, c, call, a, b)

			default:
				t.Fatalf("%s: the walk does not know scope rule %s", name, rt.Access)
			}
		})
	}
}

// scopeConsumerPath walks a call about the consumer its path names: a
// consumer key reaches its own, and another consumer answers 404 exactly
// as a consumer that has nothing, changing nothing of it.
func scopeConsumerPath(t *testing.T, e *env, name string, c scopeCall, call func(string, *tenant, string) *response, a, b *tenant) {
	t.Helper()
	notices := func(tn *tenant) string {
		r := e.do("GET", "/v1/consumers/"+tn.consumer+"/notifications", nil)
		require.Equal(t, http.StatusOK, r.status, "%s", r.body)
		return string(r.body)
	}
	e.do("PUT", "/v1/consumers/"+b.consumer+"/notifications", `{"email":"b-ops@example.com"}`).must(http.StatusOK, nil)
	before := e.snapshot(b) + notices(b)
	missing := strings.Replace(c.path(b), b.consumer, "cust_nobody", 1)
	want := call(a.key.Key, b, missing).apiErr(http.StatusNotFound, "not_found")
	r := call(a.key.Key, b, c.path(b))
	msg := r.apiErr(http.StatusNotFound, "not_found")
	require.Equal(t, strings.ReplaceAll(want, "cust_nobody", "X"), strings.ReplaceAll(msg, b.consumer, "X"),
		"another consumer answers exactly as one with nothing")
	require.NotContains(t, string(r.body), "b-ops@example.com")
	require.Equal(t, before, e.snapshot(b)+notices(b), "%s with cust_b's consumer_id changed it", name)

	// The owner's key may; so may the operator's, for any consumer.
	r = call(a.key.Key, a, c.path(a))
	require.Equal(t, c.status, r.status, "%s with the owner's key: %s", name, r.body)
	noLeak(t, r, b, name)
	require.Equal(t, c.status, call(testKey, b, c.path(b)).status, "the operator key may")
}

// scopeQuery walks a list (or count) filtered by consumer_id.
func scopeQuery(t *testing.T, e *env, name string, c scopeCall, call func(string, *tenant, string) *response, a, b *tenant) {
	t.Helper()
	path := c.path(a)
	for _, pair := range [][2]*tenant{{a, b}, {b, a}} {
		me, other := pair[0], pair[1]
		for _, p := range []string{path, path + "?consumer_id=", path + "?consumer_id=" + me.consumer} {
			r := call(me.key.Key, me, p)
			require.Equal(t, c.status, r.status, "%s: %s", p, r.body)
			noLeak(t, r, other, name+" "+p)
			requireOnly(t, r, me)
		}
		before := e.snapshot(other)
		for _, p := range []string{path + "?consumer_id=" + other.consumer, path + "?consumer_id=" + me.consumer + "&consumer_id=" + other.consumer} {
			r := call(me.key.Key, me, p)
			require.Contains(t, r.apiErr(http.StatusForbidden, "forbidden"), "another consumer", p)
			noLeak(t, r, other, name+" "+p)
		}
		require.Equal(t, before, e.snapshot(other))
	}
	if name == "GET /v1/deliveries" {
		// Filters that name another consumer's rows find nothing.
		for _, q := range []string{"event_id=" + b.deadEvent, "endpoint_id=" + b.endpoint.ID} {
			var page listOut[deliveryOut]
			call(a.key.Key, a, path+"?"+q).must(http.StatusOK, &page)
			require.Empty(t, page.Data, q)
		}
	}
	// The operator sees both.
	r := call(testKey, a, path)
	require.Equal(t, c.status, r.status)
	if name == "GET /v1/stats" {
		require.Equal(t, int64(4), statsTotal(t, r))
		return
	}
	require.Contains(t, string(r.body), a.consumer)
	require.Contains(t, string(r.body), b.consumer)
}

// requireOnly checks that an answer to me's key is of me alone: every
// listed item is of its consumer, and there is something to list.
func requireOnly(t *testing.T, r *response, me *tenant) {
	t.Helper()
	var page struct {
		Data []struct {
			ConsumerID string `json:"consumer_id"`
		} `json:"data"`
	}
	require.NoError(t, json.Unmarshal(r.body, &page))
	if page.Data == nil {
		require.Equal(t, int64(2), statsTotal(t, r), "the stats of %s: its two deliveries", me.consumer)
		return
	}
	require.NotEmpty(t, page.Data, "%s's key lists its own", me.consumer)
	for _, it := range page.Data {
		require.Equal(t, me.consumer, it.ConsumerID)
	}
}

// statsTotal sums the deliveries of a /v1/stats answer.
func statsTotal(t *testing.T, r *response) int64 {
	t.Helper()
	var st struct {
		Deliveries map[string]int64 `json:"deliveries"`
	}
	require.NoError(t, json.Unmarshal(r.body, &st), "%s", r.body)
	require.NotEmpty(t, st.Deliveries, "%s", r.body)
	var n int64
	for _, v := range st.Deliveries {
		n += v
	}
	return n
}

// scopeBody walks POST /v1/endpoints, whose body names the consumer.
func scopeBody(t *testing.T, e *env, name string, c scopeCall, a, b *tenant) {
	t.Helper()
	path := c.path(a)
	before := e.snapshot(b)
	for _, body := range []string{
		`{"url":"https://example.com/x","consumer_id":"cust_b"}`,
		`{"consumer_id":"cust_b","url":"https://example.com/x"}`,
		`{"url":"https://example.com/x","CONSUMER_ID":"cust_b"}`,
		`{"url":"https://example.com/x","consumer_id":"cust_a","Consumer_Id":"cust_b"}`,
		`{"url":"https://example.com/x","consumer_id":"default"}`,
	} {
		r := e.doKey(a.key.Key, "POST", path, body)
		require.Contains(t, r.apiErr(http.StatusForbidden, "forbidden"), "another consumer", body)
		noLeak(t, r, b, name)
	}
	require.Equal(t, before, e.snapshot(b), "nothing was made for cust_b")
	var page listOut[endpointOut]
	e.do("GET", "/v1/endpoints?consumer_id=default", nil).must(http.StatusOK, &page)
	require.Empty(t, page.Data, "nor for the default consumer")

	for _, body := range []string{
		`{"url":"https://example.com/x"}`,
		`{"url":"https://example.com/x","consumer_id":"cust_a"}`,
	} {
		var ep endpointOut
		r := e.doKey(a.key.Key, "POST", path, body)
		r.must(c.status, &ep)
		require.Equal(t, "cust_a", ep.ConsumerID, body)
		noLeak(t, r, b, name)
	}
	// Bodies the handler refuses are still refused as before.
	e.doKey(a.key.Key, "POST", path, `{"url":"https://example.com/x","Consumer_ID":"cust_a"}`).apiErr(http.StatusBadRequest, "unknown_field")
	e.doKey(a.key.Key, "POST", path, `{"url":`).apiErr(http.StatusBadRequest, "invalid_json")
	e.doKey(a.key.Key, "POST", path, `{"url":"https://example.com/x","consumer_id":7}`).apiErr(http.StatusBadRequest, "invalid_type")
	e.doKey(a.key.Key, "POST", path, `{"url":"https://example.com/x","consumer_id":""}`).apiErr(http.StatusBadRequest, "invalid_consumer_id")
	e.doKey(a.key.Key, "POST", path, `{"url":"https://example.com/x","url":"https://example.com/y"}`).apiErr(http.StatusBadRequest, "invalid_json")
	e.doKey(a.key.Key, "POST", path, `{"url":"https://example.com/x","bogus":1}`).apiErr(http.StatusBadRequest, "unknown_field")
	e.doKey(a.key.Key, "POST", path, `{"description":"`+strings.Repeat("x", 1<<20)+`"}`).apiErr(http.StatusRequestEntityTooLarge, "body_too_large")

	var ep endpointOut
	e.doKey(testKey, "POST", path, `{"url":"https://example.com/x","consumer_id":"cust_b"}`).must(c.status, &ep)
	require.Equal(t, "cust_b", ep.ConsumerID, "the operator key names any consumer")
}

// TestScopeRulesFitTheRoutes: operator-only calls are exactly those API.md
// names, and the rest of /v1 reaches a consumer's own data.
func TestScopeRulesFitTheRoutes(t *testing.T) {
	t.Parallel()
	var operator []string
	for _, rt := range api.Routes() {
		if rt.Access == api.AccessOperator {
			operator = append(operator, rt.Method+" "+rt.Path)
		}
	}
	slices.Sort(operator)
	require.Equal(t, []string{
		"DELETE /v1/api-keys/{id}", "DELETE /v1/consumers/{consumer_id}/portal-sessions",
		"DELETE /v1/event-types/{name}", "GET /v1/api-keys", "GET /v1/api-keys/{id}",
		"GET /v1/stats/series", // every consumer's activity together
		"PATCH /v1/event-types/{name}", "POST /v1/api-keys", "POST /v1/consumers/{consumer_id}/portal-sessions",
		"POST /v1/event-types", "POST /v1/events", "POST /v1/events/batch",
	}, operator)
	var anyKey []string
	for _, rt := range api.Routes() {
		if rt.Access == api.AccessAnyKey {
			require.Equal(t, "GET", rt.Method, "only reads are open to every key")
			anyKey = append(anyKey, rt.Method+" "+rt.Path)
		}
	}
	require.Equal(t, []string{"GET /v1/event-types", "GET /v1/event-types/{name}"}, anyKey)
}
