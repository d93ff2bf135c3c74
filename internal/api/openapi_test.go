package api_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhooks/herald"
	"github.com/heraldhooks/herald/internal/api"
	"github.com/heraldhooks/herald/internal/store"
)

// mountedByApp are the calls openapi.json documents that the app serves
// beside the API, so api.Routes does not list them.
func mountedByApp() []string { return []string{"GET /metrics"} }

// specOperations lists every "METHOD /path" openapi.json documents.
func specOperations(t *testing.T, s *spec) []string {
	t.Helper()
	var out []string
	paths, ok := s.doc["paths"].(map[string]any)
	require.True(t, ok, "paths is an object")
	for path, item := range paths {
		pi, ok := item.(map[string]any)
		require.True(t, ok, "%s is an object", path)
		for method := range pi {
			switch method {
			case "get", "put", "post", "delete", "options", "head", "patch", "trace":
				out = append(out, strings.ToUpper(method)+" "+path)
			}
		}
	}
	sort.Strings(out)
	return out
}

func TestOpenAPIDocument(t *testing.T) {
	t.Parallel()
	s, err := parseSpec()
	require.NoError(t, err)

	t.Run("IsOpenAPI31", func(t *testing.T) {
		t.Parallel()
		v, _ := s.doc["openapi"].(string)
		require.Regexp(t, `^3\.1\.\d+$`, v)
		info, ok := s.doc["info"].(map[string]any)
		require.True(t, ok)
		require.NotEmpty(t, info["title"])
		require.NotEmpty(t, info["version"])
	})

	t.Run("EveryRefResolves", func(t *testing.T) {
		t.Parallel()
		refs := 0
		var walk func(v any, at string)
		walk = func(v any, at string) {
			switch v := v.(type) {
			case map[string]any:
				if ref, ok := v["$ref"].(string); ok {
					refs++
					_, err := s.resolve(ref)
					require.NoError(t, err, "at %s", at)
				}
				for k, x := range v {
					walk(x, at+"/"+k)
				}
			case []any:
				for _, x := range v {
					walk(x, at+"[]")
				}
			}
		}
		walk(s.doc, "#")
		require.Greater(t, refs, 100)
	})

	t.Run("NamedSchemas", func(t *testing.T) {
		t.Parallel()
		for _, name := range []string{"Endpoint", "Event", "Delivery", "Attempt", "Stats", "IngestResult", "ListPage", "Error", "APIKey", "APIKeyCreated"} {
			sch, err := s.schema(name)
			require.NoError(t, err, name)
			props, err := s.properties(sch)
			require.NoError(t, err, name)
			require.NotEmpty(t, props, name)
			if req, ok := sch["required"].([]any); ok {
				for _, r := range req {
					require.Contains(t, props, r, "%s requires a property it does not describe", name)
				}
			}
		}
	})

	t.Run("Operations", func(t *testing.T) {
		t.Parallel()
		security, _ := s.doc["security"].([]any)
		require.Len(t, security, 1, "the /v1 default is bearer authentication")
		scheme, err := s.resolve("#/components/securitySchemes/bearerAuth")
		require.NoError(t, err)
		require.Equal(t, map[string]any{"type": "http", "scheme": "bearer"},
			map[string]any{"type": scheme.(map[string]any)["type"], "scheme": scheme.(map[string]any)["scheme"]})
		_, ok := security[0].(map[string]any)["bearerAuth"]
		require.True(t, ok)

		ids := map[string]string{}
		param := regexp.MustCompile(`\{([^}]+)\}`)
		for _, name := range specOperations(t, s) {
			method, path, _ := strings.Cut(name, " ")
			tmpl, op, ok := s.operation(method, strings.NewReplacer("{id}", "x").Replace(path))
			require.True(t, ok, name)
			require.Equal(t, path, tmpl)

			id, _ := op["operationId"].(string)
			require.NotEmpty(t, id, "%s has an operationId", name)
			require.NotContains(t, ids, id, "operationId %s is used by %s and %s", id, ids[id], name)
			ids[id] = name
			require.NotEmpty(t, op["summary"], name)

			responses, _ := op["responses"].(map[string]any)
			success := 0
			for code, r := range responses {
				resp, err := s.deref(r)
				require.NoError(t, err, "%s %s", name, code)
				require.NotEmpty(t, resp["description"], "%s %s", name, code)
				if strings.HasPrefix(code, "2") {
					success++
				}
			}
			require.Positive(t, success, "%s documents a success", name)

			opSecurity, hasSecurity := op["security"]
			if strings.HasPrefix(path, "/v1/") {
				require.False(t, hasSecurity, "%s keeps the bearer default", name)
				require.Contains(t, responses, "401", name)
				require.Contains(t, responses, "429", name, "every call is held to its key's request limit")
				require.Contains(t, responses, "500", name)
			} else {
				require.Equal(t, []any{}, opSecurity, "%s needs no key", name)
			}

			// Path parameters and the template agree.
			var want []string
			for _, m := range param.FindAllStringSubmatch(path, -1) {
				want = append(want, m[1])
			}
			params, err := s.parameters(path, op)
			require.NoError(t, err, name)
			var got []string
			for _, p := range params {
				if p["in"] == "path" {
					require.Equal(t, true, p["required"], "%s: path parameter %s is required", name, p["name"])
					got = append(got, p["name"].(string))
				}
			}
			require.ElementsMatch(t, want, got, name)
		}
	})
}

