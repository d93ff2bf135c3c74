package web

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"mime"
	"net/http"
	"net/url"
	"path"
	"strings"
	"time"

	"github.com/heraldhooks/herald/internal/api"
	"github.com/heraldhooks/herald/internal/auth"
	"github.com/heraldhooks/herald/internal/edge"
	"github.com/heraldhooks/herald/internal/logkey"
)

// The pages' shared parts, used by /ui/ and /portal/ alike:
//
//   - Assets serves the embedded static files under /ui/static/, each at a
//     name that carries a hash of its content, so a browser may keep it a
//     year and still never runs an old copy after an upgrade.
//   - Layout renders a page into templates/layout.html: head, nav, the
//     signed-in name with a sign-out form, a flash message, then the
//     page's "content". A page is one file in templates/ defining "title"
//     and "content".
//   - SetPageHeaders sends the strict Content-Security-Policy every page
//     is served with: scripts, styles and images from Herald only, and no
//     inline script.
//   - SetFlash and TakeFlash carry one message across a redirect (an
//     action's POST answers 303 to the page that shows what it did);
//     callMessage is what such a message says of a failed call.
//
// Every action a page offers is a /v1 call, made in process through
// api.Server.Call as the signed-in principal, so a script can do
// everything a page does, under the same scope rules and errors.

//go:embed static
var staticFS embed.FS

//go:embed templates
var templateFS embed.FS

// StaticPrefix is where Assets are served.
const StaticPrefix = "/ui/static/"

// CSP is the Content-Security-Policy of every page: nothing from any other
// host, no inline script or style, no framing, forms posting only here.
const CSP = cspBase + "frame-ancestors 'none'; base-uri 'none'"

// cspBase is CSP up to its frame-ancestors.
const cspBase = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; form-action 'self'; "

// SetFramedPageHeaders is SetPageHeaders for a page that the origins
// ancestors (a CSP source list, such as "https://app.example.com") may
// show in a frame: its CSP's frame-ancestors names them, and it sends no
// X-Frame-Options (which cannot name an origin; browsers that read CSP
// ignore it anyway). An empty ancestors is SetPageHeaders.
func SetFramedPageHeaders(h http.Header, ancestors string) {
	SetPageHeaders(h)
	if ancestors == "" {
		return
	}
	h.Set("Content-Security-Policy", cspBase+"frame-ancestors "+ancestors+"; base-uri 'none'")
	h.Del("X-Frame-Options")
}

// SetPageHeaders sets the headers every page is served with: the CSP, no
// framing, no sniffing, no Referer to other sites (a portal link's token
// is in its path) and no caching (pages show live data and a CSRF token).
// The referrer policy is same-origin, not no-referrer: under no-referrer
// browsers send "Origin: null" with a form's POST, and the CSRF checks
// need the real origin.
func SetPageHeaders(h http.Header) {
	h.Set("Content-Security-Policy", CSP)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "same-origin")
	h.Set("Cache-Control", "no-store")
}

// asset is one static file.
type asset struct {
	body  []byte
	ctype string
	etag  string
}

// Assets serves the embedded static files. Safe for concurrent use; it
// holds only what it read at construction.
type Assets struct {
	byName   map[string]string // "herald.css" → "herald.0123abcd.css"
	byHashed map[string]asset
}

// NewAssets reads and hashes the embedded static files.
func NewAssets() *Assets {
	a := &Assets{byName: map[string]string{}, byHashed: map[string]asset{}}
	entries, err := fs.ReadDir(staticFS, "static")
	if err != nil {
		panic(err) // embedded at build time: cannot fail at run time
	}
	for _, e := range entries {
		body, err := staticFS.ReadFile("static/" + e.Name())
		if err != nil {
			panic(err)
		}
		sum := sha256.Sum256(body)
		h := hex.EncodeToString(sum[:4])
		ext := path.Ext(e.Name())
		hashed := strings.TrimSuffix(e.Name(), ext) + "." + h + ext
		a.byName[e.Name()] = hashed
		a.byHashed[hashed] = asset{body: body, ctype: mime.TypeByExtension(ext), etag: `"` + h + `"`}
	}
	return a
}

// URL returns the address of the static file name ("herald.css"); it
// panics on a name that is not embedded, which every test rendering a page
// finds.
func (a *Assets) URL(name string) string {
	hashed, ok := a.byName[name]
	if !ok {
		panic(fmt.Sprintf("web: no static file %q", name))
	}
	return StaticPrefix + hashed
}

