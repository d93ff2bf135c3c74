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

// TestDashboardSessionsAcrossNodes: a dashboard session opened on one node
// reads /ui/ on every node; signing out on another node, or revoking the
// key it was opened with, ends it on every node at its next request. On
// PostgreSQL a second node serves beside the first; SQLite is one node.
func TestDashboardSessionsAcrossNodes(t *testing.T) {
	t.Parallel()
	backends(t, func(t *testing.T, db string) {
		e := setup(t, db, func(o *options) { o.noDispatch = true })
		nodes := []*env{e}
		if strings.HasPrefix(db, "postgres") {
			nodes = append(nodes, setup(t, db, func(o *options) { o.noDispatch = true }))
		}
		last := nodes[len(nodes)-1]
		var key struct {
			ID  string `json:"id"`
			Key string `json:"key"`
		}
		e.must(http.StatusCreated, "POST", "/v1/api-keys", map[string]any{"name": "ops", "scope": "operator"}, &key)

		jar, err := cookiejar.New(nil)
		require.NoError(t, err)
		// Cookies go to a host whatever its port, so one jar reaches every node.
		browser := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		do := func(method, u string, form url.Values) (int, string) {
			t.Helper()
			req, err := http.NewRequest(method, u, strings.NewReader(form.Encode()))
			require.NoError(t, err)
			if form != nil {
				req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			}
			resp, err := browser.Do(req)
			require.NoError(t, err)
			defer resp.Body.Close()
			raw, err := io.ReadAll(resp.Body)
			require.NoError(t, err)
			return resp.StatusCode, string(raw)
		}
		signIn := func() {
			t.Helper()
			status, body := do("POST", e.api.URL+"/ui/sign-in", url.Values{"api_key": {key.Key}})
			require.Equal(t, http.StatusSeeOther, status, body)
			for _, node := range nodes {
				status, body = do("GET", node.api.URL+"/ui/", nil)
				require.Equal(t, http.StatusOK, status, body)
				require.Contains(t, body, "operator key "+key.ID)
			}
		}
		signedOut := func(why string) {
			t.Helper()
			for _, node := range nodes {
				status, _ := do("GET", node.api.URL+"/ui/", nil)
				require.Equal(t, http.StatusSeeOther, status, why)
			}
		}

		signIn()
		_, page := do("GET", last.api.URL+"/ui/", nil)
		csrf := regexp.MustCompile(`name="csrf_token" value="([^"]+)"`).FindStringSubmatch(page)
		require.NotNil(t, csrf)
		status, body := do("POST", last.api.URL+"/ui/sign-out", url.Values{"csrf_token": {csrf[1]}})
		require.Equal(t, http.StatusSeeOther, status, body)
		signedOut("signed out on the last node")

		signIn()
		e.must(http.StatusNoContent, "DELETE", "/v1/api-keys/"+key.ID, nil, nil)
		signedOut("its key revoked")
	})
}