// TestOpenAPIRoutes: every route the API serves is documented with the same
// method and path, and every documented call is served (by the API, or by
// the app for the listed exceptions).
func TestOpenAPIRoutes(t *testing.T) {
	t.Parallel()
	s, err := parseSpec()
	require.NoError(t, err)
	documented := specOperations(t, s)

	var served []string
	for _, r := range api.Routes() {
		served = append(served, r.Method+" "+r.Path)
	}
	sort.Strings(served)
	require.Equal(t, len(served), len(slices.Compact(slices.Clone(served))), "a route is listed twice")

	for _, r := range served {
		require.Contains(t, documented, r, "route %s is not in openapi.json", r)
	}
	for _, d := range documented {
		if slices.Contains(mountedByApp(), d) {
			require.NotContains(t, served, d, "%s is listed as mounted by the app but the API serves it", d)
			continue
		}
		require.Contains(t, served, d, "openapi.json documents %s, which the API does not serve", d)
	}
}

// TestOpenAPIForbiddenFollowsScope: a /v1 call documents 403 forbidden
// exactly when its route's scope rule can answer it (operator-only calls,
// and those that name a consumer in the query or the body); a call about
// one id never answers 403, only 404, so it documents none. The one
// other 403 is a body field only an operator key may set (forbidsField).
func TestOpenAPIForbiddenFollowsScope(t *testing.T) {
	t.Parallel()
	s, err := parseSpec()
	require.NoError(t, err)
	for _, rt := range api.Routes() {
		if rt.Access == api.AccessPublic {
			continue
		}
		_, op, ok := s.operation(rt.Method, strings.ReplaceAll(rt.Path, "{id}", "x"))
		require.True(t, ok, "%s %s", rt.Method, rt.Path)
		responses, _ := op["responses"].(map[string]any)
		_, documented := responses["403"]
		// Calls with a body field that only an operator key may set
		// ("confirmed": an operator vouches for an address).
		forbidsField := rt.Method+" "+rt.Path == "PUT /v1/consumers/{consumer_id}/notifications"
		canForbid := rt.Access == api.AccessOperator || rt.Access == api.AccessConsumerQuery || rt.Access == api.AccessConsumerBody ||
			forbidsField
		require.Equal(t, canForbid, documented, "%s %s (scope rule %s): 403 documented", rt.Method, rt.Path, rt.Access)
		if documented {
			resp, err := s.deref(responses["403"])
			require.NoError(t, err)
			require.Contains(t, resp["description"], "consumer key")
		}
	}
}

func TestOpenAPIServed(t *testing.T) {
	t.Parallel()
	e := setup(t)
	r := e.doKey("", "GET", "/openapi.json", nil)
	require.Equal(t, http.StatusOK, r.status)
	require.Equal(t, "application/json", r.header.Get("Content-Type"))
	require.Equal(t, herald.OpenAPI, r.body)
	require.Equal(t, http.StatusOK, e.doKey("", "HEAD", "/openapi.json", nil).status)
	r = e.doKey("", "POST", "/openapi.json", "{}")
	r.apiErr(http.StatusMethodNotAllowed, "method_not_allowed")
	require.Equal(t, "GET, HEAD", r.header.Get("Allow"))
}

