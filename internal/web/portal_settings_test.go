package web_test

import (
	"html"
	"net/http"
	"net/url"
	"testing"

	"github.com/stretchr/testify/require"
)

type notificationsJSON struct {
	Email *string `json:"email"`
}

// TestPortalSettings: the consumer sets, changes and clears the address
// its notices are mailed to, sees a refused address with the API's reason
// (and nothing stored), and reaches its own consumer's address only.
func TestPortalSettings(t *testing.T) {
	t.Parallel()
	e := setup(t, false)
	e.operator(t, "PUT", "/v1/consumers/cust_7/notifications", `{"email":"seven@example.com"}`, http.StatusOK, nil)
	p := e.openPortal(t, "cust_42")
	address := func(consumer string) *string {
		var got notificationsJSON
		e.operator(t, "GET", "/v1/consumers/"+consumer+"/notifications", "", http.StatusOK, &got)
		return got.Email
	}

	home := p.get("/portal/")
	require.Contains(t, home.body, `href="/portal/settings"`, "the nav links to the settings")

	a := p.get("/portal/settings")
	require.Equal(t, http.StatusOK, a.status, a.body)
	require.Contains(t, a.body, `id="email" name="email" value=""`)
	require.Contains(t, a.body, "Never set.")
	require.NotContains(t, a.body, "seven@example.com", "another consumer's address")

	a = p.follow(p.post("/portal/settings", url.Values{"email": {"ops@example.com"}}))
	require.Equal(t, http.StatusOK, a.status, a.body)
	require.Contains(t, a.body, "notices about your endpoints go to ops@example.com")
	require.Contains(t, a.body, `value="ops@example.com"`)
	require.Contains(t, a.body, "Last changed")
	require.Equal(t, "ops@example.com", *address("cust_42"))

	a = p.post("/portal/settings", url.Values{"email": {"Ops <evil@example.com>"}})
	require.Equal(t, http.StatusBadRequest, a.status, a.body)
	require.Contains(t, a.body, `id="form-error"`)
	require.Contains(t, html.UnescapeString(a.body), "email: give the bare address")
	require.Contains(t, html.UnescapeString(a.body), `value="Ops <evil@example.com>"`, "what was typed stays in the form")
	require.Equal(t, "ops@example.com", *address("cust_42"), "a refused address changes nothing")

	// Without the page's CSRF token nothing changes.
	bad := call(t, p.b, "POST", e.srv.URL+"/portal/settings", "", url.Values{"email": {"x@example.com"}}.Encode(),
		map[string]string{"Content-Type": "application/x-www-form-urlencoded", "Origin": e.srv.URL, "Sec-Fetch-Site": "same-origin"})
	require.Equal(t, http.StatusForbidden, bad.status, bad.body)
	require.Equal(t, "ops@example.com", *address("cust_42"))

	a = p.follow(p.post("/portal/settings", url.Values{"email": {""}}))
	require.Contains(t, a.body, "no notices will be mailed")
	require.Nil(t, address("cust_42"))
	require.Equal(t, "seven@example.com", *address("cust_7"), "another consumer's address is untouched")
}
