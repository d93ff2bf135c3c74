package heraldproc

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestPeakRSS(t *testing.T) {
	t.Parallel()
	t.Run("FromStatus", func(t *testing.T) {
		t.Parallel()
		status := "Name:\therald\nVmPeak:\t  900000 kB\nVmHWM:\t   51200 kB\nVmRSS:\t   40000 kB\n"
		n, err := parsePeakRSS(strings.NewReader(status))
		require.NoError(t, err)
		require.Equal(t, int64(51200*1024), n)
	})
	t.Run("NoPeakRSS", func(t *testing.T) {
		t.Parallel()
		_, err := parsePeakRSS(strings.NewReader("Name:\therald\n"))
		require.Error(t, err)
	})
	t.Run("ThisProcess", func(t *testing.T) {
		t.Parallel()
		if _, err := os.Stat("/proc/self/status"); err != nil {
			t.Skipf("no /proc here: %v", err)
		}
		n, err := PeakRSS("self")
		require.NoError(t, err)
		require.Positive(t, n)
	})
}

func TestTailKeepsTheLastBytes(t *testing.T) {
	t.Parallel()
	b := &Tail{Max: 4}
	require.Equal(t, "(none)", b.String())
	_, _ = b.Write([]byte("abc"))
	_, _ = b.Write([]byte("def"))
	require.Equal(t, "cdef", b.String())
	b.Reset()
	require.Equal(t, "(none)", b.String())
}

func TestEnvDropsHeraldVariables(t *testing.T) {
	t.Setenv("HERALD_DB", "sqlite://x.db")
	t.Setenv("HERALDRY", "kept")
	env := Env()
	require.NotContains(t, env, "HERALD_DB=sqlite://x.db")
	require.Contains(t, env, "HERALDRY=kept")
}

func TestWaitReady(t *testing.T) {
	t.Parallel()
	t.Run("AnswersOnceOurs", func(t *testing.T) {
		t.Parallel()
		srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
		defer srv.Close()
		asked := 0
		ours := func(_ context.Context, _ *http.Client) bool { asked++; return asked == 2 }
		require.NoError(t, WaitReady(t.Context(), srv.URL, make(chan struct{}), ours))
		require.Equal(t, 2, asked)
	})
	t.Run("ChildExited", func(t *testing.T) {
		t.Parallel()
		addr, err := FreeAddr()
		require.NoError(t, err)
		exited := make(chan struct{})
		close(exited)
		require.ErrorIs(t, WaitReady(t.Context(), "http://"+addr+"/healthz", exited, nil), ErrExited)
	})
}