// keysOf lists the keys of the JSON object b.
func keysOf(t *testing.T, b []byte) []string {
	t.Helper()
	var m map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(b, &m), "%s", b)
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// TestOpenAPISchemasMatchAnswers: for each schema, a real answer has
// exactly the keys the schema describes, so a field added to an answer
// without documenting it (or documented but never sent) fails here.
func TestOpenAPISchemasMatchAnswers(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ep := e.createEndpoint(map[string]any{
		"consumer_id": "c1", "rate_limit": map[string]any{"per_second": 5, "burst": 10},
		"retry_policy": map[string]any{"type": "exponential", "base": "1s", "factor": 2, "cap": "1h", "attempts": 3},
	})
	created := e.do("POST", "/v1/endpoints", map[string]any{"url": "https://example.com/hooks", "consumer_id": "c1"})
	rotated := e.do("POST", "/v1/endpoints/"+ep.ID+"/rotate-secret", nil)
	ingested := e.do("POST", "/v1/events", `{"consumer_id":"c1","event_type":"a.b","payload":{"n":1}}`)
	var in ingestOut
	ingested.must(http.StatusAccepted, &in)
	require.Len(t, in.Deliveries, 2)
	e.attempt(func(c *store.ClaimedDelivery) store.DeliveryOutcome {
		return store.DeliveryOutcome{
			Attempt: herald.Attempt{Number: 1, AttemptedAt: e.clock.Now(), Duration: time.Millisecond, StatusCode: 500, Error: "HTTP 500"},
			Status:  herald.StatusPending, RetryIn: time.Minute,
		}
	})
	d := in.Deliveries[0].ID

	event := e.do("GET", "/v1/events/"+in.ID, nil)
	delivery := e.do("GET", "/v1/deliveries/"+d, nil)
	attempts := e.do("GET", "/v1/deliveries/"+d+"/attempts", nil)
	stats := e.do("GET", "/v1/stats", nil)
	batch := e.do("POST", "/v1/events/batch", `{"events":[{"event_type":"a","payload":1}]}`)
	replayed := e.do("POST", "/v1/events/"+in.ID+"/replay", nil)
	got := e.do("GET", "/v1/endpoints/"+ep.ID, nil)
	failed := e.do("GET", "/v1/deliveries/dlv_missing", nil)
	keyMade := e.do("POST", "/v1/api-keys", `{"name":"c1","scope":"consumer","consumer_id":"c1"}`)
	var made apiKeyOut
	keyMade.must(http.StatusCreated, &made)
	e.doKey(made.Key, "GET", "/v1/stats", nil).must(http.StatusOK, nil)
	keyGot := e.do("GET", "/v1/api-keys/"+made.ID, nil)
	keys := e.do("GET", "/v1/api-keys", nil)
	forbidden := e.doKey(made.Key, "GET", "/v1/api-keys", nil)
	probe := e.doKey("", "GET", "/healthz", nil)

	first := func(r *response, key string) []byte {
		var m map[string]json.RawMessage
		require.NoError(t, json.Unmarshal(r.body, &m))
		var items []json.RawMessage
		if err := json.Unmarshal(m[key], &items); err == nil {
			require.NotEmpty(t, items, "%s is empty in %s", key, r.body)
			return items[0]
		}
		return m[key]
	}

	for _, tc := range []struct {
		schema string
		body   []byte
	}{
		{"Endpoint", created.body},
		{"Endpoint", rotated.body},
		{"Endpoint", got.body},
		{"EndpointHealth", first(created, "health")},
		{"EndpointHealth", first(got, "health")},
		{"RateLimit", first(rotated, "rate_limit")},
		{"RetryPolicy", first(rotated, "retry_policy")},
		{"IngestResult", ingested.body},
		{"DeliveryRef", first(ingested, "deliveries")},
		{"Event", event.body},
		{"Delivery", first(event, "deliveries")},
		{"Delivery", delivery.body},
		{"ListPage", attempts.body},
		{"Attempt", first(attempts, "data")},
		{"Stats", stats.body},
		{"BatchResult", batch.body},
		{"IngestResult", first(batch, "data")},
		{"Replayed", replayed.body},
		{"Error", failed.body},
		{"Error", forbidden.body},
		{"APIKeyCreated", keyMade.body},
		{"APIKey", keyGot.body},
		{"APIKey", first(keys, "data")},
		{"ListPage", keys.body},
		{"Probe", probe.body},
	} {
		sch, err := e.spec.schema(tc.schema)
		require.NoError(t, err)
		props, err := e.spec.properties(sch)
		require.NoError(t, err)
		require.Equal(t, props, keysOf(t, tc.body), "schema %s and the answer %s", tc.schema, tc.body)
		v, err := decodeJSONValue(tc.body)
		require.NoError(t, err)
		require.Empty(t, e.spec.validate(sch, v, tc.schema), "%s", tc.body)
	}

	// Nested objects without a schema of their own.
	statsSchema, err := e.spec.schema("Stats")
	require.NoError(t, err)
	byStatus, err := e.spec.properties(statsSchema["properties"].(map[string]any)["deliveries"])
	require.NoError(t, err)
	require.Equal(t, byStatus, keysOf(t, first(stats, "deliveries")))
	errSchema, err := e.spec.schema("Error")
	require.NoError(t, err)
	detail, err := e.spec.properties(errSchema["properties"].(map[string]any)["error"])
	require.NoError(t, err)
	require.Equal(t, detail, keysOf(t, first(failed, "error")))
}

