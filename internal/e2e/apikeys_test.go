package e2e

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// callAs makes an API call to node with key and returns the status and the
// answer's bytes.
func callAs(t *testing.T, node *env, key, method, path, body string) (int, []byte) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, node.api.URL+path, rd)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, raw
}

// TestConsumerKeys: through the whole app, a consumer key made with the
// configured operator key reaches its consumer's data alone, on every node,
// and once revoked is refused by every node at its next call. On
// PostgreSQL a second node serves the API beside the first; SQLite is one
// node.
func TestConsumerKeys(t *testing.T) {
	t.Parallel()
	backends(t, func(t *testing.T, db string) {
		e := setup(t, db)
		nodes := []*env{e}
		if strings.HasPrefix(db, "postgres") {
			nodes = append(nodes, setup(t, db, func(o *options) { o.noDispatch = true }))
		}
		mine := e.createEndpoint(map[string]any{"consumer_id": "cust_a", "url": "https://a.example.com/hooks"})
		theirs := e.createEndpoint(map[string]any{"consumer_id": "cust_b", "url": "https://b.example.com/hooks"})
		e.send("cust_a", "order.created", `{"n":1}`)
		e.send("cust_b", "order.created", `{"n":2}`)

		var key struct {
			ID  string `json:"id"`
			Key string `json:"key"`
		}
		e.must(http.StatusCreated, "POST", "/v1/api-keys", map[string]any{"name": "cust_a", "scope": "consumer", "consumer_id": "cust_a"}, &key)

		for _, node := range nodes {
			status, raw := callAs(t, node, key.Key, "GET", "/v1/endpoints", "")
			require.Equal(t, http.StatusOK, status, "%s", raw)
			require.Contains(t, string(raw), mine.ID)
			require.NotContains(t, string(raw), theirs.ID)
			require.NotContains(t, string(raw), "cust_b")

			status, raw = callAs(t, node, key.Key, "GET", "/v1/endpoints/"+theirs.ID, "")
			require.Equal(t, http.StatusNotFound, status, "%s", raw)

			status, raw = callAs(t, node, key.Key, "GET", "/v1/stats", "")
			require.Equal(t, http.StatusOK, status, "%s", raw)
			var st struct {
				Deliveries map[string]int64 `json:"deliveries"`
			}
			require.NoError(t, json.Unmarshal(raw, &st))
			var total int64
			for _, n := range st.Deliveries {
				total += n
			}
			require.Equal(t, int64(1), total, "cust_a's one delivery: %s", raw)

			status, raw = callAs(t, node, key.Key, "POST", "/v1/events", `{"consumer_id":"cust_a","event_type":"a","payload":{}}`)
			require.Equal(t, http.StatusForbidden, status, "%s", raw)
		}

		e.must(http.StatusNoContent, "DELETE", "/v1/api-keys/"+key.ID, nil, nil)
		for _, node := range nodes {
			status, raw := callAs(t, node, key.Key, "GET", "/v1/endpoints", "")
			require.Equal(t, http.StatusUnauthorized, status, "a revoked key on every node: %s", raw)
		}
		// The configured key is an operator key, as before.
		for _, node := range nodes {
			status, raw := callAs(t, node, testAPIKey, "GET", "/v1/api-keys", "")
			require.Equal(t, http.StatusOK, status, "%s", raw)
		}
	})
}
