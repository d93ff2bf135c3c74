package api_test

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestEndpointCreate(t *testing.T) {
	t.Parallel()

	t.Run("OnlyURLGivesDefaults", func(t *testing.T) {
		t.Parallel()
		e := setup(t)
		ep := e.createEndpoint(map[string]any{"url": "https://example.com/hooks"})
		require.True(t, strings.HasPrefix(ep.ID, "ep_"), ep.ID)
		require.Equal(t, "default", ep.ConsumerID)
		require.Equal(t, "https://example.com/hooks", ep.URL)
		require.Equal(t, []string{"*"}, ep.EventTypes)
		require.True(t, ep.Enabled)
		require.Equal(t, "10s", ep.Timeout)
		require.Equal(t, []string{"0s", "30s", "5m", "30m", "2h", "8h", "24h"}, ep.RetrySchedule)
		require.Nil(t, ep.RetryPolicy)
		require.Nil(t, ep.RateLimit)
		require.Equal(t, 10, ep.MaxInFlight)
		require.Equal(t, "standard", ep.SignatureScheme)
		require.Equal(t, map[string]string{}, ep.Headers)
		require.Nil(t, ep.PreviousSecretExpiresAt)
		require.Equal(t, start, ep.CreatedAt)

		key, ok := strings.CutPrefix(ep.Secret, "whsec_")
		require.True(t, ok, ep.Secret)
		raw, err := base64.StdEncoding.DecodeString(key)
		require.NoError(t, err)
		require.Len(t, raw, 24)

		other := e.createEndpoint(map[string]any{})
		require.NotEqual(t, ep.Secret, other.Secret, "each endpoint gets its own secret")
	})

	t.Run("EverySetting", func(t *testing.T) {
		t.Parallel()
		e := setup(t)
		secret := "whsec_" + base64.StdEncoding.EncodeToString([]byte("0123456789abcdef0123456789abcdef"))
		ep := e.createEndpoint(map[string]any{
			"consumer_id": "cust_42", "url": "https://example.com/orders",
			"event_types": []string{"order.*", "invoice.paid"}, "description": "orders",
			"retry_schedule": []string{"0s", "30s", "5m0s"}, "timeout": "15s",
			"rate_limit":    map[string]any{"per_second": 2.5, "burst": 5},
			"max_in_flight": 3, "signature_scheme": "standard", "secret": secret,
			"headers":             map[string]string{"X-Team": "a"},
			"retry_client_errors": true,
		})
		require.Equal(t, "cust_42", ep.ConsumerID)
		require.Equal(t, []string{"order.*", "invoice.paid"}, ep.EventTypes)
		require.Equal(t, "orders", ep.Description)
		require.Equal(t, []string{"0s", "30s", "5m"}, ep.RetrySchedule)
		require.Equal(t, "15s", ep.Timeout)
		require.Equal(t, &rateLimitOut{PerSecond: 2.5, Burst: 5}, ep.RateLimit)
		require.Equal(t, 3, ep.MaxInFlight)
		require.Equal(t, secret, ep.Secret)
		require.Equal(t, map[string]string{"X-Team": "a"}, ep.Headers)
		require.True(t, ep.RetryClientErrors)

		var got endpointOut
		e.do("GET", "/v1/endpoints/"+ep.ID, nil).must(http.StatusOK, &got)
		require.Equal(t, ptr(0), got.Health.Due, "GET one endpoint counts its queue")
		require.Equal(t, ep, withoutFigures(got))
	})

	t.Run("ExponentialRetryPolicy", func(t *testing.T) {
		t.Parallel()
		e := setup(t)
		ep := e.createEndpoint(map[string]any{
			"retry_policy": map[string]any{"type": "exponential", "base": "1s", "factor": 2, "cap": "1h", "attempts": 10},
		})
		require.Equal(t, &retryPolicyOut{Type: "exponential", Base: "1s", Factor: 2, Cap: "1h", Attempts: 10}, ep.RetryPolicy)
		require.Nil(t, ep.RetrySchedule)
	})

	t.Run("HMACSecret", func(t *testing.T) {
		t.Parallel()
		e := setup(t)
		ep := e.createEndpoint(map[string]any{"signature_scheme": "hmac-sha256", "secret": "my shared secret 123"})
		require.Equal(t, "hmac-sha256", ep.SignatureScheme)
		require.Equal(t, "my shared secret 123", ep.Secret)
		generated := e.createEndpoint(map[string]any{"signature_scheme": "hmac-sha256"})
		require.True(t, strings.HasPrefix(generated.Secret, "whsec_"))
	})

	t.Run("PrivateAddressOnlyWhenAllowed", func(t *testing.T) {
		t.Parallel()
		e := setup(t)
		msg := e.do("POST", "/v1/endpoints", map[string]any{"url": "http://127.0.0.1:9000/hook"}).apiErr(http.StatusBadRequest, "invalid_url")
		require.Contains(t, msg, "--allow-private-networks")
		msg = e.do("POST", "/v1/endpoints", map[string]any{"url": "http://169.254.169.254/latest"}).apiErr(http.StatusBadRequest, "invalid_url")
		require.Contains(t, msg, "169.254.169.254")

		open := setup(t, func(o *options) { o.allowPrivate = true })
		ep := open.createEndpoint(map[string]any{"url": "http://127.0.0.1:9000/hook"})
		require.Equal(t, "http://127.0.0.1:9000/hook", ep.URL)
	})

	t.Run("Invalid", func(t *testing.T) {
		t.Parallel()
		e := setup(t)
		for _, tc := range []struct {
			name     string
			body     string
			code     string
			contains string
		}{
			{"NoURL", `{}`, "invalid_url", "url is required"},
			{"NullURL", `{"url":null}`, "invalid_url", "url is required"},
			{"FTP", `{"url":"ftp://example.com/x"}`, "invalid_url", "http:// or https://"},
			{"NoHost", `{"url":"https:///path"}`, "invalid_url", "host"},
			{"Relative", `{"url":"/hooks"}`, "invalid_url", "http:// or https://"},
			{"EmptyConsumer", `{"url":"https://example.com","consumer_id":""}`, "invalid_consumer_id", "consumer_id must be"},
			{"EmptyEventTypes", `{"url":"https://example.com","event_types":[]}`, "invalid_event_types", "event_types must list"},
			{"BadPattern", `{"url":"https://example.com","event_types":["order.*","or der"]}`, "invalid_event_types", "event_types[1]"},
			{"StarInMiddle", `{"url":"https://example.com","event_types":["a.*.b"]}`, "invalid_event_types", "event_types[0]"},
			{"TimeoutNoUnit", `{"url":"https://example.com","timeout":"10"}`, "invalid_timeout", "timeout must be a Go duration from 1s to 60s"},
			{"TimeoutShort", `{"url":"https://example.com","timeout":"500ms"}`, "invalid_timeout", "1s to 60s"},
			{"TimeoutLong", `{"url":"https://example.com","timeout":"61s"}`, "invalid_timeout", "1s to 60s"},
			{"ScheduleEmpty", `{"url":"https://example.com","retry_schedule":[]}`, "invalid_retry_schedule", "1 to 20"},
			{"ScheduleLong", `{"url":"https://example.com","retry_schedule":[` + strings.Repeat(`"1s",`, 20) + `"1s"]}`, "invalid_retry_schedule", "1 to 20"},
			{"ScheduleNegative", `{"url":"https://example.com","retry_schedule":["0s","-1s"]}`, "invalid_retry_schedule", "retry_schedule[1]"},
			{"ScheduleTooLate", `{"url":"https://example.com","retry_schedule":["25h"]}`, "invalid_retry_schedule", "0s to 24h"},
			// Durations that are not Go duration strings are refused while the
			// body is decoded (wire.Duration), with the field's own answer.
			{"ScheduleNotDuration", `{"url":"https://example.com","retry_schedule":["0s","soon"]}`, "invalid_retry_schedule", "retry_schedule[1]"},
			{"ScheduleNull", `{"url":"https://example.com","retry_schedule":["0s","1s",null]}`, "invalid_retry_schedule", "retry_schedule[2]"},
			{"ScheduleLongNotDuration", `{"url":"https://example.com","retry_schedule":[` + strings.Repeat(`"1s",`, 20) + `"x"]}`, "invalid_retry_schedule", "1 to 20"},
			{"ScheduleItemNotString", `{"url":"https://example.com","retry_schedule":[1]}`, "invalid_type", "retry_schedule must be a string, not a JSON number"},
			{"TimeoutNotString", `{"url":"https://example.com","timeout":10}`, "invalid_type", "timeout must be a string, not a JSON number"},
			{"TimeoutNotDuration", `{"url":"https://example.com","timeout":"ten seconds"}`, "invalid_timeout", "1s to 60s"},
			{"PolicyBaseNotDuration", `{"url":"https://example.com","retry_policy":{"type":"exponential","base":"x","factor":2,"cap":"1h","attempts":3}}`, "invalid_retry_policy", "retry_policy.base"},
			{"PolicyCapNotDuration", `{"url":"https://example.com","retry_policy":{"type":"exponential","base":"1s","factor":2,"cap":null,"attempts":3}}`, "invalid_retry_policy", "retry_policy.cap"},
			{"ScheduleAndPolicy", `{"url":"https://example.com","retry_schedule":["1s"],"retry_policy":{"type":"exponential","base":"1s","factor":2,"cap":"1h","attempts":3}}`, "invalid_retry_policy", "not both"},
			{"PolicyType", `{"url":"https://example.com","retry_policy":{"type":"linear","base":"1s","factor":2,"cap":"1h","attempts":3}}`, "invalid_retry_policy", "retry_policy.type"},
			{"PolicyFactor", `{"url":"https://example.com","retry_policy":{"type":"exponential","base":"1s","factor":0.5,"cap":"1h","attempts":3}}`, "invalid_retry_policy", "retry_policy.factor"},
			{"PolicyCapBelowBase", `{"url":"https://example.com","retry_policy":{"type":"exponential","base":"1m","factor":2,"cap":"1s","attempts":3}}`, "invalid_retry_policy", "retry_policy.cap"},
			{"PolicyAttempts", `{"url":"https://example.com","retry_policy":{"type":"exponential","base":"1s","factor":2,"cap":"1h","attempts":0}}`, "invalid_retry_policy", "retry_policy.attempts"},
			{"PolicyUnknownField", `{"url":"https://example.com","retry_policy":{"type":"exponential","jitter":true}}`, "unknown_field", `"jitter"`},
			{"RatePerSecond", `{"url":"https://example.com","rate_limit":{"per_second":0,"burst":1}}`, "invalid_rate_limit", "rate_limit.per_second"},
			{"RateBurst", `{"url":"https://example.com","rate_limit":{"per_second":1}}`, "invalid_rate_limit", "rate_limit.burst"},
			{"InFlightZero", `{"url":"https://example.com","max_in_flight":0}`, "invalid_max_in_flight", "1 to 1000"},
			{"InFlightHuge", `{"url":"https://example.com","max_in_flight":1001}`, "invalid_max_in_flight", "1 to 1000"},
			{"Scheme", `{"url":"https://example.com","signature_scheme":"md5"}`, "invalid_signature_scheme", "signature_scheme must be"},
			{"HeaderWebhook", `{"url":"https://example.com","headers":{"webhook-id":"x"}}`, "invalid_headers", "webhook-id"},
			{"HeaderXWebhook", `{"url":"https://example.com","headers":{"X-Webhook-Signature":"x"}}`, "invalid_headers", "X-Webhook-Signature"},
			{"HeaderContentType", `{"url":"https://example.com","headers":{"content-type":"text/plain"}}`, "invalid_headers", "content-type"},
			{"HeaderUserAgent", `{"url":"https://example.com","headers":{"User-Agent":"x"}}`, "invalid_headers", "User-Agent"},
			{"HeaderHost", `{"url":"https://example.com","headers":{"Host":"evil"}}`, "invalid_headers", "Host"},
			{"HeaderName", `{"url":"https://example.com","headers":{"Bad Header":"x"}}`, "invalid_headers", "not a valid header name"},
			{"HeaderValue", `{"url":"https://example.com","headers":{"X-A":"a\r\nX-B: b"}}`, "invalid_headers", "control characters"},
			{"HeaderValuePadded", `{"url":"https://example.com","headers":{"X-A":"a "}}`, "invalid_headers", "must not start or end with a space or tab"},
			{"HeaderNamesDifferInCaseOnly", `{"url":"https://example.com","headers":{"X-Team":"a","x-team":"b"}}`, "invalid_headers", `"X-Team" and "x-team" name the same header`},
			{"StandardSecretNoPrefix", `{"url":"https://example.com","secret":"c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0"}`, "invalid_secret", "whsec_"},
			{"StandardSecretShortKey", `{"url":"https://example.com","secret":"whsec_c2hvcnQ="}`, "invalid_secret", "24 to 64 byte"},
			{"StandardSecretNotBase64", `{"url":"https://example.com","secret":"whsec_not base64 at all!!!!!!!!!!!!"}`, "invalid_secret", "base64"},
			{"HMACSecretShort", `{"url":"https://example.com","signature_scheme":"hmac-sha256","secret":"short"}`, "invalid_secret", "16 to 256"},
			{"UnknownField", `{"url":"https://example.com","colour":"blue"}`, "unknown_field", `"colour"`},
			{"EnabledOnCreate", `{"url":"https://example.com","enabled":false}`, "unknown_field", `"enabled"`},
			{"WrongType", `{"url":"https://example.com","max_in_flight":"10"}`, "invalid_type", "max_in_flight must be an integer"},
			{"WrongTypeNested", `{"url":"https://example.com","rate_limit":{"per_second":"fast","burst":1}}`, "invalid_type", "rate_limit.per_second must be a number"},
			{"NotObject", `["https://example.com"]`, "invalid_json", "JSON object"},
			{"Malformed", `{"url":`, "invalid_json", "not valid JSON"},
			{"Garbage", `url=https://example.com`, "invalid_json", "not valid JSON"},
			{"Trailing", `{"url":"https://example.com"} {}`, "invalid_json", "one JSON object"},
			{"Empty", ``, "invalid_json", "empty"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				msg := e.do("POST", "/v1/endpoints", tc.body).apiErr(http.StatusBadRequest, tc.code)
				require.Contains(t, msg, tc.contains)
			})
		}
		// Nothing invalid was created.
		var list listOut[endpointOut]
		e.do("GET", "/v1/endpoints", nil).must(http.StatusOK, &list)
		require.Empty(t, list.Data)
	})

	t.Run("BodyTooLarge", func(t *testing.T) {
		t.Parallel()
		e := setup(t)
		body := `{"url":"https://example.com","description":"` + strings.Repeat("x", 2<<20) + `"}`
		e.do("POST", "/v1/endpoints", body).apiErr(http.StatusRequestEntityTooLarge, "body_too_large")
	})
}

