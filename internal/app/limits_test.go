package app

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/heraldhooks/herald/internal/config"
	"github.com/heraldhooks/herald/internal/store/sqlitestore/sqlitetest"
)

// TestRequestLimitsReachTheAPI: --consumer-rate-limit and
// --operator-rate-limit hold the keys of a node as configured: a consumer
// key past its burst answers 429 rate_limited, the operator key only when
// it has a limit of its own; a second node over the same database holds
// the key to the same budget.
func TestRequestLimitsReachTheAPI(t *testing.T) {
	t.Parallel()
	cfg := config.Default()
	cfg.DB = "sqlite://" + sqlitetest.Path(t)
	cfg.APIKey = listenTestKey
	cfg.ConsumerRateLimit = "1/m,burst=2"
	cfg.OperatorRateLimit = "1/m,burst=5"
	a, err := New(t.Context(), cfg, Deps{}, true)
	require.NoError(t, err)
	t.Cleanup(func() { a.Close() })
	srv := httptest.NewServer(a.Handler)
	t.Cleanup(srv.Close)
	call := func(srv *httptest.Server, key, method, path, body string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("Content-Type", "application/json")
		res, err := srv.Client().Do(req)
		require.NoError(t, err)
		defer res.Body.Close()
		b, err := io.ReadAll(res.Body)
		require.NoError(t, err)
		return res.StatusCode, string(b)
	}
	status, body := call(srv, listenTestKey, "POST", "/v1/api-keys", `{"name":"c1","scope":"consumer","consumer_id":"c1"}`)
	require.Equal(t, http.StatusCreated, status, body)
	var key struct {
		Key string `json:"key"`
	}
	require.NoError(t, json.Unmarshal([]byte(body), &key))
	for range 2 {
		status, body = call(srv, key.Key, "GET", "/v1/endpoints", "")
		require.Equal(t, http.StatusOK, status, body)
	}
	status, body = call(srv, key.Key, "GET", "/v1/endpoints", "")
	require.Equal(t, http.StatusTooManyRequests, status, body)
	require.Contains(t, body, `"rate_limited"`)

	// A second node on the same database file, with a store of its own,
	// spends the same budget: the key has none left there either.
	b, err := New(t.Context(), cfg, Deps{}, true)
	require.NoError(t, err)
	t.Cleanup(func() { b.Close() })
	other := httptest.NewServer(b.Handler)
	t.Cleanup(other.Close)
	status, body = call(other, key.Key, "GET", "/v1/endpoints", "")
	require.Equal(t, http.StatusTooManyRequests, status, body)

	for range 4 { // the operator spent one making the key
		status, body = call(srv, listenTestKey, "GET", "/v1/stats", "")
		require.Equal(t, http.StatusOK, status, body)
	}
	status, body = call(srv, listenTestKey, "GET", "/v1/stats", "")
	require.Equal(t, http.StatusTooManyRequests, status, body)
}
