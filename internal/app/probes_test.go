package app

import (
	"net"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/heraldhooks/herald/internal/config"
	"github.com/heraldhooks/herald/internal/store/sqlitestore/sqlitetest"
)

// TestWorkerProbes: a worker, which has no API, answers the probes of a
// container's health check and of Kubernetes on its --metrics-addr:
// /healthz while it runs, /readyz only while its database answers.
func TestWorkerProbes(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())

	cfg := config.Default()
	cfg.DB = "sqlite://" + sqlitetest.Path(t)
	cfg.MetricsAddr = addr
	a, err := New(t.Context(), cfg, Deps{}, false)
	require.NoError(t, err)
	side, err := a.startSides(true)
	defer a.stopSide(side)
	require.NoError(t, err)

	status := func(path string) int {
		res, err := http.Get("http://" + addr + path)
		require.NoError(t, err)
		res.Body.Close()
		return res.StatusCode
	}
	require.Equal(t, http.StatusOK, status("/healthz"))
	require.Equal(t, http.StatusOK, status("/readyz"))
	require.Equal(t, http.StatusOK, status("/metrics"))

	require.NoError(t, a.Close())
	require.Equal(t, http.StatusServiceUnavailable, status("/readyz"), "the database no longer answers")
	require.Equal(t, http.StatusOK, status("/healthz"), "the process still runs")
}