func TestEndpointList(t *testing.T) {
	t.Parallel()
	e := setup(t)
	var mine []string
	for i := range 5 {
		mine = append(mine, e.createEndpoint(map[string]any{"consumer_id": "cust_a", "description": fmt.Sprint(i)}).ID)
		e.clock.Advance(time.Millisecond)
	}
	e.createEndpoint(map[string]any{"consumer_id": "cust_b"})

	t.Run("PagesNewestFirst", func(t *testing.T) {
		t.Parallel()
		var got []string
		cursor := ""
		pages := 0
		for {
			var page listOut[endpointOut]
			e.do("GET", "/v1/endpoints?consumer_id=cust_a&limit=2&cursor="+cursor, nil).must(http.StatusOK, &page)
			pages++
			require.LessOrEqual(t, len(page.Data), 2)
			for _, ep := range page.Data {
				require.Equal(t, "cust_a", ep.ConsumerID)
				got = append(got, ep.ID)
			}
			if page.NextCursor == "" {
				break
			}
			cursor = page.NextCursor
			require.Less(t, pages, 10, "pagination does not end")
		}
		require.Equal(t, 3, pages)
		want := append([]string(nil), mine...)
		for i, j := 0, len(want)-1; i < j; i, j = i+1, j-1 {
			want[i], want[j] = want[j], want[i]
		}
		require.Equal(t, want, got)
	})

	t.Run("AllConsumers", func(t *testing.T) {
		t.Parallel()
		var page listOut[endpointOut]
		e.do("GET", "/v1/endpoints", nil).must(http.StatusOK, &page)
		require.Len(t, page.Data, 6)
		require.Empty(t, page.NextCursor)
	})

	t.Run("EmptyIsAnEmptyArray", func(t *testing.T) {
		t.Parallel()
		r := e.do("GET", "/v1/endpoints?consumer_id=nobody", nil)
		require.Equal(t, http.StatusOK, r.status)
		require.JSONEq(t, `{"data":[],"next_cursor":""}`, string(r.body))
	})

	t.Run("InvalidParameters", func(t *testing.T) {
		t.Parallel()
		for _, tc := range []struct{ query, code string }{
			{"limit=0", "invalid_limit"},
			{"limit=1001", "invalid_limit"},
			{"limit=ten", "invalid_limit"},
			{"limit=", "invalid_limit"},
			{"cursor=***", "invalid_cursor"},
			{"cursor=bm90LWEtY3Vyc29y", "invalid_cursor"},
			{"consumer=cust_a", "unknown_parameter"},
			{"sort=name", "invalid_sort"},
			{"sort=URL", "invalid_sort"},
			{"include=stats", "invalid_include"},
			{"include=health,stats", "invalid_include"},
		} {
			msg := e.do("GET", "/v1/endpoints?"+tc.query, nil).apiErr(http.StatusBadRequest, tc.code)
			require.NotEmpty(t, msg, tc.query)
		}
		// A cursor of the newest-first order is no cursor of the URL order.
		var page listOut[endpointOut]
		e.do("GET", "/v1/endpoints?limit=1", nil).must(http.StatusOK, &page)
		e.do("GET", "/v1/endpoints?sort=url&cursor="+page.NextCursor, nil).apiErr(http.StatusBadRequest, "invalid_cursor")
		// Nor of an order by figures.
		e.do("GET", "/v1/endpoints?sort=health&cursor="+page.NextCursor, nil).apiErr(http.StatusBadRequest, "invalid_cursor")
	})
}