// ServeHTTP serves GET and HEAD of StaticPrefix + a hashed name, cached
// for a year as immutable; anything else is 404.
func (a *Assets) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f, ok := a.byHashed[strings.TrimPrefix(r.URL.Path, StaticPrefix)]
	if !ok || (r.Method != http.MethodGet && r.Method != http.MethodHead) {
		http.NotFound(w, r)
		return
	}
	h := w.Header()
	h.Set("Content-Type", f.ctype)
	h.Set("Cache-Control", "public, max-age=31536000, immutable")
	h.Set("ETag", f.etag)
	h.Set("X-Content-Type-Options", "nosniff")
	if r.Header.Get("If-None-Match") == f.etag {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(f.body))
}

// NavItem is one link of a page's navigation.
type NavItem struct {
	Key, Label, Href string
}

// Flash is a one-time message shown at the top of the next page.
type Flash struct {
	// Kind is "ok", "error" or "info": the message's colour.
	Kind string `json:"k"`
	Text string `json:"t"`
}

// Page is what the layout needs besides the page's own Data.
type Page struct {
	// Site names the whole: "Herald" or "Herald portal".
	Site string
	// Home is where the site's name links to.
	Home string
	// Title is the page's title (the "title" template may use it).
	Title string
	// Nav is the navigation; Current names the item shown as current.
	Nav     []NavItem
	Current string
	// SignedInAs and SignOut (the sign-out form's action), when SignOut
	// is set, show who is signed in and a way out.
	SignedInAs string
	SignOut    string
	// CSRF is the session's token, which csrfField puts into each form.
	CSRF  string
	Flash *Flash
	// Data is the page's own.
	Data any
	// Class is the body's class: "portal" gives the portal its own look.
	Class string
	// FrameAncestors, when set, lets those origins frame the page
	// (SetFramedPageHeaders); empty, no one may.
	FrameAncestors string
}

// Pager links the pages of a keyset-paged list: First when not on the
// first page, Next when there are more.
type Pager struct {
	First, Next string
}

// NewPager returns the links for a list shown at u: First (u without
// cursor) when u has one, Next (u with cursor set to next) when next is
// not empty. Every other parameter (filters, sort) is kept.
func NewPager(u *url.URL, next string) Pager {
	var p Pager
	q := u.Query()
	if q.Get("cursor") != "" {
		q.Del("cursor")
		p.First = withQuery(u.Path, q)
	}
	if next != "" {
		q.Set("cursor", next)
		p.Next = withQuery(u.Path, q)
	}
	return p
}

func withQuery(p string, q url.Values) string {
	if len(q) == 0 {
		return p
	}
	return p + "?" + q.Encode()
}

// Layout renders pages. Safe for concurrent use.
type Layout struct {
	assets *Assets
	log    *slog.Logger
	pages  map[string]*template.Template
}

// NewLayout parses templates/layout.html and the shared parts
// (templates/part-*.html) with each page of templates/ (every other file
// there): the page "endpoints" is endpoints.html.
func NewLayout(assets *Assets, log *slog.Logger) *Layout {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	l := &Layout{assets: assets, log: log, pages: map[string]*template.Template{}}
	// The layout, and the parts pages share (files named part-*.html).
	base := template.Must(template.New("").Funcs(l.funcs()).ParseFS(templateFS, "templates/layout.html", "templates/part-*.html"))
	entries, err := fs.ReadDir(templateFS, "templates")
	if err != nil {
		panic(err)
	}
	for _, e := range entries {
		if e.Name() == "layout.html" || strings.HasPrefix(e.Name(), "part-") {
			continue
		}
		t := template.Must(template.Must(base.Clone()).ParseFS(templateFS, "templates/"+e.Name()))
		l.pages[strings.TrimSuffix(e.Name(), ".html")] = t
	}
	return l
}