// TestOpenAPIValidatorRefuses: the checks that hold answers to the document
// do find what does not fit.
func TestOpenAPIValidatorRefuses(t *testing.T) {
	t.Parallel()
	s, err := parseSpec()
	require.NoError(t, err)
	for _, tc := range []struct {
		name, schema, body, want string
	}{
		{"ExtraKey", "Replayed", `{"replayed":1,"extra":true}`, `has "extra"`},
		{"MissingKey", "DeliveryRef", `{"id":"dlv_1"}`, `lacks "endpoint_id"`},
		{"WrongType", "Replayed", `{"replayed":"1"}`, "not of type integer"},
		{"NotInteger", "Replayed", `{"replayed":1.5}`, "not of type integer"},
		{"BelowMinimum", "Replayed", `{"replayed":-1}`, "below 0"},
		{"NotInEnum", "DeliveryStatus", `"failed"`, "not one of"},
		{"NotNullable", "IngestResult", `{"id":"evt_1","duplicate":false,"deliveries":null}`, "not of type array"},
		{"Nullable", "Attempt", `{"id":"att_1","delivery_id":"dlv_1","endpoint_id":"ep_1","number":1,"attempted_at":"x","duration_ms":1,"status_code":"200","response_body":"","error":""}`, "alternatives"},
		{"DateTime", "Event", `{"id":"evt_1","consumer_id":"c","event_type":"a","idempotency_key":"","created_at":"yesterday","payload":1}`, "RFC 3339"},
		{"Pattern", "EventType", `"a b"`, "does not match"},
		{"ListItems", "ListPage", `{"data":[],"next_cursor":1}`, "not of type string"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			v, err := decodeJSONValue([]byte(tc.body))
			require.NoError(t, err)
			problems := s.validate(map[string]any{"$ref": "#/components/schemas/" + tc.schema}, v, tc.schema)
			require.NotEmpty(t, problems)
			require.Contains(t, strings.Join(problems, "\n"), tc.want)
		})
	}
	t.Run("UndocumentedStatus", func(t *testing.T) {
		t.Parallel()
		u := mustURL(t, "/v1/stats")
		problems := s.checkExchange("GET", u, nil, http.StatusConflict, jsonHeader(), []byte(`{"error":{"code":"conflict","message":"m"}}`))
		require.Len(t, problems, 1)
		require.Contains(t, problems[0], "does not list")
	})
	t.Run("UndocumentedErrorCode", func(t *testing.T) {
		t.Parallel()
		u := mustURL(t, "/v1/stats")
		problems := s.checkExchange("GET", u, nil, http.StatusBadRequest, jsonHeader(), []byte(`{"error":{"code":"invalid_limit","message":"limit must be"}}`))
		require.NotEmpty(t, problems)
	})
	t.Run("MessageMustNameField", func(t *testing.T) {
		t.Parallel()
		u := mustURL(t, "/v1/events")
		problems := s.checkExchange("GET", u, nil, http.StatusBadRequest, jsonHeader(), []byte(`{"error":{"code":"invalid_since","message":"bad time"}}`))
		require.Len(t, problems, 1)
		require.Contains(t, problems[0], "does not name the field since")
	})
	t.Run("UndocumentedQueryParameter", func(t *testing.T) {
		t.Parallel()
		u := mustURL(t, "/v1/stats?verbose=1")
		problems := s.checkExchange("GET", u, nil, http.StatusOK, jsonHeader(),
			[]byte(`{"deliveries":{"pending":0,"delivering":0,"delivered":0,"dead":0,"cancelled":0},"dead_letter_depth":0,"due_now":0,"oldest_due_age_seconds":0}`))
		require.Len(t, problems, 1)
		require.Contains(t, problems[0], `"verbose"`)
	})
	t.Run("UndocumentedRequestField", func(t *testing.T) {
		t.Parallel()
		u := mustURL(t, "/v1/events/evt_1/replay")
		problems := s.checkExchange("POST", u, []byte(`{"status":"dead","force":true}`), http.StatusOK, jsonHeader(), []byte(`{"replayed":0,"dry_run":false}`))
		require.Len(t, problems, 1)
		require.Contains(t, problems[0], `"force"`)
	})
	t.Run("UnknownKeyword", func(t *testing.T) {
		t.Parallel()
		problems := s.validate(map[string]any{"type": "string", "minimumLength": json.Number("3")}, "ab", "x")
		require.Len(t, problems, 1)
		require.Contains(t, problems[0], "minimumLength")
	})
}

func mustURL(t *testing.T, raw string) *url.URL {
	t.Helper()
	u, err := url.Parse(raw)
	require.NoError(t, err)
	return u
}

func jsonHeader() http.Header {
	return http.Header{"Content-Type": {"application/json"}}
}