func TestEndpointListRanked(t *testing.T) {
	t.Parallel()
	e := setup(t)
	var ids []string
	for range 3 {
		ids = append(ids, e.createEndpoint(map[string]any{"consumer_id": "cust_a"}).ID)
		e.clock.Advance(time.Millisecond)
	}
	e.createEndpoint(map[string]any{"consumer_id": "cust_b"})
	// One delivery to each of cust_a's endpoints, due now; the second
	// endpoint's goes dead as it is disabled.
	require.Len(t, e.send("cust_a", "order.created", `{}`).Deliveries, 3)
	e.do("POST", "/v1/endpoints/"+ids[1]+"/disable", `{}`).must(http.StatusOK, nil)
	e.clock.Advance(time.Second)

	walk := func(query string) (got []string) {
		cursor := ""
		for range 10 {
			var page listOut[endpointOut]
			e.do("GET", "/v1/endpoints?consumer_id=cust_a&limit=2&include=health&"+query+"&cursor="+cursor, nil).must(http.StatusOK, &page)
			for _, ep := range page.Data {
				got = append(got, ep.ID)
				if ep.ID == ids[1] {
					require.Equal(t, 1, *ep.Health.Dead, "the figures come with the page")
				}
			}
			if cursor = page.NextCursor; cursor == "" {
				return got
			}
		}
		require.FailNow(t, "pagination does not end")
		return nil
	}
	for _, tc := range []struct {
		query string
		want  []string
	}{
		{"sort=-dead", []string{ids[1], ids[2], ids[0]}},
		{"sort=health", []string{ids[1], ids[0], ids[2]}},
		{"sort=-health", []string{ids[2], ids[0], ids[1]}},
		{"sort=due", []string{ids[0], ids[2], ids[1]}},
	} {
		t.Run(tc.query, func(t *testing.T) {
			require.Equal(t, tc.want, walk(tc.query))
		})
	}
}

