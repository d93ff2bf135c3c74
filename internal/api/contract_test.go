package api_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhooks/herald"
	"github.com/heraldhooks/herald/internal/api"
	"github.com/heraldhooks/herald/internal/store"
	"github.com/heraldhooks/herald/internal/syncbuf"
)

// concrete fills a route's {id} with id.
func concrete(path, id string) string { return strings.ReplaceAll(path, "{id}", id) }

// bodyRoutes lists the routes that read a request body.
func bodyRoutes() []api.Route {
	var out []api.Route
	for _, r := range api.Routes() {
		if r.Method == http.MethodPost || r.Method == http.MethodPatch {
			out = append(out, r)
		}
	}
	return out
}

// TestEveryCall makes each call API.md lists once, as a user would, and
// checks its success status; every answer is also checked against
// openapi.json (env.do). The table must cover every route.
func TestEveryCall(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ep := e.createEndpoint(map[string]any{"consumer_id": "c1"})
	doomed := e.createEndpoint(map[string]any{"consumer_id": "c1"})
	ev := e.send("c1", "order.created", `{"n":1}`)
	require.Len(t, ev.Deliveries, 2)
	key := e.createKey("consumer", "c1")
	var dlv string
	for _, d := range ev.Deliveries {
		if d.EndpointID == ep.ID {
			dlv = d.ID
		}
	}

	calls := []struct {
		route, path string
		body        any
		status      int
	}{
		{"GET /healthz", "/healthz", nil, http.StatusOK},
		{"GET /readyz", "/readyz", nil, http.StatusOK},
		{"GET /openapi.json", "/openapi.json", nil, http.StatusOK},
		{"POST /v1/endpoints", "/v1/endpoints", `{"url":"https://example.com/other","ordering":"fifo","auto_disable_after_failures":10,"auto_disable_after":"1h"}`, http.StatusCreated},
		{"GET /v1/endpoints", "/v1/endpoints?consumer_id=c1&limit=10", nil, http.StatusOK},
		{"GET /v1/endpoints/{id}", "/v1/endpoints/" + ep.ID, nil, http.StatusOK},
		{"PATCH /v1/endpoints/{id}", "/v1/endpoints/" + ep.ID, `{"description":"orders","ordering":null,"auto_disable_after":"48h"}`, http.StatusOK},
		{"POST /v1/endpoints/{id}/rotate-secret", "/v1/endpoints/" + ep.ID + "/rotate-secret", nil, http.StatusOK},
		{"POST /v1/endpoints/{id}/disable", "/v1/endpoints/" + ep.ID + "/disable", `{"reason":"maintenance"}`, http.StatusOK},
		{"POST /v1/endpoints/{id}/enable", "/v1/endpoints/" + ep.ID + "/enable", nil, http.StatusOK},
		{"POST /v1/endpoints/{id}/replay", "/v1/endpoints/" + ep.ID + "/replay", `{"status":"dead","dry_run":false,"rate":5}`, http.StatusOK},
		{"POST /v1/endpoints/{id}/test", "/v1/endpoints/" + ep.ID + "/test", nil, http.StatusAccepted},
		{"POST /v1/endpoints/{id}/filter-test", "/v1/endpoints/" + ep.ID + "/filter-test", `{"filter":"event_type == 'order.paid'"}`, http.StatusOK},
		{"POST /v1/events", "/v1/events", `{"consumer_id":"c1","event_type":"order.paid","payload":{},"idempotency_key":"k1"}`, http.StatusAccepted},
		{"POST /v1/events", "/v1/events", `{"consumer_id":"c1","event_type":"order.paid","payload":{},"idempotency_key":"k1"}`, http.StatusOK},
		{"POST /v1/events/batch", "/v1/events/batch", `{"events":[{"consumer_id":"c1","event_type":"a","payload":1}]}`, http.StatusAccepted},
		{"GET /v1/events", "/v1/events?consumer_id=c1&event_type=order.created&since=2024-05-01T00:00:00Z&until=2024-05-02T00:00:00Z", nil, http.StatusOK},
		{"GET /v1/events/{id}", "/v1/events/" + ev.ID, nil, http.StatusOK},
		{"GET /v1/deliveries", "/v1/deliveries?status=pending&endpoint_id=" + ep.ID + "&consumer_id=c1&event_id=" + ev.ID + "&event_type=order.created", nil, http.StatusOK},
		{"GET /v1/deliveries/{id}", "/v1/deliveries/" + dlv, nil, http.StatusOK},
		{"GET /v1/deliveries/{id}/attempts", "/v1/deliveries/" + dlv + "/attempts?limit=5", nil, http.StatusOK},
		{"POST /v1/deliveries/{id}/cancel", "/v1/deliveries/" + dlv + "/cancel", nil, http.StatusOK},
		{"POST /v1/deliveries/{id}/replay", "/v1/deliveries/" + dlv + "/replay", `{}`, http.StatusAccepted},
		{"POST /v1/events/{id}/replay", "/v1/events/" + ev.ID + "/replay", `{"status":"cancelled","rate":100}`, http.StatusOK},
		{"DELETE /v1/endpoints/{id}", "/v1/endpoints/" + doomed.ID, nil, http.StatusNoContent},
		{"GET /v1/stats", "/v1/stats", nil, http.StatusOK},
		{"GET /v1/stats", "/v1/stats?consumer_id=c1", nil, http.StatusOK},
		{"GET /v1/stats", "/v1/stats?counts=false", nil, http.StatusOK},
		{"GET /v1/stats", "/v1/stats?counts=maybe", nil, http.StatusBadRequest},
		{"GET /v1/stats/series", "/v1/stats/series", nil, http.StatusOK},
		{"GET /v1/stats/series", "/v1/stats/series?window=24h", nil, http.StatusOK},
		{"GET /v1/stats/series", "/v1/stats/series?window=7d", nil, http.StatusBadRequest},
		{"POST /v1/api-keys", "/v1/api-keys", `{"name":"deploys","scope":"operator"}`, http.StatusCreated},
		{"GET /v1/api-keys", "/v1/api-keys?consumer_id=c1&limit=10", nil, http.StatusOK},
		{"GET /v1/api-keys/{id}", "/v1/api-keys/" + key.ID, nil, http.StatusOK},
		{"DELETE /v1/api-keys/{id}", "/v1/api-keys/" + key.ID, nil, http.StatusNoContent},
		{"POST /v1/consumers/{consumer_id}/portal-sessions", "/v1/consumers/c1/portal-sessions", `{"ttl":"1h"}`, http.StatusCreated},
		{"POST /v1/consumers/{consumer_id}/portal-sessions", "/v1/consumers/c1/portal-sessions", nil, http.StatusCreated},
		{"POST /v1/consumers/{consumer_id}/portal-sessions", "/v1/consumers/c1/portal-sessions", `{"ttl":"10s"}`, http.StatusBadRequest},
		{"DELETE /v1/consumers/{consumer_id}/portal-sessions", "/v1/consumers/c1/portal-sessions", nil, http.StatusOK},
		{"GET /v1/consumers/{consumer_id}/notifications", "/v1/consumers/c1/notifications", nil, http.StatusOK},
		{"PUT /v1/consumers/{consumer_id}/notifications", "/v1/consumers/c1/notifications", `{"email":"ops@example.com"}`, http.StatusOK},
		{"PUT /v1/consumers/{consumer_id}/notifications", "/v1/consumers/c1/notifications", `{"email":"Ops <ops@example.com>"}`, http.StatusBadRequest},
		{"GET /v1/consumers/{consumer_id}/notifications", "/v1/consumers/c1/notifications", nil, http.StatusOK},
		{"PUT /v1/consumers/{consumer_id}/notifications", "/v1/consumers/c1/notifications", `{"email":null}`, http.StatusOK},
		{"POST /v1/consumers/{consumer_id}/notifications/confirm", "/v1/consumers/c1/notifications/confirm", `{"token":"wrong"}`, http.StatusBadRequest},
		{"POST /v1/event-types", "/v1/event-types", `{"name":"order.refunded","description":"An order was refunded.","schema":{"type":"object","required":["order_id"]},"example":{"order_id":"o_1"}}`, http.StatusCreated},
		{"POST /v1/event-types", "/v1/event-types", `{"name":"order.refunded"}`, http.StatusConflict},
		{"POST /v1/event-types", "/v1/event-types", `{"name":"order.voided","schema":{"type":"strung"}}`, http.StatusBadRequest},
		{"POST /v1/events", "/v1/events", `{"consumer_id":"c1","event_type":"order.refunded","payload":{"n":1}}`, http.StatusBadRequest},
		{"GET /v1/event-types", "/v1/event-types?limit=2", nil, http.StatusOK},
		{"GET /v1/event-types/{name}", "/v1/event-types/order.refunded", nil, http.StatusOK},
		{"GET /v1/event-types/{name}", "/v1/event-types/herald.delivery.dead", nil, http.StatusOK},
		{"PATCH /v1/event-types/{name}", "/v1/event-types/order.refunded", `{"description":null,"schema":null,"example":[1]}`, http.StatusOK},
		{"PATCH /v1/event-types/{name}", "/v1/event-types/herald.delivery.dead", `{"description":"x"}`, http.StatusBadRequest},
		{"DELETE /v1/event-types/{name}", "/v1/event-types/order.refunded", nil, http.StatusNoContent},
		{"DELETE /v1/event-types/{name}", "/v1/event-types/order.refunded", nil, http.StatusNotFound},
	}
	for _, c := range calls {
		if method, path, _ := strings.Cut(c.route, " "); strings.HasPrefix(path, "/v1/") {
			e.doKey("", method, c.path, c.body).apiErr(http.StatusUnauthorized, "unauthorized")
		}
	}
	covered := map[string]bool{}
	for _, c := range calls {
		method, _, _ := strings.Cut(c.route, " ")
		r := e.do(method, c.path, c.body)
		require.Equal(t, c.status, r.status, "%s: %s", c.route, r.body)
		covered[c.route] = true
	}
	for _, r := range api.Routes() {
		require.True(t, covered[r.Method+" "+r.Path], "TestEveryCall does not call %s %s", r.Method, r.Path)
	}
}

