package cli_test

import (
	"net"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/heraldhooks/herald/internal/cli"
)

// TestProbe: herald probe, the health check of the container image (which
// has no shell and no curl), succeeds on a 2xx answer only, and without a
// URL asks /readyz at serve's own --addr (HERALD_ADDR), on loopback when
// that address names every interface.
func TestProbe(t *testing.T) {
	t.Parallel()
	ready := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/readyz" {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write([]byte(`{"status":"ok"}`))
	}))
	t.Cleanup(ready.Close)
	notReady := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	t.Cleanup(notReady.Close)
	_, port, err := net.SplitHostPort(ready.Listener.Addr().String())
	require.NoError(t, err)

	t.Run("ReadyURL", func(t *testing.T) {
		t.Parallel()
		_, _, err := run(t, nil, "probe", ready.URL+"/readyz")
		require.NoError(t, err)
	})
	t.Run("NotReadyFails", func(t *testing.T) {
		t.Parallel()
		_, _, err := run(t, nil, "probe", notReady.URL+"/readyz")
		require.ErrorContains(t, err, "503")
	})
	t.Run("NothingListeningFails", func(t *testing.T) {
		t.Parallel()
		_, _, err := run(t, nil, "probe", "http://127.0.0.1:1/readyz")
		require.Error(t, err)
	})
	t.Run("DefaultFollowsServesAddr", func(t *testing.T) {
		t.Parallel()
		_, _, err := run(t, map[string]string{"HERALD_ADDR": ":" + port}, "probe")
		require.NoError(t, err, "an unspecified host is asked on loopback")
		_, _, err = run(t, map[string]string{"HERALD_ADDR": "0.0.0.0:" + port, "HERALD_PROBE_PATH": "/nope"}, "probe")
		require.ErrorContains(t, err, "404")
	})
}

// TestEnvTwins: the lists the container files are checked against hold
// each command's own twins, those of their own that some flags have
// included, and no other command's.
func TestEnvTwins(t *testing.T) {
	t.Parallel()
	serve, err := cli.EnvTwins("serve")
	require.NoError(t, err)
	require.Subset(t, serve, []string{"HERALD_DB", "HERALD_ADDR", "HERALD_ENCRYPTION_KEY", "HERALD_API_KEY"})
	require.NotContains(t, serve, "HERALD_METRICS_ADDR", "a worker's")
	require.NotContains(t, serve, "HERALD_HELP")
	worker, err := cli.EnvTwins("worker")
	require.NoError(t, err)
	require.Contains(t, worker, "HERALD_METRICS_ADDR")
	migrate, err := cli.EnvTwins("migrate")
	require.NoError(t, err)
	require.Equal(t, []string{"HERALD_DB", "HERALD_ENCRYPTION_KEY"}, migrate)
	probe, err := cli.EnvTwins("probe")
	require.NoError(t, err)
	require.Equal(t, []string{"HERALD_ADDR", "HERALD_PROBE_PATH", "HERALD_PROBE_TIMEOUT"}, probe)
	_, err = cli.EnvTwins("nope")
	require.Error(t, err)
}