func TestEndpointListSorted(t *testing.T) {
	t.Parallel()
	e := setup(t)
	type made struct{ id, consumer, url string }
	var all []made
	for _, m := range []struct{ consumer, url string }{
		{"cust_b", "https://c.example.com/"},
		{"cust_a", "https://a.example.com/2"},
		{"cust_c", "https://b.example.com/"},
		{"cust_a", "https://d.example.com/"},
		{"cust_b", "https://a.example.com/1"},
	} {
		ep := e.createEndpoint(map[string]any{"consumer_id": m.consumer, "url": m.url})
		all = append(all, made{ep.ID, m.consumer, m.url})
		e.clock.Advance(time.Millisecond)
	}
	walk := func(query string) (ids []string) {
		cursor := ""
		for range 10 {
			var page listOut[endpointOut]
			e.do("GET", "/v1/endpoints?limit=2&"+query+"&cursor="+cursor, nil).must(http.StatusOK, &page)
			for _, ep := range page.Data {
				ids = append(ids, ep.ID)
			}
			if cursor = page.NextCursor; cursor == "" {
				return ids
			}
		}
		require.FailNow(t, "pagination does not end")
		return nil
	}
	id := func(i int) string { return all[i].id }
	for _, tc := range []struct {
		query string
		want  []string
	}{
		{"sort=-created", []string{id(4), id(3), id(2), id(1), id(0)}},
		{"", []string{id(4), id(3), id(2), id(1), id(0)}},
		{"sort=created", []string{id(0), id(1), id(2), id(3), id(4)}},
		{"sort=url", []string{id(4), id(1), id(2), id(0), id(3)}},
		{"sort=-url", []string{id(3), id(0), id(2), id(1), id(4)}},
		{"sort=consumer", []string{id(1), id(3), id(0), id(4), id(2)}},
		{"sort=-consumer", []string{id(2), id(4), id(0), id(3), id(1)}},
		{"sort=url&consumer_id=cust_b", []string{id(4), id(0)}},
		{"sort=-url&consumer_id=cust_a&include=health", []string{id(3), id(1)}},
	} {
		t.Run(tc.query, func(t *testing.T) {
			require.Equal(t, tc.want, walk(tc.query))
		})
	}
}

