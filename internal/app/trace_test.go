package app

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhooks/herald/internal/config"
	"github.com/heraldhooks/herald/internal/store/sqlitestore/sqlitetest"
)

// TestTracing: the OTEL_* variables the node is given (Deps.Getenv, not
// the process's) turn tracing on; a node that stops flushes its spans
// once drained, with no flush asked for; what it cannot speak is refused
// at start with the other configuration problems.
func TestTracing(t *testing.T) {
	t.Parallel()
	t.Run("FlushedOnDrain", func(t *testing.T) {
		t.Parallel()
		var posts atomic.Int64
		col := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			if r.URL.Path == "/v1/traces" {
				posts.Add(1)
			}
			w.Header().Set("Content-Type", "application/x-protobuf")
		}))
		t.Cleanup(col.Close)
		cfg := config.Default()
		cfg.DB = "sqlite://" + sqlitetest.Path(t)
		cfg.APIKey = listenTestKey
		cfg.ShutdownTimeout = time.Second
		// Batches wait ten minutes: only the drain's flush exports.
		env := map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": col.URL, "OTEL_BSP_SCHEDULE_DELAY": "600000"}
		a, err := New(t.Context(), cfg, Deps{Getenv: func(k string) string { return env[k] }}, true)
		require.NoError(t, err)
		t.Cleanup(func() { a.Close() })
		require.True(t, a.Trace.On())
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- a.Serve(ctx, ln) }()
		resp, err := http.Get("http://" + ln.Addr().String() + "/v1/endpoints")
		require.NoError(t, err)
		resp.Body.Close()
		require.Zero(t, posts.Load(), "batched: nothing exported yet")
		cancel()
		require.NoError(t, <-done)
		require.Equal(t, int64(1), posts.Load(), "the drain flushed the call's span")
	})
	t.Run("RefusesAnotherProtocol", func(t *testing.T) {
		t.Parallel()
		cfg := config.Default()
		cfg.DB = "sqlite://" + sqlitetest.Path(t)
		cfg.APIKey = listenTestKey
		env := map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4317", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}
		_, err := New(t.Context(), cfg, Deps{Getenv: func(k string) string { return env[k] }}, true)
		require.ErrorContains(t, err, "OTEL_EXPORTER_OTLP_PROTOCOL=grpc: only http/protobuf is supported")
	})
}
