package e2e

import (
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
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

		// Opening the link (its page, then its button) follows its 303 to
		// the signed-in page.
		status, body := openLink(t, browser, onLast)
		require.Equal(t, http.StatusOK, status, body)
		require.Contains(t, body, "Signed in as consumer cust_42")
		for _, node := range nodes {
			status, body = get(browser, node.api.URL+"/portal/")
			require.Equal(t, http.StatusOK, status, body)
			require.Contains(t, body, "cust_42")
		}
		// The link opens once, on any node.
		for _, node := range nodes {
			status, body = openLink(t, &http.Client{}, node.api.URL+strings.TrimPrefix(link.URL, e.api.URL))
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

var (
	openAction = regexp.MustCompile(`<form method="post" action="([^"]+)" id="open-form">`)
	openCSRF   = regexp.MustCompile(`name="csrf_token" value="([^"]+)"`)
)

// openLink opens the portal link u with c as a browser does: its page
// (which opens nothing by itself), then its button, a form POST from the
// page's origin. It returns the final answer's status and body.
func openLink(t *testing.T, c *http.Client, u string) (int, string) {
	t.Helper()
	res, err := c.Get(u)
	require.NoError(t, err)
	page, err := io.ReadAll(res.Body)
	res.Body.Close()
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, res.StatusCode, string(page))
	require.Empty(t, res.Header.Values("Set-Cookie"), "the link's page sets no cookie")
	action, csrf := openAction.FindStringSubmatch(string(page)), openCSRF.FindStringSubmatch(string(page))
	require.NotNil(t, action, string(page))
	require.NotNil(t, csrf, string(page))
	base, err := url.Parse(u)
	require.NoError(t, err)
	origin := base.Scheme + "://" + base.Host
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, origin+action[1],
		strings.NewReader(url.Values{"csrf_token": {csrf[1]}}.Encode()))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", origin)
	res, err = c.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	return res.StatusCode, string(body)
}