func TestEndpointGetAndDelete(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ep := e.createEndpoint(map[string]any{})

	var got endpointOut
	e.do("GET", "/v1/endpoints/"+ep.ID, nil).must(http.StatusOK, &got)
	require.Equal(t, ep.ID, got.ID)

	msg := e.do("GET", "/v1/endpoints/ep_missing", nil).apiErr(http.StatusNotFound, "not_found")
	require.Contains(t, msg, "ep_missing")

	r := e.do("DELETE", "/v1/endpoints/"+ep.ID, nil)
	require.Equal(t, http.StatusNoContent, r.status)
	require.Empty(t, r.body)
	e.do("GET", "/v1/endpoints/"+ep.ID, nil).apiErr(http.StatusNotFound, "not_found")
	e.do("DELETE", "/v1/endpoints/"+ep.ID, nil).apiErr(http.StatusNotFound, "not_found")
}

func TestEndpointPatch(t *testing.T) {
	t.Parallel()

	t.Run("OnlyFieldsPresentChange", func(t *testing.T) {
		t.Parallel()
		e := setup(t)
		ep := e.createEndpoint(map[string]any{
			"consumer_id": "c1", "description": "first", "timeout": "5s",
			"rate_limit": map[string]any{"per_second": 1, "burst": 2}, "headers": map[string]string{"X-A": "1"},
		})
		e.clock.Advance(time.Minute)
		var got endpointOut
		e.do("PATCH", "/v1/endpoints/"+ep.ID, `{"description":"second","max_in_flight":4}`).must(http.StatusOK, &got)
		require.Equal(t, "second", got.Description)
		require.Equal(t, 4, got.MaxInFlight)
		require.Equal(t, "5s", got.Timeout)
		require.Equal(t, ep.URL, got.URL)
		require.Equal(t, ep.Secret, got.Secret)
		require.Equal(t, ep.RateLimit, got.RateLimit)
		require.Equal(t, ep.Headers, got.Headers)
		require.Equal(t, ep.CreatedAt, got.CreatedAt)
		require.Equal(t, start.Add(time.Minute), got.UpdatedAt)

		var again endpointOut
		e.do("GET", "/v1/endpoints/"+ep.ID, nil).must(http.StatusOK, &again)
		require.Equal(t, got, withoutFigures(again))
	})

	t.Run("NullRestoresDefault", func(t *testing.T) {
		t.Parallel()
		e := setup(t)
		ep := e.createEndpoint(map[string]any{
			"timeout": "5s", "rate_limit": map[string]any{"per_second": 1, "burst": 2},
			"retry_schedule": []string{"1s"}, "event_types": []string{"a.b"}, "description": "d",
		})
		var got endpointOut
		e.do("PATCH", "/v1/endpoints/"+ep.ID,
			`{"timeout":null,"rate_limit":null,"retry_schedule":null,"event_types":null,"description":null}`).must(http.StatusOK, &got)
		require.Equal(t, "10s", got.Timeout)
		require.Nil(t, got.RateLimit)
		require.Equal(t, []string{"0s", "30s", "5m", "30m", "2h", "8h", "24h"}, got.RetrySchedule)
		require.Equal(t, []string{"*"}, got.EventTypes)
		require.Empty(t, got.Description)
	})

	t.Run("PolicyReplacesSchedule", func(t *testing.T) {
		t.Parallel()
		e := setup(t)
		ep := e.createEndpoint(map[string]any{"retry_schedule": []string{"1s", "2s"}})
		var got endpointOut
		e.do("PATCH", "/v1/endpoints/"+ep.ID,
			`{"retry_policy":{"type":"exponential","base":"2s","factor":3,"cap":"10m","attempts":5}}`).must(http.StatusOK, &got)
		require.Nil(t, got.RetrySchedule)
		require.Equal(t, &retryPolicyOut{Type: "exponential", Base: "2s", Factor: 3, Cap: "10m", Attempts: 5}, got.RetryPolicy)
		e.do("PATCH", "/v1/endpoints/"+ep.ID, `{"retry_schedule":["0s","1m"]}`).must(http.StatusOK, &got)
		require.Nil(t, got.RetryPolicy)
		require.Equal(t, []string{"0s", "1m"}, got.RetrySchedule)
	})

	t.Run("ValidatedLikeCreate", func(t *testing.T) {
		t.Parallel()
		e := setup(t)
		ep := e.createEndpoint(map[string]any{})
		path := "/v1/endpoints/" + ep.ID
		e.do("PATCH", path, `{"url":"gopher://x"}`).apiErr(http.StatusBadRequest, "invalid_url")
		e.do("PATCH", path, `{"url":null}`).apiErr(http.StatusBadRequest, "invalid_url")
		e.do("PATCH", path, `{"url":"http://10.0.0.1/x"}`).apiErr(http.StatusBadRequest, "invalid_url")
		e.do("PATCH", path, `{"timeout":"2m"}`).apiErr(http.StatusBadRequest, "invalid_timeout")
		e.do("PATCH", path, `{"event_types":["bad type"]}`).apiErr(http.StatusBadRequest, "invalid_event_types")
		e.do("PATCH", path, `{"headers":{"Content-Length":"1"}}`).apiErr(http.StatusBadRequest, "invalid_headers")
		e.do("PATCH", path, `{"nope":1}`).apiErr(http.StatusBadRequest, "unknown_field")
		for _, field := range []string{"secret", "consumer_id", "enabled", "id", "created_at", "health"} {
			msg := e.do("PATCH", path, `{"`+field+`":"x"}`).apiErr(http.StatusBadRequest, "read_only_field")
			require.True(t, strings.HasPrefix(msg, field+" "), msg)
		}
		msg := e.do("PATCH", path, `{"secret":"x"}`).apiErr(http.StatusBadRequest, "read_only_field")
		require.Contains(t, msg, "rotate-secret")

		var got endpointOut
		e.do("GET", path, nil).must(http.StatusOK, &got)
		require.Equal(t, ep, withoutFigures(got), "a rejected PATCH changes nothing")
	})

	t.Run("SchemeMustFitSecret", func(t *testing.T) {
		t.Parallel()
		e := setup(t)
		ep := e.createEndpoint(map[string]any{"signature_scheme": "hmac-sha256", "secret": "a plain text secret!"})
		path := "/v1/endpoints/" + ep.ID
		msg := e.do("PATCH", path, `{"signature_scheme":"standard"}`).apiErr(http.StatusBadRequest, "invalid_signature_scheme")
		require.Contains(t, msg, "rotate")
		// A generated secret fits both schemes.
		var rotated, got endpointOut
		e.do("POST", path+"/rotate-secret", nil).must(http.StatusOK, &rotated)
		e.do("PATCH", path, `{"signature_scheme":"standard"}`).must(http.StatusOK, &got)
		require.Equal(t, "standard", got.SignatureScheme)
	})

	t.Run("Missing", func(t *testing.T) {
		t.Parallel()
		e := setup(t)
		e.do("PATCH", "/v1/endpoints/ep_missing", `{"description":"x"}`).apiErr(http.StatusNotFound, "not_found")
	})
}