// Render answers page (a file of templates/ without .html) with status,
// in the layout, with the page headers.
func (l *Layout) Render(w http.ResponseWriter, status int, page string, p *Page) {
	t, ok := l.pages[page]
	if !ok {
		panic(fmt.Sprintf("web: no page template %q", page))
	}
	var buf bytes.Buffer
	if err := t.ExecuteTemplate(&buf, "layout", p); err != nil {
		l.log.Error("could not render a page", "page", page, logkey.Error, err)
		SetFramedPageHeaders(w.Header(), p.FrameAncestors)
		http.Error(w, "The page could not be shown; see the server log.", http.StatusInternalServerError)
		return
	}
	SetFramedPageHeaders(w.Header(), p.FrameAncestors)
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// funcs are the template functions every page may use.
func (l *Layout) funcs() template.FuncMap {
	return template.FuncMap{
		"static": l.assets.URL,
		// csrfField is the hidden field that carries the CSRF token.
		"csrfField": func(token string) template.HTML {
			return template.HTML(`<input type="hidden" name="` + auth.CSRFField + `" value="` +
				template.HTMLEscapeString(token) + `">`)
		},
		"pager": NewPager,
		// clientCert is an endpoint's client certificate's subject and
		// expiry, nil when none.
		"clientCert": describeClientCert,
		// endpointForms is what the shared endpoint forms
		// (part-endpoint-forms.html) are given: the page's path prefix, the
		// endpoint and the CSRF token.
		"endpointForms": func(prefix string, endpoint any, csrf string) map[string]any {
			return map[string]any{"prefix": prefix, "endpoint": endpoint, "csrf": csrf}
		},
		// deadReason explains a dead delivery's reason (deadReasonHelp).
		"deadReason": deadReasonHelp,
		// time shows a time in UTC to the second; the zero time as "—".
		"time": func(t any) string {
			switch v := t.(type) {
			case time.Time:
				if v.IsZero() {
					return "—"
				}
				return v.UTC().Format("2006-01-02 15:04:05")
			case *time.Time:
				if v == nil || v.IsZero() {
					return "—"
				}
				return v.UTC().Format("2006-01-02 15:04:05")
			}
			return fmt.Sprint(t)
		},
		// pct shows a ratio in [0, 1] as a percentage.
		"pct": func(f float64) string { return fmt.Sprintf("%.1f%%", f*100) },
		// json pretty-prints raw JSON, or shows it as it is when it is not JSON.
		"prettyJSON": func(raw json.RawMessage) string {
			var buf bytes.Buffer
			if err := json.Indent(&buf, raw, "", "  "); err != nil {
				return string(raw)
			}
			return buf.String()
		},
	}
}

// flashCookie carries a Flash across one redirect.
const flashCookie = "herald_flash"

// SetFlash keeps f for the next page under cookiePath ("/ui" or
// "/portal"). The text is shown escaped, so a forged cookie can only show
// words, never markup.
func SetFlash(w http.ResponseWriter, r *http.Request, cookiePath string, f Flash) {
	setFlash(w, r, cookiePath, f, nil)
}

// setFlash is SetFlash with the cookie passed through adjust (when not
// nil) before it is set: the framed portal's cookies are partitioned.
func setFlash(w http.ResponseWriter, r *http.Request, cookiePath string, f Flash, adjust func(*http.Request, *http.Cookie)) {
	b, _ := json.Marshal(f) // a struct of two strings always encodes
	c := &http.Cookie{
		Name: flashCookie, Value: base64.RawURLEncoding.EncodeToString(b), Path: cookiePath,
		MaxAge: 60, HttpOnly: true, Secure: edge.SiteOf(r).Secure(), SameSite: http.SameSiteStrictMode,
	}
	if adjust != nil {
		adjust(r, c)
	}
	http.SetCookie(w, c)
}

// TakeFlash returns the Flash SetFlash kept, or nil, and clears it.
func TakeFlash(w http.ResponseWriter, r *http.Request, cookiePath string) *Flash {
	return takeFlash(w, r, cookiePath, nil)
}

// takeFlash is TakeFlash with the clearing cookie passed through adjust.
func takeFlash(w http.ResponseWriter, r *http.Request, cookiePath string, adjust func(*http.Request, *http.Cookie)) *Flash {
	c, err := r.Cookie(flashCookie)
	if err != nil {
		return nil
	}
	clear := &http.Cookie{
		Name: flashCookie, Value: "", Path: cookiePath, MaxAge: -1,
		HttpOnly: true, Secure: edge.SiteOf(r).Secure(), SameSite: http.SameSiteStrictMode,
	}
	if adjust != nil {
		adjust(r, clear)
	}
	http.SetCookie(w, clear)
	b, err := base64.RawURLEncoding.DecodeString(c.Value)
	if err != nil {
		return nil
	}
	var f Flash
	if json.Unmarshal(b, &f) != nil || f.Text == "" {
		return nil
	}
	switch f.Kind {
	case "ok", "error", "info":
	default:
		f.Kind = "info"
	}
	return &f
}

// callMessage is what a page says of a failed call: the API's message
// for its error answers, a pointer to the log for anything else.
func callMessage(err error) string {
	var ce *api.CallError
	if errors.As(err, &ce) && ce.Status < 500 {
		return ce.Message
	}
	return "the call failed; see the server log"
}
