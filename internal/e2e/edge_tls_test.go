package e2e

import (
	"context"
	"crypto/tls"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhooks/herald/internal/app"
	"github.com/heraldhooks/herald/internal/clock"
	"github.com/heraldhooks/herald/internal/config"
	"github.com/heraldhooks/herald/internal/edge"
	"github.com/heraldhooks/herald/internal/store/sqlitestore/sqlitetest"
	"github.com/heraldhooks/herald/internal/syncbuf"
)

// serveInProcess runs a node on ln with cfg (its database and key set
// here) and the test clock c, logging at info to the buffer it returns,
// until the test ends.
func serveInProcess(t *testing.T, cfg config.Config, c clock.Clock, ln net.Listener) *syncbuf.Buffer {
	t.Helper()
	cfg.DB = "sqlite://" + sqlitetest.Path(t)
	cfg.APIKey = testAPIKey
	cfg.ShutdownTimeout = time.Second
	logs := &syncbuf.Buffer{}
	a, err := app.New(t.Context(), cfg, app.Deps{Clock: c, Logger: slog.New(slog.NewTextHandler(logs, nil))}, true)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
		a.Close()
	})
	waitFor(t, "the node to serve", func() bool { return strings.Contains(logs.String(), `msg="herald serving"`) })
	return logs
}

// handshake opens a new TLS connection to addr and returns the serial of
// the certificate served and the protocol agreed.
func handshake(t *testing.T, addr string) (int64, string) {
	t.Helper()
	conn, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"h2", "http/1.1"}})
	require.NoError(t, err)
	defer conn.Close()
	st := conn.ConnectionState()
	return st.PeerCertificates[0].SerialNumber.Int64(), st.NegotiatedProtocol
}

// TestNativeTLSRenewedWithoutRestart: with --tls-cert and --tls-key, the
// API and the profile listener serve HTTPS with HTTP/2 offered; a pair
// rewritten in place is served from the first connection once the check
// interval has passed on the node's clock, without a restart.
func TestNativeTLSRenewedWithoutRestart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	writeTLSPair(t, certFile, keyFile, 1)
	cfg := config.Default()
	cfg.TLSCert, cfg.TLSKey = certFile, keyFile
	cfg.PprofAddr = "127.0.0.1:0"
	c := clock.NewTest(start)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	logs := serveInProcess(t, cfg, c, ln)
	pprofAddr := servingAddr(t, logs, "pprof")

	for _, addr := range []string{ln.Addr().String(), pprofAddr} {
		serial, proto := handshake(t, addr)
		require.EqualValues(t, 1, serial, addr)
		require.Equal(t, "h2", proto, addr)
	}
	writeTLSPair(t, certFile, keyFile, 2)
	serial, _ := handshake(t, ln.Addr().String())
	require.EqualValues(t, 1, serial, "not looked at again before the interval")
	c.Advance(edge.CertCheckEvery)
	for _, addr := range []string{ln.Addr().String(), pprofAddr} {
		serial, _ := handshake(t, addr)
		require.EqualValues(t, 2, serial, "the renewed pair on %s", addr)
	}
	require.Contains(t, logs.String(), "loaded the renewed TLS certificate")
}

// TestServeWarnsOffLoopbackInPlainHTTP: serve listening beyond loopback
// without TLS and without --public-url warns at start; on loopback, or
// with --public-url, it does not.
func TestServeWarnsOffLoopbackInPlainHTTP(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, addr, publicURL string
		warns                 bool
	}{
		{"EveryInterface", "0.0.0.0:0", "", true},
		{"EveryInterfaceBehindAProxy", "0.0.0.0:0", "https://herald.example.com", false},
		{"Loopback", "127.0.0.1:0", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ln, err := net.Listen("tcp", tc.addr)
			require.NoError(t, err)
			cfg := config.Default()
			cfg.PublicURL = tc.publicURL
			logs := serveInProcess(t, cfg, clock.Real{}, ln) // the warning comes before "herald serving"
			require.Equal(t, tc.warns, strings.Contains(logs.String(), "serving plain HTTP beyond loopback without --public-url"), logs.String())
		})
	}
}