func TestEndpointRotateSecret(t *testing.T) {
	t.Parallel()

	t.Run("MadeSecret", func(t *testing.T) {
		t.Parallel()
		e := setup(t)
		ep := e.createEndpoint(map[string]any{})
		e.clock.Advance(time.Hour)
		var got endpointOut
		e.do("POST", "/v1/endpoints/"+ep.ID+"/rotate-secret", nil).must(http.StatusOK, &got)
		require.NotEqual(t, ep.Secret, got.Secret)
		require.True(t, strings.HasPrefix(got.Secret, "whsec_"))
		require.NotNil(t, got.PreviousSecretExpiresAt)
		require.Equal(t, start.Add(25*time.Hour), *got.PreviousSecretExpiresAt, "the old secret signs for 24 h")

		stored, err := e.store.EndpointGet(t.Context(), ep.ID)
		require.NoError(t, err)
		require.Equal(t, got.Secret, stored.Secret)
		require.Equal(t, ep.Secret, stored.PreviousSecret)
	})

	t.Run("GivenSecret", func(t *testing.T) {
		t.Parallel()
		e := setup(t)
		ep := e.createEndpoint(map[string]any{})
		secret := "whsec_" + base64.StdEncoding.EncodeToString([]byte("abcdefghijklmnopqrstuvwxyz012345"))
		var got endpointOut
		e.do("POST", "/v1/endpoints/"+ep.ID+"/rotate-secret", map[string]any{"secret": secret}).must(http.StatusOK, &got)
		require.Equal(t, secret, got.Secret)
		e.do("POST", "/v1/endpoints/"+ep.ID+"/rotate-secret", `{"secret":"whsec_short"}`).apiErr(http.StatusBadRequest, "invalid_secret")
		e.do("POST", "/v1/endpoints/"+ep.ID+"/rotate-secret", `{"secret":1}`).apiErr(http.StatusBadRequest, "invalid_type")
	})

	t.Run("OldSecretSigns24Hours", func(t *testing.T) {
		t.Parallel()
		e := setup(t)
		ep := e.createEndpoint(map[string]any{})
		path := "/v1/endpoints/" + ep.ID
		var first, second, got endpointOut
		e.do("POST", path+"/rotate-secret", nil).must(http.StatusOK, &first)

		// The endpoint shows when the old secret stops signing, on every read.
		e.do("GET", path, nil).must(http.StatusOK, &got)
		require.Equal(t, start.Add(24*time.Hour), *got.PreviousSecretExpiresAt)
		stored, err := e.store.EndpointGet(t.Context(), ep.ID)
		require.NoError(t, err)
		require.Equal(t, ep.Secret, stored.PreviousSecret, "the old secret still signs")
		require.Equal(t, start.Add(24*time.Hour), stored.PreviousSecretExpiresAt.UTC())

		// Rotating again: the secret just replaced signs for the next 24 h.
		e.clock.Advance(2 * time.Hour)
		e.do("POST", path+"/rotate-secret", nil).must(http.StatusOK, &second)
		require.Equal(t, start.Add(26*time.Hour), *second.PreviousSecretExpiresAt)
		stored, err = e.store.EndpointGet(t.Context(), ep.ID)
		require.NoError(t, err)
		require.Equal(t, first.Secret, stored.PreviousSecret)
		require.Equal(t, second.Secret, stored.Secret)

		// Other changes keep the rotation as it is.
		e.do("PATCH", path, `{"description":"x"}`).must(http.StatusOK, &got)
		require.Equal(t, start.Add(26*time.Hour), *got.PreviousSecretExpiresAt)
		require.Equal(t, second.Secret, got.Secret)
	})

	t.Run("Missing", func(t *testing.T) {
		t.Parallel()
		e := setup(t)
		e.do("POST", "/v1/endpoints/ep_missing/rotate-secret", nil).apiErr(http.StatusNotFound, "not_found")
	})
}