// TestBodyLimits: a body over its limit answers 413 on every call that
// reads one, before anything is looked up or written.
func TestBodyLimits(t *testing.T) {
	t.Parallel()
	e := setup(t, func(o *options) { o.maxPayload = 1 << 10; o.maxBatch = 100 << 10 })
	big := `{"description":"` + strings.Repeat("x", 1<<20) + `"}`
	for _, r := range bodyRoutes() {
		t.Run(r.Method+" "+strings.TrimPrefix(r.Path, "/"), func(t *testing.T) {
			t.Parallel()
			code := "body_too_large"
			if strings.HasPrefix(r.Path, "/v1/events") && !strings.HasSuffix(r.Path, "/replay") {
				code = "payload_too_large"
			}
			msg := e.do(r.Method, concrete(r.Path, "x_missing"), big).apiErr(http.StatusRequestEntityTooLarge, code)
			require.Contains(t, msg, "bytes")
		})
	}
	t.Run("BatchBody", func(t *testing.T) {
		t.Parallel()
		// Each payload fits; the whole batch does not.
		ev := `{"event_type":"a","payload":"` + strings.Repeat("x", 1000) + `"}`
		body := `{"events":[` + strings.TrimSuffix(strings.Repeat(ev+",", 120), ",") + `]}`
		msg := e.do("POST", "/v1/events/batch", body).apiErr(http.StatusRequestEntityTooLarge, "payload_too_large")
		require.Contains(t, msg, fmt.Sprintf("%d bytes", 100<<10))
	})
	var events listOut[eventOut]
	e.do("GET", "/v1/events", nil).must(http.StatusOK, &events)
	require.Empty(t, events.Data)
}

