package edge_test

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/heraldhooks/herald/internal/edge"
	"github.com/heraldhooks/herald/internal/syncbuf"
)

// seen is what a handler behind edge.Handler saw of a request.
type seen struct {
	site    edge.Site
	remote  string
	headers http.Header
}

// through sends r through edge.Handler with cfg and returns what the
// handler behind it saw.
func through(t *testing.T, cfg edge.Config, r *http.Request) seen {
	t.Helper()
	var got seen
	h, err := edge.Handler(cfg, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = seen{edge.SiteOf(r), r.RemoteAddr, r.Header.Clone()}
	}))
	require.NoError(t, err)
	h.ServeHTTP(httptest.NewRecorder(), r)
	return got
}

func request(peer, host string, headers ...string) *http.Request {
	r := httptest.NewRequest("GET", "/ui/", nil)
	r.RemoteAddr, r.Host = peer, host
	for i := 0; i+1 < len(headers); i += 2 {
		r.Header.Add(headers[i], headers[i+1])
	}
	return r
}

func TestHandler(t *testing.T) {
	t.Parallel()
	proxies, err := edge.ParseProxies([]string{"10.0.0.0/8", " 192.0.2.7 ", "2001:db8::/32"})
	require.NoError(t, err)
	forwarded := []string{"X-Forwarded-For", "203.0.113.9", "X-Forwarded-Proto", "https", "X-Forwarded-Host", "herald.example.com"}

	t.Run("WithoutSettingsARequestIsSeenAsItArrived", func(t *testing.T) {
		t.Parallel()
		got := through(t, edge.Config{}, request("127.0.0.1:5000", "127.0.0.1:8080", forwarded...))
		require.Equal(t, edge.Site{Scheme: "http", Host: "127.0.0.1:8080"}, got.site)
		require.Equal(t, "127.0.0.1:5000", got.remote)
		require.Empty(t, got.headers.Get("X-Forwarded-Proto"), "nobody is trusted: the headers are dropped")
	})
	t.Run("TLSMakesHTTPS", func(t *testing.T) {
		t.Parallel()
		r := request("127.0.0.1:5000", "127.0.0.1:8443")
		r.TLS = &tls.ConnectionState{}
		require.Equal(t, "https://127.0.0.1:8443", through(t, edge.Config{}, r).site.Origin())
	})
	t.Run("TrustedProxyIsBelieved", func(t *testing.T) {
		t.Parallel()
		got := through(t, edge.Config{TrustedProxies: proxies}, request("10.1.2.3:5000", "10.9.9.9:8080", forwarded...))
		require.Equal(t, edge.Site{Scheme: "https", Host: "herald.example.com"}, got.site)
		require.True(t, got.site.Secure())
		require.Equal(t, "203.0.113.9:0", got.remote, "the client, not the proxy")
	})
	t.Run("UntrustedPeerIsNot", func(t *testing.T) {
		t.Parallel()
		got := through(t, edge.Config{TrustedProxies: proxies}, request("198.51.100.1:5000", "herald.example.com", forwarded...))
		require.Equal(t, edge.Site{Scheme: "http", Host: "herald.example.com"}, got.site)
		require.Equal(t, "198.51.100.1:5000", got.remote)
		for _, h := range []string{"X-Forwarded-For", "X-Forwarded-Proto", "X-Forwarded-Host"} {
			require.Empty(t, got.headers.Values(h), h)
		}
	})
	t.Run("ClientIsTheLastUntrustedHop", func(t *testing.T) {
		t.Parallel()
		// The client wrote 6.6.6.6 itself; 203.0.113.9 reached the outer
		// proxy (10.0.0.2), which reached the inner one (192.0.2.7).
		got := through(t, edge.Config{TrustedProxies: proxies}, request("192.0.2.7:5000", "h",
			"X-Forwarded-For", "6.6.6.6, 203.0.113.9", "X-Forwarded-For", "10.0.0.2"))
		require.Equal(t, "203.0.113.9:0", got.remote)
	})
	t.Run("AllHopsTrustedGivesTheFirst", func(t *testing.T) {
		t.Parallel()
		got := through(t, edge.Config{TrustedProxies: proxies}, request("10.0.0.1:5000", "h", "X-Forwarded-For", "10.0.0.3, 10.0.0.2"))
		require.Equal(t, "10.0.0.3:0", got.remote)
	})
	t.Run("GarbageStopsAtTheProxyThatPassedIt", func(t *testing.T) {
		t.Parallel()
		got := through(t, edge.Config{TrustedProxies: proxies}, request("10.0.0.1:5000", "h", "X-Forwarded-For", "203.0.113.9, nonsense"))
		require.Equal(t, "10.0.0.1:5000", got.remote)
	})
	t.Run("IPv6AndMappedPeers", func(t *testing.T) {
		t.Parallel()
		got := through(t, edge.Config{TrustedProxies: proxies}, request("[2001:db8::1]:5000", "h", "X-Forwarded-For", "[2001:db9::5]:4711"))
		require.Equal(t, "[2001:db9::5]:0", got.remote)
		got = through(t, edge.Config{TrustedProxies: proxies}, request("[::ffff:10.0.0.1]:5000", "h", "X-Forwarded-For", "203.0.113.9"))
		require.Equal(t, "203.0.113.9:0", got.remote, "an IPv4 peer mapped into IPv6 is the IPv4 address")
	})
	t.Run("BadForwardedSchemeOrHostIsIgnored", func(t *testing.T) {
		t.Parallel()
		got := through(t, edge.Config{TrustedProxies: proxies}, request("10.0.0.1:5000", "herald.internal:8080",
			"X-Forwarded-Proto", "javascript", "X-Forwarded-Host", "evil.example/path"))
		require.Equal(t, edge.Site{Scheme: "http", Host: "herald.internal:8080"}, got.site)
		got = through(t, edge.Config{TrustedProxies: proxies}, request("10.0.0.1:5000", "h",
			"X-Forwarded-Proto", "http, HTTPS", "X-Forwarded-Host", "a.example, B.example:8443"))
		require.Equal(t, edge.Site{Scheme: "https", Host: "b.example:8443"}, got.site, "the last value: the nearest proxy's")
	})
	t.Run("PublicURLDecidesTheSite", func(t *testing.T) {
		t.Parallel()
		cfg := edge.Config{PublicURL: "https://Herald.example.com:443/hooks/", TrustedProxies: proxies}
		got := through(t, cfg, request("10.0.0.1:5000", "10.0.0.5:8080", "X-Forwarded-Proto", "http", "X-Forwarded-Host", "other.example", "X-Forwarded-For", "203.0.113.9"))
		require.Equal(t, edge.Site{Scheme: "https", Host: "herald.example.com", Path: "/hooks"}, got.site)
		require.Equal(t, "https://herald.example.com", got.site.Origin())
		require.Equal(t, "https://herald.example.com/hooks/portal/x", got.site.URL("/portal/x"))
		require.Equal(t, "203.0.113.9:0", got.remote, "the client still comes from the proxy")
		got = through(t, edge.Config{PublicURL: "http://127.0.0.1:9000"}, request("127.0.0.1:5000", "localhost:9000"))
		require.Equal(t, edge.Site{Scheme: "http", Host: "127.0.0.1:9000"}, got.site)
		require.False(t, got.site.Secure())
	})
	t.Run("RequestLogCarriesTheClient", func(t *testing.T) {
		t.Parallel()
		var logs syncbuf.Buffer
		logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
		h, err := edge.Handler(edge.Config{TrustedProxies: proxies, Logger: logger}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusTeapot)
		}))
		require.NoError(t, err)
		token := strings.Repeat("A", 43)
		r := request("10.0.0.1:5000", "h", "X-Forwarded-For", "203.0.113.9")
		r.URL.Path = "/portal/" + token
		h.ServeHTTP(httptest.NewRecorder(), r)
		line := logs.String()
		require.Contains(t, line, "client_addr=203.0.113.9:0")
		require.Contains(t, line, "peer_addr=10.0.0.1:5000")
		require.Contains(t, line, "status_code=418")
		require.NotContains(t, line, token, "a portal link's token is never logged")
	})
}