func TestEndpointEnableDisableReplay(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ep := e.createEndpoint(map[string]any{"consumer_id": "c1"})
	path := "/v1/endpoints/" + ep.ID
	ev := e.send("c1", "order.created", `{"n":1}`)
	require.Len(t, ev.Deliveries, 1)
	dlv := "/v1/deliveries/" + ev.Deliveries[0].ID

	var got endpointOut
	e.do("POST", path+"/disable", `{"reason":"maintenance"}`).must(http.StatusOK, &got)
	require.False(t, got.Enabled)
	require.Equal(t, "maintenance", got.DisabledReason)

	var d deliveryOut
	e.do("GET", dlv, nil).must(http.StatusOK, &d)
	require.Equal(t, "dead", d.Status)
	require.Equal(t, "endpoint_disabled", *d.DeadReason)

	msg := e.do("POST", path+"/replay", nil).apiErr(http.StatusConflict, "conflict")
	require.Contains(t, msg, "disabled")

	e.do("POST", path+"/enable", nil).must(http.StatusOK, &got)
	require.True(t, got.Enabled)
	require.Empty(t, got.DisabledReason)

	t.Run("InvalidFilter", func(t *testing.T) {
		e.do("POST", path+"/replay", `{"status":"pending"}`).apiErr(http.StatusBadRequest, "invalid_status")
		e.do("POST", path+"/replay", `{"since":"yesterday"}`).apiErr(http.StatusBadRequest, "invalid_since")
		e.do("POST", path+"/replay", `{"until":"2024-05-01"}`).apiErr(http.StatusBadRequest, "invalid_until")
		e.do("POST", path+"/replay", `{"since":"2024-05-02T00:00:00Z","until":"2024-05-01T00:00:00Z"}`).apiErr(http.StatusBadRequest, "invalid_until")
		e.do("POST", path+"/replay", `{"state":"dead"}`).apiErr(http.StatusBadRequest, "unknown_field")
		e.do("POST", path+"/enable", `{"force":true}`).apiErr(http.StatusBadRequest, "unknown_field")
	})

	t.Run("WindowExcludes", func(t *testing.T) {
		var out replayedOut
		e.do("POST", path+"/replay", `{"status":"dead","since":"2024-05-01T12:00:01Z"}`).must(http.StatusOK, &out)
		require.Equal(t, replayedOut{Replayed: 0}, out)
	})

	var out replayedOut
	e.do("POST", path+"/replay", `{"status":"dead","since":"2024-05-01T00:00:00Z","until":"2024-05-02T00:00:00Z"}`).must(http.StatusOK, &out)
	require.Equal(t, replayedOut{Replayed: 1}, out)
	e.do("GET", dlv, nil).must(http.StatusOK, &d)
	require.Equal(t, "pending", d.Status)
	require.Nil(t, d.DeadReason)

	e.do("POST", path+"/replay", nil).must(http.StatusOK, &out)
	require.Equal(t, replayedOut{Replayed: 0}, out, "nothing dead is left")

	e.do("POST", "/v1/endpoints/ep_missing/replay", nil).apiErr(http.StatusNotFound, "not_found")
	e.do("POST", "/v1/endpoints/ep_missing/enable", nil).apiErr(http.StatusNotFound, "not_found")
	e.do("POST", "/v1/endpoints/ep_missing/disable", nil).apiErr(http.StatusNotFound, "not_found")
}