// TestUnknownFields: every call that reads a body refuses a field it does
// not know, naming it, before anything is looked up or written.
func TestUnknownFields(t *testing.T) {
	t.Parallel()
	e := setup(t)
	for _, r := range bodyRoutes() {
		t.Run(r.Method+" "+strings.TrimPrefix(r.Path, "/"), func(t *testing.T) {
			t.Parallel()
			msg := e.do(r.Method, concrete(r.Path, "x_missing"), `{"bogus":1}`).apiErr(http.StatusBadRequest, "unknown_field")
			require.Contains(t, msg, `"bogus"`)
		})
	}
	t.Run("Nested", func(t *testing.T) {
		t.Parallel()
		msg := e.do("POST", "/v1/endpoints", `{"url":"https://example.com","rate_limit":{"per_second":1,"burst":1,"jitter":1}}`).
			apiErr(http.StatusBadRequest, "unknown_field")
		require.Contains(t, msg, `"jitter"`)
		msg = e.do("POST", "/v1/events/batch", `{"events":[{"event_type":"a","payload":1,"kind":"x"}]}`).apiErr(http.StatusBadRequest, "unknown_field")
		require.Contains(t, msg, `events[0]: unknown field "kind"`)
	})
}

// TestWrongMethods: every path answers a method it does not serve with 405,
// a JSON error and an Allow header listing what it serves.
func TestWrongMethods(t *testing.T) {
	t.Parallel()
	e := setup(t)
	routes := api.Routes()
	paths := map[string]bool{}
	for _, r := range routes {
		paths[r.Path] = true
	}
	for path := range paths {
		t.Run(strings.TrimPrefix(path, "/"), func(t *testing.T) {
			t.Parallel()
			p := concrete(path, "x_1")
			var allow []string
			for _, r := range routes {
				if _, ok := matchTemplate(r.Path, p); ok && !slices.Contains(allow, r.Method) {
					allow = append(allow, r.Method)
					if r.Method == http.MethodGet {
						allow = append(allow, http.MethodHead)
					}
				}
			}
			sort.Strings(allow)
			for _, method := range []string{"PUT", "OPTIONS", "PATCH", "DELETE", "POST"} {
				if slices.Contains(allow, method) {
					continue
				}
				r := e.do(method, p, nil)
				msg := r.apiErr(http.StatusMethodNotAllowed, "method_not_allowed")
				require.Contains(t, msg, method)
				require.Equal(t, strings.Join(allow, ", "), r.header.Get("Allow"), "%s %s", method, p)
			}
		})
	}
}

