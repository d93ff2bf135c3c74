package e2e

import (
	"io"
	"net/http"
	"net/http/cookiejar"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestPortalSessionsAcrossNodes: through the whole app, herald serve serves
// /portal beside the API. A link made on one node opens once, on any node;
// the session it gives reads the portal as its consumer on every node; a
// revocation on one node ends it on every node at its next request. On
// PostgreSQL a second node serves beside the first; SQLite is one node.
func TestPortalSessionsAcrossNodes(t *testing.T) {
	t.Parallel()
	backends(t, func(t *testing.T, db string) {
		e := setup(t, db, func(o *options) { o.noDispatch = true })
		nodes := []*env{e}
		if strings.HasPrefix(db, "postgres") {
			nodes = append(nodes, setup(t, db, func(o *options) { o.noDispatch = true }))
		}
		last := nodes[len(nodes)-1]

		var link struct {
			URL string `json:"url"`
		}
		e.must(http.StatusCreated, "POST", "/v1/consumers/cust_42/portal-sessions", map[string]any{"ttl": "5m"}, &link)
		require.True(t, strings.HasPrefix(link.URL, e.api.URL+"/portal/"), link.URL)
		onLast := last.api.URL + strings.TrimPrefix(link.URL, e.api.URL)

		jar, err := cookiejar.New(nil)
		require.NoError(t, err)
		browser := &http.Client{Jar: jar}
		get := func(c *http.Client, url string) (int, string) {
			t.Helper()
			resp, err := c.Get(url)
			require.NoError(t, err)
			defer resp.Body.Close()
			raw, err := io.ReadAll(resp.Body)
			require.NoError(t, err)
			return resp.StatusCode, string(raw)
		}

		// Opening the link follows its 303 to the signed-in page.
		status, body := get(browser, onLast)
		require.Equal(t, http.StatusOK, status, body)
		require.Contains(t, body, "Signed in as consumer cust_42")
		for _, node := range nodes {
			status, body = get(browser, node.api.URL+"/portal/")
			require.Equal(t, http.StatusOK, status, body)
			require.Contains(t, body, "cust_42")
		}
		// The link opens once, on any node.
		for _, node := range nodes {
			status, body = get(&http.Client{}, node.api.URL+strings.TrimPrefix(link.URL, e.api.URL))
			require.Equal(t, http.StatusGone, status)
			require.Contains(t, body, "already used")
		}

		e.must(http.StatusOK, "DELETE", "/v1/consumers/cust_42/portal-sessions", nil, nil)
		for _, node := range nodes {
			status, _ = get(browser, node.api.URL+"/portal/")
			require.Equal(t, http.StatusUnauthorized, status)
		}
	})
}
