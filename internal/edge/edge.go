// Package edge is where browsers and strangers meet Herald: the site a
// browser sees (scheme and host, for cookies, Origin checks and links),
// the client behind a reverse proxy, and TLS of Herald's own with a
// certificate renewed in place.
//
// What a browser sees is decided by the operator, never guessed from the
// request: with a public URL (--public-url) every request's Site is that
// URL's; without one it is the request's own (https when it came over
// TLS, its Host). X-Forwarded-For, X-Forwarded-Proto and X-Forwarded-Host
// count only when the peer is a named proxy (--trusted-proxies); from
// anyone else they are dropped before any handler sees the request.
// Without either setting a request is seen as it arrived, as on loopback.
package edge

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"

	"github.com/heraldhooks/herald/internal/clock"
	"github.com/heraldhooks/herald/internal/logkey"
)

// Site is where a browser reached Herald: what its Origin header says,
// what its cookies are scoped to, and what links start with.
type Site struct {
	// Scheme is "http" or "https".
	Scheme string
	// Host is the host and, when not the scheme's default, the port.
	Host string
	// Path is the public URL's path without its trailing slash: "" unless
	// the operator put Herald under a path of its own.
	Path string
}

// Origin is the site as a browser's Origin header names it.
func (s Site) Origin() string { return s.Scheme + "://" + s.Host }

// Secure reports whether browsers reach the site over https, so that its
// cookies must be Secure.
func (s Site) Secure() bool { return s.Scheme == "https" }

// URL is an absolute URL of path (which starts with /) on the site.
func (s Site) URL(path string) string { return s.Origin() + s.Path + path }

// siteKey keys a request's Site in its context.
type siteKey struct{}

// SiteOf returns the site r was made to, as its browser sees it: the one
// Handler settled, or else (a handler called without Handler, as in a
// package's own tests) r's own, https when it came over TLS and its Host.
func SiteOf(r *http.Request) Site {
	if s, ok := r.Context().Value(siteKey{}).(Site); ok {
		return s
	}
	return ownSite(r)
}

// WithSite returns ctx carrying s as the site of the requests made with it
// (what Handler does; tests use it to stand for a proxy).
func WithSite(ctx context.Context, s Site) context.Context {
	return context.WithValue(ctx, siteKey{}, s)
}

func ownSite(r *http.Request) Site {
	if r.TLS != nil {
		return Site{Scheme: "https", Host: r.Host}
	}
	return Site{Scheme: "http", Host: r.Host}
}

// ParseSite reads a public URL (--public-url, config.Validate has checked
// it) into the Site of every request.
func ParseSite(publicURL string) (Site, error) {
	u, err := url.Parse(publicURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return Site{}, fmt.Errorf("public-url: %q is not an absolute http or https URL", publicURL)
	}
	host := u.Host
	// A browser's Origin leaves out the scheme's default port.
	if h, port, err := net.SplitHostPort(host); err == nil &&
		((u.Scheme == "https" && port == "443") || (u.Scheme == "http" && port == "80")) {
		host = h
		if strings.Contains(h, ":") {
			host = "[" + h + "]"
		}
	}
	return Site{Scheme: u.Scheme, Host: strings.ToLower(host), Path: strings.TrimRight(u.EscapedPath(), "/")}, nil
}

// ParseProxies reads --trusted-proxies: CIDRs (10.0.0.0/8) or single
// addresses (127.0.0.1, read as /32 or /128), each trimmed; empty entries
// are skipped.
func ParseProxies(list []string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, s := range list {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		if p, err := netip.ParsePrefix(s); err == nil {
			out = append(out, p.Masked())
			continue
		}
		a, err := netip.ParseAddr(s)
		if err != nil || a.Zone() != "" {
			return nil, fmt.Errorf("trusted-proxies: %q is not a CIDR such as 10.0.0.0/8 or an address such as 127.0.0.1", s)
		}
		out = append(out, netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()))
	}
	return out, nil
}

// Config is what Handler needs.
type Config struct {
	// PublicURL, when set, is where browsers reach Herald: the Site of
	// every request, whatever its headers say.
	PublicURL string
	// TrustedProxies are the peers whose forwarded headers are believed.
	TrustedProxies []netip.Prefix
	// Clock times the request log. Default: the real clock.
	Clock clock.Clock
	// Logger receives one line per request at debug level, with the
	// client's address. Default: discard.
	Logger *slog.Logger
}

// The headers a trusted proxy sets.
const (
	headerFor   = "X-Forwarded-For"
	headerProto = "X-Forwarded-Proto"
	headerHost  = "X-Forwarded-Host"
)

// Handler settles who and where each request is before next sees it: its
// Site (SiteOf), and its RemoteAddr, which becomes the client's address
// as a trusted proxy forwarded it (so every log line and any limit by
// client reads the client, not the proxy). A request whose peer is not a
// trusted proxy loses its X-Forwarded-* headers: they are the client's
// words, and nothing past this point may take them for the proxy's.
func Handler(cfg Config, next http.Handler) (http.Handler, error) {
	var public *Site
	if cfg.PublicURL != "" {
		s, err := ParseSite(cfg.PublicURL)
		if err != nil {
			return nil, err
		}
		public = &s
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		began := cfg.Clock.Now()
		peer := r.RemoteAddr
		site, client := ownSite(r), peer
		if trusted(cfg.TrustedProxies, peer) {
			site, client = forwarded(r, site, cfg.TrustedProxies)
		} else {
			r.Header.Del(headerFor)
			r.Header.Del(headerProto)
			r.Header.Del(headerHost)
		}
		if public != nil {
			site = *public
		}
		r = r.WithContext(WithSite(r.Context(), site))
		r.RemoteAddr = client
		if !cfg.Logger.Enabled(r.Context(), slog.LevelDebug) {
			next.ServeHTTP(w, r)
			return
		}
		rec := &StatusRecorder{ResponseWriter: w}
		next.ServeHTTP(rec, r)
		attrs := []any{"method", r.Method, "path", logPath(r.URL.Path), logkey.StatusCode, rec.Status(),
			logkey.DurationMS, cfg.Clock.Now().Sub(began).Milliseconds(), logkey.ClientAddr, client}
		if client != peer {
			attrs = append(attrs, logkey.PeerAddr, peer)
		}
		cfg.Logger.Debug("request", attrs...)
	}), nil
}

