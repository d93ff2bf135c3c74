package sender

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
)

// connectProxy is an HTTP CONNECT proxy the test runs. It records every
// target asked for, and tunnels to route(target): the test can send a
// target nobody listens on to the real receiver, so a webhook that arrives
// went through the proxy. refuse makes it answer 403.
type connectProxy struct {
	ln      net.Listener
	route   func(target string) string
	refuse  bool
	mu      sync.Mutex
	targets []string
	auth    []string
}

func startConnectProxy(t *testing.T, route func(string) string) *connectProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &connectProxy{ln: ln, route: route}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go p.serve(c)
		}
	}()
	return p
}

func (p *connectProxy) URL() *url.URL { return &url.URL{Scheme: "http", Host: p.ln.Addr().String()} }

func (p *connectProxy) Targets() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.targets...)
}

func (p *connectProxy) serve(c net.Conn) {
	defer c.Close()
	br := bufio.NewReader(c)
	req, err := http.ReadRequest(br)
	if err != nil || req.Method != http.MethodConnect {
		return
	}
	p.mu.Lock()
	p.targets = append(p.targets, req.Host)
	p.auth = append(p.auth, req.Header.Get("Proxy-Authorization"))
	p.mu.Unlock()
	if p.refuse {
		_, _ = io.WriteString(c, "HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n")
		return
	}
	up, err := net.Dial("tcp", p.route(req.Host))
	if err != nil {
		_, _ = io.WriteString(c, "HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n")
		return
	}
	defer up.Close()
	_, _ = io.WriteString(c, "HTTP/1.1 200 Connection established\r\n\r\n")
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(up, br); done <- struct{}{} }()
	go func() { _, _ = io.Copy(c, up); done <- struct{}{} }()
	<-done
}

// closedPort is a loopback port nobody listens on: the direct path to it
// is refused.
func closedPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	require.NoError(t, ln.Close())
	return port
}

func TestEgressProxy(t *testing.T) {
	t.Parallel()
	loopback := func(context.Context, string) ([]netip.Addr, error) {
		return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
	}

	t.Run("EveryWebhookGoesThroughIt", func(t *testing.T) {
		t.Parallel()
		srv, got := receiver(t, nil)
		dead := closedPort(t)
		// The proxy sends the closed port to the receiver: only a webhook
		// that went through it can arrive.
		proxy := startConnectProxy(t, func(string) string { return srv.Listener.Addr().String() })
		u := proxy.URL()
		u.User = url.UserPassword("herald", "pw")
		s := New(Config{AllowPrivateNetworks: true, LookupIP: loopback, EgressProxy: u})
		t.Cleanup(s.CloseIdleConnections)

		for range 3 {
			res := s.Send(context.Background(), request("http://receiver.test:"+dead+"/hook"))
			require.Equal(t, Success, res.Class, res.Error)
			<-got
		}
		// Kept alive: one tunnel, asked for the checked address, not the name.
		require.Equal(t, []string{"127.0.0.1:" + dead}, proxy.Targets())
		proxy.mu.Lock()
		require.Equal(t, "Basic aGVyYWxkOnB3", proxy.auth[0])
		proxy.mu.Unlock()

		direct := New(Config{AllowPrivateNetworks: true, LookupIP: loopback})
		t.Cleanup(direct.CloseIdleConnections)
		res := direct.Send(context.Background(), request("http://receiver.test:"+dead+"/hook"))
		require.Equal(t, Retryable, res.Class, "the direct path is closed")
	})

	t.Run("TLSThroughTheTunnelVerifiesTheName", func(t *testing.T) {
		t.Parallel()
		srv := httptest.NewTLSServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
		t.Cleanup(srv.Close)
		dead := closedPort(t)
		proxy := startConnectProxy(t, func(string) string { return srv.Listener.Addr().String() })
		s := New(Config{AllowPrivateNetworks: true, LookupIP: loopback, EgressProxy: proxy.URL()})
		t.Cleanup(s.CloseIdleConnections)
		pool := x509.NewCertPool()
		pool.AddCert(srv.Certificate())
		s.transport.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}

		// httptest's certificate names example.com, not 127.0.0.1's other names.
		res := s.Send(context.Background(), request("https://example.com:"+dead+"/"))
		require.Equal(t, Success, res.Class, res.Error)
		res = s.Send(context.Background(), request("https://other.test:"+dead+"/"))
		require.Equal(t, Retryable, res.Class)
		require.Contains(t, res.Error, "certificate")
	})

	t.Run("RefusedDestinationNeverReachesIt", func(t *testing.T) {
		t.Parallel()
		proxy := startConnectProxy(t, func(target string) string { return target })
		private := func(context.Context, string) ([]netip.Addr, error) {
			return []netip.Addr{netip.MustParseAddr("93.184.215.14"), netip.MustParseAddr("169.254.169.254")}, nil
		}
		// The proxy sits on loopback, which the guard refuses as a
		// destination: the operator named it, so it is dialed.
		s := New(Config{LookupIP: private, EgressProxy: proxy.URL()})
		t.Cleanup(s.CloseIdleConnections)

		res := s.Send(context.Background(), request("http://metadata.test/latest"))
		require.Equal(t, Retryable, res.Class)
		require.Contains(t, res.Error, "169.254.169.254")
		res = s.Send(context.Background(), request("http://10.0.0.1/"))
		require.Equal(t, Retryable, res.Class)
		require.Empty(t, proxy.Targets())
	})

	t.Run("ARefusalIsAFailedAttempt", func(t *testing.T) {
		t.Parallel()
		proxy := startConnectProxy(t, func(target string) string { return target })
		proxy.refuse = true
		s := New(Config{AllowPrivateNetworks: true, LookupIP: loopback, EgressProxy: proxy.URL()})
		t.Cleanup(s.CloseIdleConnections)

		res := s.Send(context.Background(), request("http://receiver.test:8080/"))
		require.Equal(t, Retryable, res.Class)
		require.Equal(t, 0, res.StatusCode)
		require.Equal(t, "egress proxy refused CONNECT 127.0.0.1:8080: 403 Forbidden", res.Error)
	})

	t.Run("UnreachableProxyFails", func(t *testing.T) {
		t.Parallel()
		u := &url.URL{Scheme: "http", Host: "127.0.0.1:" + closedPort(t)}
		s := New(Config{AllowPrivateNetworks: true, LookupIP: loopback, EgressProxy: u})
		t.Cleanup(s.CloseIdleConnections)
		var dialed atomic.Bool
		srv, _ := receiver(t, func(http.ResponseWriter, *http.Request) { dialed.Store(true) })
		res := s.Send(context.Background(), request(srv.URL))
		require.Equal(t, Retryable, res.Class)
		require.Contains(t, res.Error, "dial egress proxy")
		require.False(t, dialed.Load(), "no webhook goes around a proxy that is down")
	})
}