func TestHandlerRefusesABadPublicURL(t *testing.T) {
	t.Parallel()
	_, err := edge.Handler(edge.Config{PublicURL: "herald.example.com"}, http.NotFoundHandler())
	require.ErrorContains(t, err, "public-url")
}

func TestSiteOfWithoutHandler(t *testing.T) {
	t.Parallel()
	r := request("127.0.0.1:1", "127.0.0.1:8080", "X-Forwarded-Proto", "https")
	require.Equal(t, edge.Site{Scheme: "http", Host: "127.0.0.1:8080"}, edge.SiteOf(r), "headers alone make nothing https")
	r = r.WithContext(edge.WithSite(r.Context(), edge.Site{Scheme: "https", Host: "h.example"}))
	require.Equal(t, "https://h.example", edge.SiteOf(r).Origin())
}

func TestParseProxies(t *testing.T) {
	t.Parallel()
	got, err := edge.ParseProxies([]string{"127.0.0.1", "10.1.2.3/8", "::1", ""})
	require.NoError(t, err)
	require.Equal(t, "[127.0.0.1/32 10.0.0.0/8 ::1/128]", fmt.Sprint(got))
	for _, bad := range []string{"10.0.0.0/33", "proxy.example", "10.0.0.0/8,", "fe80::1%eth0"} {
		_, err := edge.ParseProxies([]string{bad})
		require.ErrorContains(t, err, "trusted-proxies", bad)
	}
}

func TestIsLoopback(t *testing.T) {
	t.Parallel()
	for addr, want := range map[string]bool{
		"127.0.0.1:6060": true, "[::1]:6060": true, "localhost:6060": true, "127.1.2.3:1": true,
		":6060": false, "0.0.0.0:6060": false, "[::]:6060": false, "10.0.0.1:6060": false, "metrics.internal:9090": false, "nonsense": false,
	} {
		require.Equal(t, want, edge.IsLoopback(addr), addr)
	}
}