// failingStore stands for a database that fails: some calls return an
// error holding what a driver error may hold, and DeliveryGet panics.
type failingStore struct {
	store.Store
	err error
}

func (f failingStore) EndpointList(ctx context.Context, p *store.EndpointListParams) (*store.Page[*herald.Endpoint], error) {
	return nil, fmt.Errorf("list endpoints: %w", f.err)
}

func (f failingStore) EndpointGet(ctx context.Context, id string) (*herald.Endpoint, error) {
	return nil, fmt.Errorf("get endpoint: %w", f.err)
}

func (f failingStore) EventIngest(ctx context.Context, p *store.EventIngestParams) ([]store.EventIngestResult, error) {
	return nil, fmt.Errorf("ingest: %w", f.err)
}

func (f failingStore) Stats(ctx context.Context, p *store.StatsParams) (*store.Stats, error) {
	return nil, fmt.Errorf("stats: %w", f.err)
}

func (f failingStore) DeliveryGet(ctx context.Context, id string) (*herald.Delivery, error) {
	panic("nil map in delivery row scan at 10.0.0.7:5432")
}

// TestInternalErrorsStayInTheLog: a failing store or a panic answers a
// generic 500; the detail goes to the log only.
func TestInternalErrorsStayInTheLog(t *testing.T) {
	t.Parallel()
	var logs syncbuf.Buffer
	secret := errors.New(`pq: password authentication failed for user "herald" at 10.0.0.7:5432 (SQLSTATE 28P01)`)
	e := setup(t, func(o *options) {
		o.wrap = func(s store.Store) store.Store { return failingStore{Store: s, err: secret} }
		o.logger = slog.New(slog.NewTextHandler(&logs, nil))
	})
	for _, c := range []struct{ method, path, body string }{
		{"GET", "/v1/endpoints", ""},
		{"GET", "/v1/endpoints/ep_1", ""},
		{"PATCH", "/v1/endpoints/ep_1", `{"description":"x"}`},
		{"POST", "/v1/events", `{"event_type":"a","payload":1}`},
		{"GET", "/v1/stats", ""},
		{"GET", "/v1/deliveries/dlv_1", ""},
	} {
		var body any
		if c.body != "" {
			body = c.body
		}
		r := e.do(c.method, c.path, body)
		msg := r.apiErr(http.StatusInternalServerError, "internal_error")
		require.Equal(t, "internal error; see the server log", msg)
		for _, leak := range []string{"pq", "password", "10.0.0.7", "SQLSTATE", "nil map", "herald\\\""} {
			require.NotContains(t, string(r.body), leak, "%s %s", c.method, c.path)
		}
	}
	log := logs.String()
	require.Contains(t, log, "password authentication failed", "the detail is logged")
	require.Contains(t, log, "nil map in delivery row scan", "the panic is logged")
}