// trusted reports whether the peer address addr (host:port) is in one of
// the proxies' prefixes.
func trusted(proxies []netip.Prefix, addr string) bool {
	if len(proxies) == 0 {
		return false
	}
	a, ok := parseAddr(addr)
	return ok && contains(proxies, a)
}

func contains(proxies []netip.Prefix, a netip.Addr) bool {
	for _, p := range proxies {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// parseAddr reads an address as RemoteAddr or X-Forwarded-For carry it:
// ip:port, [ipv6]:port, or a bare ip; an IPv4 address mapped into IPv6 is
// read as IPv4.
func parseAddr(s string) (netip.Addr, bool) {
	s = strings.TrimSpace(s)
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return ap.Addr().Unmap(), true
	}
	a, err := netip.ParseAddr(strings.TrimSuffix(strings.TrimPrefix(s, "["), "]"))
	if err != nil || a.Zone() != "" {
		return netip.Addr{}, false
	}
	return a.Unmap(), true
}

// forwarded reads what a trusted proxy says of r. The client is the last
// address of X-Forwarded-For (all its headers, in order) that is not
// itself a trusted proxy: each proxy appends the peer it heard from, so
// whatever lies left of the first untrusted address was written by that
// client and proves nothing. A value that is no address ends the walk at
// the proxy that passed it on. The scheme and host are the last values of
// X-Forwarded-Proto and X-Forwarded-Host, those the proxy Herald hears
// from set; one that is not http or https, or not a host, is ignored.
func forwarded(r *http.Request, site Site, proxies []netip.Prefix) (Site, string) {
	client := r.RemoteAddr
	var hops []string
	for _, v := range r.Header.Values(headerFor) {
		hops = append(hops, strings.Split(v, ",")...)
	}
	for i := len(hops) - 1; i >= 0; i-- {
		a, ok := parseAddr(hops[i])
		if !ok {
			break
		}
		client = net.JoinHostPort(a.String(), "0")
		if !contains(proxies, a) {
			break
		}
	}
	if p := lastValue(r.Header.Values(headerProto)); p == "http" || p == "https" {
		site.Scheme = p
	}
	if h := lastValue(r.Header.Values(headerHost)); validHost(h) {
		site.Host = strings.ToLower(h)
	}
	return site, client
}

// lastValue is the last comma-separated value of a header's lines,
// trimmed and lower-cased.
func lastValue(lines []string) string {
	if len(lines) == 0 {
		return ""
	}
	last := lines[len(lines)-1]
	if i := strings.LastIndexByte(last, ','); i >= 0 {
		last = last[i+1:]
	}
	return strings.ToLower(strings.TrimSpace(last))
}

// validHost reports whether h is a host name or address with an optional
// port, and nothing a URL or a header would read otherwise.
func validHost(h string) bool {
	if h == "" || len(h) > 255 {
		return false
	}
	for _, c := range h {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '.' || c == '-' || c == ':' || c == '[' || c == ']' || c == '_') {
			return false
		}
	}
	u, err := url.Parse("http://" + h)
	return err == nil && u.Host == h && u.Hostname() != ""
}

// logPath is a request's path for the log, with every segment of 40
// characters or more (a portal link's token: 43) written as "…": a log
// line must not open a portal.
func logPath(p string) string {
	if len(p) < 40 {
		return p
	}
	segs := strings.Split(p, "/")
	for i, s := range segs {
		if len(s) >= 40 {
			segs[i] = "…"
		}
	}
	return strings.Join(segs, "/")
}

// StatusRecorder remembers the status a handler answered (for the log,
// and for the API's request spans). Unwrap lets http.ResponseController
// reach the connection's writer.
type StatusRecorder struct {
	http.ResponseWriter
	code int
}

func (s *StatusRecorder) WriteHeader(code int) {
	if s.code == 0 {
		s.code = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *StatusRecorder) Write(b []byte) (int, error) {
	if s.code == 0 {
		s.code = http.StatusOK
	}
	return s.ResponseWriter.Write(b)
}

// Flush passes a flush on, for handlers that check for http.Flusher.
func (s *StatusRecorder) Flush() {
	if f, ok := s.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (s *StatusRecorder) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// Status is the status answered, 200 when the handler wrote nothing.
func (s *StatusRecorder) Status() int {
	if s.code == 0 {
		return http.StatusOK
	}
	return s.code
}

// IsLoopback reports whether addr (host:port) listens on loopback only:
// a loopback address or the name localhost. An empty or unspecified host
// (":8080", "0.0.0.0:8080") listens on every interface.
func IsLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	a, err := netip.ParseAddr(host)
	return err == nil && a.Unmap().IsLoopback()
}
