package web_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/heraldhooks/herald/internal/web"
)

func TestAssets(t *testing.T) {
	t.Parallel()
	a := web.NewAssets()
	srv := httptest.NewServer(a)
	t.Cleanup(srv.Close)

	t.Run("HashedNameCachedForAYear", func(t *testing.T) {
		t.Parallel()
		u := a.URL("herald.css")
		require.Regexp(t, `^/ui/static/herald\.[0-9a-f]{8}\.css$`, u)
		res, err := http.Get(srv.URL + u)
		require.NoError(t, err)
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		require.Equal(t, http.StatusOK, res.StatusCode)
		require.Contains(t, res.Header.Get("Content-Type"), "text/css")
		require.Equal(t, "public, max-age=31536000, immutable", res.Header.Get("Cache-Control"))
		require.Contains(t, string(body), ".badge")

		req, _ := http.NewRequest(http.MethodGet, srv.URL+u, nil)
		req.Header.Set("If-None-Match", res.Header.Get("ETag"))
		res, err = http.DefaultClient.Do(req)
		require.NoError(t, err)
		res.Body.Close()
		require.Equal(t, http.StatusNotModified, res.StatusCode)
	})

	t.Run("ScriptServed", func(t *testing.T) {
		t.Parallel()
		res, err := http.Get(srv.URL + a.URL("herald.js"))
		require.NoError(t, err)
		res.Body.Close()
		require.Equal(t, http.StatusOK, res.StatusCode)
		require.Contains(t, res.Header.Get("Content-Type"), "javascript")
	})

	t.Run("UnhashedOrStaleNameIs404", func(t *testing.T) {
		t.Parallel()
		for _, p := range []string{"/ui/static/herald.css", "/ui/static/herald.00000000.css", "/ui/static/"} {
			res, err := http.Get(srv.URL + p)
			require.NoError(t, err)
			res.Body.Close()
			require.Equal(t, http.StatusNotFound, res.StatusCode, p)
		}
	})

	t.Run("UnknownNamePanics", func(t *testing.T) {
		t.Parallel()
		require.Panics(t, func() { a.URL("nope.css") })
	})
}

func TestLayout(t *testing.T) {
	t.Parallel()
	l := web.NewLayout(web.NewAssets(), nil)

	t.Run("PageInLayoutWithStrictCSP", func(t *testing.T) {
		t.Parallel()
		rec := httptest.NewRecorder()
		l.Render(rec, http.StatusTeapot, "message", &web.Page{
			Site: "Herald", Home: "/ui/", Title: "Hello <there>",
			Nav:     []web.NavItem{{Key: "a", Label: "Alpha", Href: "/ui/a"}, {Key: "b", Label: "Beta", Href: "/ui/b"}},
			Current: "b", SignedInAs: "operator", SignOut: "/ui/sign-out", CSRF: `tok"en`,
			Flash: &web.Flash{Kind: "ok", Text: "Done <b>"}, Data: "Some words.",
		})
		require.Equal(t, http.StatusTeapot, rec.Code)
		csp := rec.Header().Get("Content-Security-Policy")
		require.Contains(t, csp, "default-src 'none'")
		require.Contains(t, csp, "script-src 'self'")
		require.NotContains(t, csp, "unsafe-inline")
		require.Equal(t, "no-store", rec.Header().Get("Cache-Control"))
		body := rec.Body.String()
		require.Contains(t, body, "<title>Hello &lt;there&gt; · Herald</title>")
		require.Contains(t, body, `<a href="/ui/b" aria-current="page">Beta</a>`)
		require.Contains(t, body, `<a href="/ui/a">Alpha</a>`)
		require.Contains(t, body, `<div class="flash ok" role="status">Done &lt;b&gt;</div>`)
		require.Contains(t, body, `<input type="hidden" name="csrf_token" value="tok&#34;en">`)
		require.Regexp(t, `<link rel="stylesheet" href="/ui/static/herald\.[0-9a-f]{8}\.css">`, body)
		// No inline script: every <script> has a src.
		for _, m := range regexp.MustCompile(`<script[^>]*>`).FindAllString(body, -1) {
			require.Contains(t, m, "src=", m)
		}
	})

	t.Run("UnknownPagePanics", func(t *testing.T) {
		t.Parallel()
		require.Panics(t, func() { l.Render(httptest.NewRecorder(), 200, "nope", &web.Page{}) })
	})
}

func TestPager(t *testing.T) {
	t.Parallel()
	u, _ := url.Parse("/ui/endpoints?consumer=acme&sort=url")
	p := web.NewPager(u, "c1")
	require.Empty(t, p.First)
	require.Equal(t, "/ui/endpoints?consumer=acme&cursor=c1&sort=url", p.Next)

	u, _ = url.Parse("/ui/endpoints?consumer=acme&cursor=c1")
	p = web.NewPager(u, "")
	require.Equal(t, "/ui/endpoints?consumer=acme", p.First)
	require.Empty(t, p.Next)
}

func TestFlash(t *testing.T) {
	t.Parallel()
	rec := httptest.NewRecorder()
	web.SetFlash(rec, httptest.NewRequest(http.MethodPost, "/ui/x", nil), "/ui", web.Flash{Kind: "ok", Text: "Replayed 3 deliveries."})
	cookies := rec.Result().Cookies()
	require.Len(t, cookies, 1)
	require.True(t, cookies[0].HttpOnly)
	require.Equal(t, "/ui", cookies[0].Path)

	req := httptest.NewRequest(http.MethodGet, "/ui/x", nil)
	req.AddCookie(cookies[0])
	rec = httptest.NewRecorder()
	f := web.TakeFlash(rec, req, "/ui")
	require.Equal(t, &web.Flash{Kind: "ok", Text: "Replayed 3 deliveries."}, f)
	cleared := rec.Result().Cookies()
	require.Len(t, cleared, 1)
	require.Equal(t, -1, cleared[0].MaxAge)

	// A forged kind becomes "info"; garbage is no flash.
	req = httptest.NewRequest(http.MethodGet, "/ui/x", nil)
	req.AddCookie(&http.Cookie{Name: "herald_flash", Value: "!!!"})
	require.Nil(t, web.TakeFlash(httptest.NewRecorder(), req, "/ui"))
	require.Nil(t, web.TakeFlash(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/ui/x", nil), "/ui"))
}
