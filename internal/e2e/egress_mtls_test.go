package e2e

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/heraldhooks/herald/internal/dispatch"
	"github.com/heraldhooks/herald/internal/sender"
	"github.com/heraldhooks/herald/internal/store/storetest"
)

// egressProxy is an HTTP CONNECT proxy the test runs: it records the
// target of every CONNECT and the local address of each connection it
// opens to one, so a receiver can tell a connection the proxy made from
// one that went around it.
type egressProxy struct {
	ln       net.Listener
	mu       sync.Mutex
	targets  []string
	outbound map[string]bool
}

func startEgressProxy(t *testing.T) *egressProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &egressProxy{ln: ln, outbound: map[string]bool{}}
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

func (p *egressProxy) serve(c net.Conn) {
	defer c.Close()
	br := bufio.NewReader(c)
	req, err := http.ReadRequest(br)
	if err != nil || req.Method != http.MethodConnect {
		return
	}
	up, err := net.Dial("tcp", req.Host)
	if err != nil {
		_, _ = io.WriteString(c, "HTTP/1.1 502 Bad Gateway\r\n\r\n")
		return
	}
	defer up.Close()
	p.mu.Lock()
	p.targets = append(p.targets, req.Host)
	p.outbound[up.LocalAddr().String()] = true
	p.mu.Unlock()
	_, _ = io.WriteString(c, "HTTP/1.1 200 Connection established\r\n\r\n")
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(up, br); done <- struct{}{} }()
	go func() { _, _ = io.Copy(c, up); done <- struct{}{} }()
	<-done
}

func (p *egressProxy) made(remote string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.outbound[remote]
}

func (p *egressProxy) connects() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.targets)
}

// TestEgressProxyAndClientCertificates runs a node whose webhooks leave
// through an egress proxy, to a receiver that requires a client
// certificate: the endpoint with one is delivered to, the one without is
// refused (a failed attempt, retried), every connection the receiver sees
// is one the proxy made, and the client key is in no byte of the database.
func TestEgressProxyAndClientCertificates(t *testing.T) {
	t.Parallel()
	backends(t, func(t *testing.T, db string) {
		e := setup(t, db, func(o *options) { o.noDispatch = true })
		ca := storetest.NewCA(t)
		certPEM, keyPEM := ca.Client(t, "shop-42", time.Now().Add(24*time.Hour))

		var mu sync.Mutex
		var peers []string
		var subjects []string
		srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			defer mu.Unlock()
			peers = append(peers, r.RemoteAddr)
			subjects = append(subjects, r.TLS.PeerCertificates[0].Subject.CommonName)
		}))
		srv.TLS = &tls.Config{ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: ca.Pool, MinVersion: tls.VersionTLS12}
		srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshakes are expected
		srv.StartTLS()
		t.Cleanup(srv.Close)
		roots := x509.NewCertPool()
		roots.AddCert(srv.Certificate())

		proxy := startEgressProxy(t)
		proxyURL := &url.URL{Scheme: "http", Host: proxy.ln.Addr().String()}
		e.runDispatcherWith(sender.Config{AllowPrivateNetworks: true, UserAgent: "Herald/test", EgressProxy: proxyURL, RootCAs: roots})

		with := e.createEndpoint(map[string]any{"url": srv.URL + "/hooks", "consumer_id": "c1",
			"client_certificate": certPEM, "client_key": keyPEM})
		without := e.createEndpoint(map[string]any{"url": srv.URL + "/hooks", "consumer_id": "c2"})
		a := e.send("c1", "order.paid", `{"n":1}`)
		b := e.send("c2", "order.paid", `{"n":2}`)
		require.Len(t, a.Deliveries, 1)
		require.Equal(t, with.ID, a.Deliveries[0].EndpointID)

		e.waitStatus(a.Deliveries[0].ID, "delivered")
		var failed []attemptJSON
		waitFor(t, "the attempt without a certificate", func() bool {
			failed = e.attempts(b.Deliveries[0].ID)
			return len(failed) > 0
		})
		require.Nil(t, failed[0].StatusCode, "refused in the handshake: no answer")
		require.NotEmpty(t, failed[0].Error)
		require.Equal(t, "pending", e.delivery(b.Deliveries[0].ID).Status, "a failed attempt, retried")
		require.Equal(t, without.ID, b.Deliveries[0].EndpointID)

		mu.Lock()
		require.Equal(t, []string{"shop-42"}, subjects)
		for _, peer := range peers {
			require.True(t, proxy.made(peer), "the receiver saw %s, a connection the proxy did not make", peer)
		}
		mu.Unlock()
		require.Equal(t, 2, proxy.connects(), "one tunnel per endpoint, each its own pool")

		// The key is sealed: no byte of the database holds it.
		storetest.RequireClientKeyAbsent(t, databaseBytes(t, db), keyPEM)
	})
}

// runDispatcherWith runs a dispatcher of the node's store with a sender
// of cfg until the test ends.
func (e *env) runDispatcherWith(cfg sender.Config) {
	e.t.Helper()
	d := dispatch.New(dispatch.Config{
		Store:        e.app.Store,
		Sender:       sender.New(cfg),
		Clock:        e.clock,
		Concurrency:  4,
		PollInterval: pollInterval,
		DrainTimeout: time.Millisecond,
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	e.nodes.Add(1)
	go func() {
		defer close(done)
		_ = d.Run(ctx)
	}()
	e.t.Cleanup(func() {
		cancel()
		<-done
	})
}

// databaseBytes is what a copy of the database would hold of its
// endpoints: the SQLite file and its WAL, or on PostgreSQL the endpoints
// table's rows as stored (each column's text).
func databaseBytes(t *testing.T, db string) []byte {
	t.Helper()
	if path, ok := strings.CutPrefix(db, "sqlite://"); ok {
		var out []byte
		for _, f := range []string{path, path + "-wal"} {
			b, err := os.ReadFile(f)
			if err != nil && !os.IsNotExist(err) {
				require.NoError(t, err)
			}
			out = append(out, b...)
		}
		return out
	}
	conn, err := pgx.Connect(t.Context(), db)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	var rows string
	require.NoError(t, conn.QueryRow(t.Context(), `SELECT string_agg(e::text, E'\n') FROM endpoints e`).Scan(&rows))
	require.Contains(t, rows, "enc:v1:", "the key is sealed")
	return []byte(rows)
}
