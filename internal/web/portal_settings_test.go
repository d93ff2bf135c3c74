package web_test

import (
	"html"
	"net/http"
	"net/url"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhooks/herald/internal/auth"
	"github.com/heraldhooks/herald/internal/notice/smtptest"
)

type noticeAddressJSON struct {
	Email  *string `json:"email"`
	Status *string `json:"status"`
}

// TestPortalSettings: the consumer sets, changes and clears the address
// its notices are mailed to, sees a refused address with the API's reason
// (and nothing stored), and reaches its own consumer's address only.
// Without mail on the server the address is kept pending, and the page
// says no confirmation can be sent.
func TestPortalSettings(t *testing.T) {
	t.Parallel()
	e := setup(t, false)
	e.operator(t, "PUT", "/v1/consumers/cust_7/notifications", `{"email":"seven@example.com"}`, http.StatusOK, nil)
	p := e.openPortal(t, "cust_42")
	address := func(consumer string) *string {
		var got noticeAddressJSON
		e.operator(t, "GET", "/v1/consumers/"+consumer+"/notifications", "", http.StatusOK, &got)
		return got.Email
	}

	home := p.get("/portal/")
	require.Contains(t, home.body, `href="/portal/settings"`, "the nav links to the settings")

	a := p.get("/portal/settings")
	require.Equal(t, http.StatusOK, a.status, a.body)
	require.Contains(t, a.body, `id="email" name="email" value=""`)
	require.Contains(t, a.body, "Never set.")
	require.NotContains(t, a.body, `id="email-status"`)
	require.NotContains(t, a.body, "seven@example.com", "another consumer's address")

	a = p.follow(p.post("/portal/settings", url.Values{"email": {"ops@example.com"}}))
	require.Equal(t, http.StatusOK, a.status, a.body)
	require.Contains(t, a.body, "Saved. Mail is not configured on this server")
	require.Contains(t, a.body, `value="ops@example.com"`)
	require.Contains(t, a.body, "Last changed")
	require.Regexp(t, `id="email-status">pending<`, a.body)
	require.Contains(t, a.body, `id="mail-off"`)
	require.NotContains(t, a.body, `id="resend-confirmation"`, "without mail there is nothing to resend")
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

// confirmLinkRE finds the confirmation link in a mail.
var confirmLinkRE = regexp.MustCompile(`http://\S+/portal/confirm\?\S+`)

// TestPortalConfirmation: an address saved in the portal is pending and
// mailed a link; opening the link (a GET, as a mail scanner would) only
// shows a Confirm button; pressing it confirms, once; the settings page
// then says confirmed. The button's form needs its CSRF token from this
// site; a resend waits five minutes; a replaced link is not valid.
func TestPortalConfirmation(t *testing.T) {
	t.Parallel()
	mail := smtptest.Start(t)
	e := setupWith(t, false, mail)
	p := e.openPortal(t, "cust_42")
	status := func() string {
		var got noticeAddressJSON
		e.operator(t, "GET", "/v1/consumers/cust_42/notifications", "", http.StatusOK, &got)
		return *got.Status
	}

	a := p.follow(p.post("/portal/settings", url.Values{"email": {"ops@example.com"}}))
	require.Contains(t, a.body, "Saved. A confirmation link is being mailed to ops@example.com")
	require.Regexp(t, `id="email-status">pending<`, a.body)
	require.Contains(t, a.body, "link mailed 2026-03-04 05:06 UTC, valid until 2026-03-06 05:06 UTC")
	require.Contains(t, a.body, `id="resend-confirmation"`)
	require.NotContains(t, a.body, `id="mail-off"`)
	m := mail.Wait(t, 1, 10*time.Second)[0]
	require.Equal(t, []string{"ops@example.com"}, m.To)
	first := confirmLinkRE.FindString(m.Body)
	require.NotEmpty(t, first, m.Body)

	// Too soon, the resend sends nothing and says when it may; five
	// minutes later it sends a new link, and the first stops working.
	a = p.follow(p.post("/portal/settings/resend", nil))
	require.Contains(t, html.UnescapeString(a.body), "another can be sent from 2026-03-04 05:11 UTC")
	require.Len(t, mail.Mails(), 1)
	e.clock.Advance(5 * time.Minute)
	a = p.follow(p.post("/portal/settings/resend", nil))
	require.Contains(t, a.body, "A confirmation link is being mailed to ops@example.com")
	link := confirmLinkRE.FindString(mail.Wait(t, 2, 10*time.Second)[1].Body)
	require.NotEqual(t, first, link)

	// Anyone holding the link, signed in or not, gets the page; the GET
	// changes nothing.
	anon := e.browser(t)
	page := call(t, anon, "GET", link, "", "", nil)
	require.Equal(t, http.StatusOK, page.status, page.body)
	require.Contains(t, page.body, `id="confirm-address"`)
	require.Contains(t, page.body, "consumer <strong>cust_42</strong>")
	require.NotEmpty(t, page.header.Get("Content-Security-Policy"))
	require.Equal(t, "pending", status(), "opening the link confirms nothing")

	u, err := url.Parse(link)
	require.NoError(t, err)
	form := func(token, csrf string) string {
		return url.Values{"consumer": {"cust_42"}, "token": {token}, "csrf_token": {csrf}}.Encode()
	}
	csrf := regexp.MustCompile(`name="csrf_token" value="([^"]+)"`).FindStringSubmatch(page.body)
	require.Len(t, csrf, 2, page.body)
	post := func(body string, header map[string]string) answer {
		h := map[string]string{"Content-Type": "application/x-www-form-urlencoded", "Origin": e.srv.URL, "Sec-Fetch-Site": "same-origin"}
		for k, v := range header {
			h[k] = v
		}
		return call(t, anon, "POST", e.srv.URL+"/portal/confirm", "", body, h)
	}
	token := u.Query().Get("token")
	// From another site, or without the form's token: refused.
	require.Equal(t, http.StatusForbidden, post(form(token, csrf[1]), map[string]string{"Sec-Fetch-Site": "cross-site"}).status)
	require.Equal(t, http.StatusForbidden, post(form(token, ""), nil).status)
	require.Equal(t, "pending", status())
	// The replaced link is not valid.
	ft, _ := url.Parse(first)
	old := post(form(ft.Query().Get("token"), html.UnescapeString(csrfOf(ft.Query().Get("token")))), nil)
	require.Equal(t, http.StatusNotFound, old.status, old.body)
	require.Contains(t, old.body, "Link not valid")

	ok := post(form(token, html.UnescapeString(csrf[1])), nil)
	require.Equal(t, http.StatusOK, ok.status, ok.body)
	require.Contains(t, ok.body, "Address confirmed")
	require.Contains(t, ok.body, "to ops@example.com")
	require.Equal(t, "confirmed", status())
	again := post(form(token, html.UnescapeString(csrf[1])), nil)
	require.Equal(t, http.StatusOK, again.status)
	require.Contains(t, again.body, "confirmed already")

	a = p.get("/portal/settings")
	require.Regexp(t, `id="email-status">confirmed<`, a.body)
	require.NotContains(t, a.body, `id="resend-confirmation"`)

	// Expired: past 48 hours a new address's link is refused.
	a = p.follow(p.post("/portal/settings", url.Values{"email": {"new@example.com"}}))
	require.Regexp(t, `id="email-status">pending<`, a.body)
	late := confirmLinkRE.FindString(mail.Wait(t, 3, 10*time.Second)[2].Body)
	lu, _ := url.Parse(late)
	e.clock.Advance(48 * time.Hour)
	gone := post(form(lu.Query().Get("token"), csrfOf(lu.Query().Get("token"))), nil)
	require.Equal(t, http.StatusGone, gone.status, gone.body)
	require.Contains(t, gone.body, "Link expired")
	require.Equal(t, "pending", status())

	// A link without its token is no page to confirm on.
	require.Equal(t, http.StatusNotFound, call(t, anon, "GET", e.srv.URL+"/portal/confirm?consumer=cust_42", "", "", nil).status)
}

// csrfOf is the confirmation form's CSRF token for token.
func csrfOf(token string) string { return auth.CSRFToken(token) }