// TestPagingIsStable: paging goes through each list once, in the same
// order, even when rows share a creation time and rows are added between
// pages.
func TestPagingIsStable(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.createEndpoint(map[string]any{"consumer_id": "p"})
	// All at the same instant: the order must still be total.
	for range 7 {
		e.createEndpoint(map[string]any{"consumer_id": "p"})
		e.send("p", "a", `{}`)
	}

	for _, tc := range []struct {
		name, list string
		add        func()
	}{
		{"Endpoints", "/v1/endpoints?consumer_id=p", func() { e.createEndpoint(map[string]any{"consumer_id": "p"}) }},
		{"Events", "/v1/events?consumer_id=p", func() { e.send("p", "a", `{}`) }},
		{"Deliveries", "/v1/deliveries?consumer_id=p", func() { e.send("p", "a", `{}`) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var all listOut[map[string]any]
			e.do("GET", tc.list+"&limit=1000", nil).must(http.StatusOK, &all)
			require.Empty(t, all.NextCursor)
			var want []string
			for _, x := range all.Data {
				want = append(want, x["id"].(string))
			}
			require.GreaterOrEqual(t, len(want), 7)

			var got []string
			cursor := ""
			for page := 0; ; page++ {
				require.Less(t, page, 100, "paging does not end")
				var p listOut[map[string]any]
				e.do("GET", tc.list+"&limit=3&cursor="+cursor, nil).must(http.StatusOK, &p)
				require.LessOrEqual(t, len(p.Data), 3)
				for _, x := range p.Data {
					got = append(got, x["id"].(string))
				}
				if page == 0 {
					// A row newer than every row listed must not
					// appear on later pages.
					e.clock.Advance(time.Millisecond)
					tc.add()
				}
				if cursor = p.NextCursor; cursor == "" {
					break
				}
			}
			require.Equal(t, want, got)
		})
	}

	t.Run("AttemptsOldestFirst", func(t *testing.T) {
		ep := e.createEndpoint(map[string]any{"consumer_id": "att"})
		ev := e.send("att", "a", `{}`)
		require.Len(t, ev.Deliveries, 1)
		require.Equal(t, ep.ID, ev.Deliveries[0].EndpointID)
		for n := 1; n <= 5; n++ {
			e.clock.Advance(time.Hour)
			claimed, err := e.store.DeliveryClaim(t.Context(), &store.DeliveryClaimParams{Limit: 100, LeaseMargin: time.Second, Now: e.clock.Now()})
			require.NoError(t, err)
			var outcomes []store.DeliveryOutcome
			for _, c := range claimed {
				outcomes = append(outcomes, store.DeliveryOutcome{
					Lease:   store.Lease{DeliveryID: c.Delivery.ID, LeaseToken: c.LeaseToken},
					Attempt: herald.Attempt{Number: c.Delivery.AttemptCount + 1, AttemptedAt: e.clock.Now(), StatusCode: 500},
					Status:  herald.StatusPending, RetryIn: time.Minute,
				})
			}
			_, err = e.store.DeliveryCompleteMany(t.Context(), &store.DeliveryCompleteManyParams{Outcomes: outcomes, Now: e.clock.Now()})
			require.NoError(t, err)
		}
		var numbers []float64
		cursor := ""
		for page := 0; page < 10; page++ {
			var p listOut[map[string]any]
			e.do("GET", "/v1/deliveries/"+ev.Deliveries[0].ID+"/attempts?limit=2&cursor="+cursor, nil).must(http.StatusOK, &p)
			for _, a := range p.Data {
				numbers = append(numbers, a["number"].(float64))
			}
			if cursor = p.NextCursor; cursor == "" {
				break
			}
		}
		require.Equal(t, []float64{1, 2, 3, 4, 5}, numbers)
	})
}
