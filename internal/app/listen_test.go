package app

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhooks/herald/internal/config"
	"github.com/heraldhooks/herald/internal/store/sqlitestore/sqlitetest"
)

const listenTestKey = "hk_listen_test_key_0123456789"

// serving starts a node as `herald serve` does (New, then Serve on a
// listener of its own) with the read timeout and the header timeout given
// (0 keeps the default), and returns its address; the node stops when the
// test ends.
func serving(t *testing.T, readTimeout, headerTimeout time.Duration) string {
	t.Helper()
	cfg := config.Default()
	cfg.DB = "sqlite://" + sqlitetest.Path(t)
	cfg.APIKey = listenTestKey
	cfg.ShutdownTimeout = time.Second
	a, err := New(t.Context(), cfg, Deps{}, true)
	require.NoError(t, err)
	t.Cleanup(func() { a.Close() })
	// Below Validate's 1 s floor, which a test may go under: it waits for
	// the cut-off, so the shorter the timeout the shorter the test.
	if readTimeout > 0 {
		a.Config.ReadTimeout = readTimeout
	}
	a.readHeaderTimeout = headerTimeout
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			require.NoError(t, err)
		case <-time.After(30 * time.Second):
			t.Error("the node did not stop within 30 s")
		}
	})
	return ln.Addr().String()
}

// closedBy reports whether the server closed conn (EOF or a reset)
// before deadline, reading and dropping whatever answer it sent first;
// false when the deadline came with the connection still open.
func closedBy(t *testing.T, conn net.Conn, deadline time.Duration) bool {
	t.Helper()
	require.NoError(t, conn.SetReadDeadline(time.Now().Add(deadline)))
	_, err := io.Copy(io.Discard, conn)
	return !errors.Is(err, os.ErrDeadlineExceeded)
}

// TestListenerCutsOffSlowClients: the API's listener closes a connection
// whose headers, or whose body, do not come in time, and answers 431 to
// headers past 64 KiB. The timeouts are 200 ms here, and each cut-off
// must come within 5 s; without them the connection would stay open.
func TestListenerCutsOffSlowClients(t *testing.T) {
	t.Parallel()
	const short, patience = 200 * time.Millisecond, 5 * time.Second

	t.Run("SlowHeaders", func(t *testing.T) {
		t.Parallel()
		// The read timeout stays at its default (a minute): the header
		// timeout alone cuts this client off.
		addr := serving(t, 0, short)
		conn, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		defer conn.Close()
		_, err = io.WriteString(conn, "POST /v1/events HTTP/1.1\r\nHost: herald\r\n")
		require.NoError(t, err)
		require.True(t, closedBy(t, conn, patience), "a client that never ends its headers is cut off")
	})

	t.Run("SlowBody", func(t *testing.T) {
		t.Parallel()
		// The header timeout stays at its default (10 s): the read
		// timeout alone cuts this client off.
		addr := serving(t, short, 0)
		conn, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		defer conn.Close()
		_, err = io.WriteString(conn, "POST /v1/events HTTP/1.1\r\nHost: herald\r\n"+
			"Authorization: Bearer "+listenTestKey+"\r\nContent-Type: application/json\r\n"+
			"Content-Length: 1000\r\n\r\n{\"event_type\":")
		require.NoError(t, err)
		require.True(t, closedBy(t, conn, patience), "a client that never ends its body is cut off")
	})

	t.Run("HeadersPast64KiBAnswer431", func(t *testing.T) {
		t.Parallel()
		addr := serving(t, 0, 0)
		conn, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		defer conn.Close()
		require.NoError(t, conn.SetDeadline(time.Now().Add(patience)))
		_, err = io.WriteString(conn, "GET /healthz HTTP/1.1\r\nHost: herald\r\n"+
			"X-Padding: "+strings.Repeat("a", 100<<10)+"\r\n\r\n")
		require.NoError(t, err)
		res, err := http.ReadResponse(bufio.NewReader(conn), nil)
		require.NoError(t, err)
		res.Body.Close()
		require.Equal(t, http.StatusRequestHeaderFieldsTooLarge, res.StatusCode)

		// Headers under the limit are served.
		res, err = http.Get("http://" + addr + "/healthz")
		require.NoError(t, err)
		res.Body.Close()
		require.Equal(t, http.StatusOK, res.StatusCode)
	})
}

// TestEveryListenerHasTheLimits: the servers beside the API (a worker's
// /metrics, the profiles) are built with the API's limits.
func TestEveryListenerHasTheLimits(t *testing.T) {
	t.Parallel()
	cfg := config.Default()
	cfg.DB = "sqlite://" + sqlitetest.Path(t)
	cfg.ReadTimeout = 42 * time.Second
	cfg.MetricsAddr = "127.0.0.1:0"
	cfg.PprofAddr = "127.0.0.1:0"
	a, err := New(t.Context(), cfg, Deps{}, false)
	require.NoError(t, err)
	t.Cleanup(func() { a.Close() })
	side, err := a.startSides(true)
	defer a.stopSide(side)
	require.NoError(t, err)
	require.Len(t, side, 2, "metrics and profiles")

	type limits struct {
		header, read, write, idle time.Duration
		maxHeader                 int
	}
	of := func(srv *http.Server) limits {
		return limits{srv.ReadHeaderTimeout, srv.ReadTimeout, srv.WriteTimeout, srv.IdleTimeout, srv.MaxHeaderBytes}
	}
	want := limits{header: 10 * time.Second, read: 42 * time.Second, idle: 120 * time.Second, maxHeader: 64 << 10}
	require.Equal(t, want, of(a.newServer(nil)), "the API's")
	for _, srv := range side {
		require.Equal(t, want, of(srv))
	}
}