// TestConsumerEndpointLimit: a consumer's key makes endpoints for its
// consumer up to MaxEndpointsPerConsumer, then answers 409
// too_many_endpoints and makes nothing; room comes back when one is
// deleted. An operator key is not held to it, and another consumer has
// room of its own.
func TestConsumerEndpointLimit(t *testing.T) {
	t.Parallel()
	e := setup(t, func(o *options) { o.maxEndpoints = 3 })
	key := e.createKey("consumer", "c1").Key
	body := `{"url":"https://example.com/hooks"}`
	var made []string
	for range 3 {
		var ep endpointOut
		e.doKey(key, "POST", "/v1/endpoints", body).must(http.StatusCreated, &ep)
		made = append(made, ep.ID)
	}
	r := e.doKey(key, "POST", "/v1/endpoints", body)
	r.apiErr(http.StatusConflict, "too_many_endpoints")
	require.Contains(t, string(r.body), "consumer c1 has 3 endpoints")
	var list struct{ Data []endpointOut }
	e.doKey(key, "GET", "/v1/endpoints", nil).must(http.StatusOK, &list)
	require.Len(t, list.Data, 3, "the refused call made nothing")

	e.createEndpoint(map[string]any{"consumer_id": "c1"}) // the operator's key
	e.doKey(key, "POST", "/v1/endpoints", body).apiErr(http.StatusConflict, "too_many_endpoints")

	other := e.createKey("consumer", "c2").Key
	e.doKey(other, "POST", "/v1/endpoints", body).must(http.StatusCreated, nil)

	e.doKey(key, "DELETE", "/v1/endpoints/"+made[0], nil).must(http.StatusNoContent, nil)
	e.doKey(key, "DELETE", "/v1/endpoints/"+made[1], nil).must(http.StatusNoContent, nil)
	e.doKey(key, "POST", "/v1/endpoints", body).must(http.StatusCreated, nil)
}
