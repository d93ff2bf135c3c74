package api_test

import (
	"crypto/sha256"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhooks/herald/internal/api"
)

// apiKeyOut is an API key as answers show it; Key is set only by the
// answer that made it.
type apiKeyOut struct {
	ID         string     `json:"id"`
	Name       string     `json:"name"`
	Scope      string     `json:"scope"`
	ConsumerID *string    `json:"consumer_id"`
	Key        string     `json:"key"`
	Prefix     string     `json:"prefix"`
	CreatedAt  time.Time  `json:"created_at"`
	LastUsedAt *time.Time `json:"last_used_at"`
}

// createKey makes an API key of scope (for consumer, when a consumer key)
// with the operator key.
func (e *env) createKey(scope, consumer string) apiKeyOut {
	e.t.Helper()
	body := map[string]any{"name": scope + " key " + consumer, "scope": scope}
	if consumer != "" {
		body["consumer_id"] = consumer
	}
	var k apiKeyOut
	e.do("POST", "/v1/api-keys", body).must(http.StatusCreated, &k)
	require.NotEmpty(e.t, k.Key)
	return k
}

func TestAPIKeys(t *testing.T) {
	t.Parallel()

	t.Run("CreateShowsTheKeyOnce", func(t *testing.T) {
		t.Parallel()
		e := setup(t)
		var k apiKeyOut
		e.do("POST", "/v1/api-keys", `{"name":"cust_42 integration","scope":"consumer","consumer_id":"cust_42"}`).must(http.StatusCreated, &k)
		require.Regexp(t, `^key_[0-9a-z]{26}$`, k.ID)
		require.Regexp(t, `^hk_[A-Za-z0-9_-]{43}$`, k.Key)
		require.Equal(t, k.Key[:12], k.Prefix)
		require.Equal(t, "cust_42 integration", k.Name)
		require.Equal(t, "consumer", k.Scope)
		require.Equal(t, "cust_42", *k.ConsumerID)
		require.Equal(t, start, k.CreatedAt)
		require.Nil(t, k.LastUsedAt)

		got := e.do("GET", "/v1/api-keys/"+k.ID, nil)
		got.must(http.StatusOK, nil)
		require.NotContains(t, string(got.body), k.Key, "the key is shown only when made")
		require.NotContains(t, keysOf(t, got.body), "key")
		list := e.do("GET", "/v1/api-keys", nil)
		require.NotContains(t, string(list.body), k.Key)

		// Herald keeps its hash, not the key.
		stored, err := e.store.APIKeyGet(t.Context(), k.ID)
		require.NoError(t, err)
		require.Equal(t, sha256.Sum256([]byte(k.Key)), stored.Hash)

		var op apiKeyOut
		e.do("POST", "/v1/api-keys", `{"name":"deploys","scope":"operator"}`).must(http.StatusCreated, &op)
		require.Nil(t, op.ConsumerID)
		require.NotEqual(t, k.Key, op.Key)
	})

	t.Run("Invalid", func(t *testing.T) {
		t.Parallel()
		e := setup(t)
		for _, tc := range []struct{ body, code, want string }{
			{`{"scope":"operator"}`, "invalid_name", "name is required"},
			{`{"name":"  ","scope":"operator"}`, "invalid_name", "name"},
			{`{"name":"` + strings.Repeat("n", 201) + `","scope":"operator"}`, "invalid_name", "200"},
			{`{"name":"a\u0007b","scope":"operator"}`, "invalid_name", "control"},
			{`{"name":"a"}`, "invalid_scope", "scope is required"},
			{`{"name":"a","scope":"admin"}`, "invalid_scope", `"operator"`},
			{`{"name":"a","scope":"consumer"}`, "invalid_consumer_id", "required for a consumer key"},
			{`{"name":"a","scope":"consumer","consumer_id":""}`, "invalid_consumer_id", "consumer_id must be"},
			{`{"name":"a","scope":"operator","consumer_id":"c1"}`, "invalid_consumer_id", "consumer keys only"},
			{`{"name":"a","scope":"operator","key":"hk_mine"}`, "unknown_field", `"key"`},
			{`{"name":1,"scope":"operator"}`, "invalid_type", "name"},
		} {
			msg := e.do("POST", "/v1/api-keys", tc.body).apiErr(http.StatusBadRequest, tc.code)
			require.Contains(t, msg, tc.want, tc.body)
		}
		var page listOut[apiKeyOut]
		e.do("GET", "/v1/api-keys", nil).must(http.StatusOK, &page)
		require.Empty(t, page.Data, "nothing made")
	})

	t.Run("ListPagesNewestFirstAndFilters", func(t *testing.T) {
		t.Parallel()
		e := setup(t)
		var want, ofC1 []string
		for i, consumer := range []string{"c1", "c2", "", "c1", "c1"} {
			e.clock.Advance(time.Duration(i) * time.Millisecond)
			scope := "consumer"
			if consumer == "" {
				scope = "operator"
			}
			k := e.createKey(scope, consumer)
			want = append([]string{k.ID}, want...)
			if consumer == "c1" {
				ofC1 = append([]string{k.ID}, ofC1...)
			}
		}
		var got []string
		cursor := ""
		for {
			var page listOut[apiKeyOut]
			e.do("GET", "/v1/api-keys?limit=2&cursor="+cursor, nil).must(http.StatusOK, &page)
			for _, k := range page.Data {
				require.Empty(t, k.Key)
				got = append(got, k.ID)
			}
			if cursor = page.NextCursor; cursor == "" {
				break
			}
		}
		require.Equal(t, want, got)
		var page listOut[apiKeyOut]
		e.do("GET", "/v1/api-keys?consumer_id=c1", nil).must(http.StatusOK, &page)
		require.Len(t, page.Data, len(ofC1))
		for i, k := range page.Data {
			require.Equal(t, ofC1[i], k.ID)
		}
		e.do("GET", "/v1/api-keys?scope=consumer", nil).apiErr(http.StatusBadRequest, "unknown_parameter")
	})

	t.Run("KeysAuthenticateUntilRevoked", func(t *testing.T) {
		t.Parallel()
		e := setup(t)
		op := e.createKey("operator", "")
		cons := e.createKey("consumer", "c1")
		e.doKey(op.Key, "GET", "/v1/api-keys", nil).must(http.StatusOK, nil)
		e.doKey(cons.Key, "GET", "/v1/endpoints", nil).must(http.StatusOK, nil)

		// An operator key made through the API may make and revoke keys.
		var made apiKeyOut
		e.doKey(op.Key, "POST", "/v1/api-keys", `{"name":"by a made key","scope":"consumer","consumer_id":"c2"}`).must(http.StatusCreated, &made)
		e.doKey(op.Key, "DELETE", "/v1/api-keys/"+cons.ID, nil).must(http.StatusNoContent, nil)

		r := e.doKey(cons.Key, "GET", "/v1/endpoints", nil)
		r.apiErr(http.StatusUnauthorized, "unauthorized")
		require.Equal(t, `Bearer realm="herald"`, r.header.Get("WWW-Authenticate"))
		e.do("GET", "/v1/api-keys/"+cons.ID, nil).apiErr(http.StatusNotFound, "not_found")
		e.do("DELETE", "/v1/api-keys/"+cons.ID, nil).apiErr(http.StatusNotFound, "not_found")
		e.doKey(made.Key, "GET", "/v1/endpoints", nil).must(http.StatusOK, nil)
		// The configured operator key is no stored key, and keeps working.
		e.do("GET", "/v1/api-keys", nil).must(http.StatusOK, nil)
		e.doKey(op.Key+"x", "GET", "/v1/stats", nil).apiErr(http.StatusUnauthorized, "unauthorized")
	})

	t.Run("RevokedAtOnceOnEveryNode", func(t *testing.T) {
		t.Parallel()
		e := setup(t)
		// A second node: another server over the same database.
		other := httptest.NewServer(api.New(api.Config{Store: e.store, Clock: e.clock, APIKeyHash: sha256.Sum256([]byte(testKey))}))
		t.Cleanup(other.Close)
		k := e.createKey("consumer", "c1")
		call := func(url string) int {
			req, err := http.NewRequest("GET", url+"/v1/stats", nil)
			require.NoError(t, err)
			req.Header.Set("Authorization", "Bearer "+k.Key)
			res, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			res.Body.Close()
			return res.StatusCode
		}
		require.Equal(t, http.StatusOK, call(other.URL))
		require.Equal(t, http.StatusOK, call(e.url))
		e.do("DELETE", "/v1/api-keys/"+k.ID, nil).must(http.StatusNoContent, nil)
		require.Equal(t, http.StatusUnauthorized, call(other.URL), "the other node refuses it at once")
		require.Equal(t, http.StatusUnauthorized, call(e.url))
	})

	t.Run("LastUsedWrittenAtMostOnceAMinute", func(t *testing.T) {
		t.Parallel()
		e := setup(t)
		k := e.createKey("consumer", "c1")
		lastUsed := func() *time.Time {
			t.Helper()
			var got apiKeyOut
			e.do("GET", "/v1/api-keys/"+k.ID, nil).must(http.StatusOK, &got)
			return got.LastUsedAt
		}
		require.Nil(t, lastUsed())
		e.clock.Advance(time.Second)
		first := start.Add(time.Second)
		e.doKey(k.Key, "GET", "/v1/stats", nil).must(http.StatusOK, nil)
		require.Equal(t, first, *lastUsed())
		e.clock.Advance(59 * time.Second)
		e.doKey(k.Key, "GET", "/v1/stats", nil).must(http.StatusOK, nil)
		require.Equal(t, first, *lastUsed(), "not written again within the minute")
		e.clock.Advance(time.Second)
		e.doKey(k.Key, "GET", "/v1/stats", nil).must(http.StatusOK, nil)
		require.Equal(t, first.Add(time.Minute), *lastUsed())
	})

	t.Run("OperatorOnly", func(t *testing.T) {
		t.Parallel()
		e := setup(t)
		k := e.createKey("consumer", "c1")
		for _, c := range []struct{ method, path, body string }{
			{"POST", "/v1/api-keys", `{"name":"mine","scope":"consumer","consumer_id":"c1"}`},
			{"POST", "/v1/api-keys", `{"name":"escalate","scope":"operator"}`},
			{"GET", "/v1/api-keys", ""},
			{"GET", "/v1/api-keys/" + k.ID, ""},
			{"DELETE", "/v1/api-keys/" + k.ID, ""},
		} {
			var body any
			if c.body != "" {
				body = c.body
			}
			msg := e.doKey(k.Key, c.method, c.path, body).apiErr(http.StatusForbidden, "forbidden")
			require.Contains(t, msg, "operator key", "%s %s", c.method, c.path)
		}
		var page listOut[apiKeyOut]
		e.do("GET", "/v1/api-keys", nil).must(http.StatusOK, &page)
		require.Len(t, page.Data, 1, "the consumer key made no key and revoked none")
	})
}
