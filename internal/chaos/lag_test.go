package chaos

import (
	"io"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestLagRelay: what the far side sends arrives lag later; what the near
// side sends goes straight through; and what the relay holds when the far
// side ends is dropped, not delivered.
func TestLagRelay(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	far := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err == nil {
			far <- c
		}
	}()
	const lag = 300 * time.Millisecond
	r, err := startLagRelay(ln.Addr().String(), lag)
	require.NoError(t, err)
	t.Cleanup(r.close)
	near, err := net.Dial("tcp", ln.Addr().(*net.TCPAddr).IP.String()+":"+itoa(r.port()))
	require.NoError(t, err)
	t.Cleanup(func() { near.Close() })
	f := <-far
	t.Cleanup(func() { f.Close() })

	// Near to far: no lag.
	start := time.Now()
	_, err = near.Write([]byte("ping"))
	require.NoError(t, err)
	buf := make([]byte, 4)
	_, err = io.ReadFull(f, buf)
	require.NoError(t, err)
	require.Less(t, time.Since(start), lag)

	// Far to near: lag.
	start = time.Now()
	_, err = f.Write([]byte("pong"))
	require.NoError(t, err)
	_, err = io.ReadFull(near, buf)
	require.NoError(t, err)
	require.Equal(t, "pong", string(buf))
	require.GreaterOrEqual(t, time.Since(start), lag)

	// Sent, then the far side dies before the lag has passed: lost.
	_, err = f.Write([]byte("last"))
	require.NoError(t, err)
	require.NoError(t, f.Close())
	require.NoError(t, near.SetReadDeadline(time.Now().Add(2*lag)))
	n, err := near.Read(buf)
	require.Zero(t, n)
	require.ErrorIs(t, err, io.EOF)
}

func itoa(n int) string { return strconv.Itoa(n) }
