package chaos

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestBackToWork: a node is back at work once its ingests plus delivered
// deliveries grow (retries and failures do not count); a node killed or
// frozen meanwhile is not judged; one that does nothing is not back.
func TestBackToWork(t *testing.T) {
	t.Parallel()
	var ingested, delivered, retried atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintf(w, "# HELP herald_events_ingested_total x\nherald_events_ingested_total %d\n", ingested.Load())
		fmt.Fprintf(w, "herald_deliveries_total{outcome=\"delivered\"} %d\n", delivered.Load())
		fmt.Fprintf(w, "herald_deliveries_total{outcome=\"retry\"} %d\n", retried.Load())
		fmt.Fprintf(w, "herald_events_ingested_total_other 99\n")
	}))
	t.Cleanup(srv.Close)
	n := &node{name: "worker-1", metrics: srv.URL, starts: 1}

	v, err := workDone(t.Context(), srv.Client(), srv.URL)
	require.NoError(t, err)
	require.Zero(t, v)

	// Retries alone are no work done; a delivery is.
	go func() {
		time.Sleep(300 * time.Millisecond)
		retried.Add(5)
		time.Sleep(300 * time.Millisecond)
		delivered.Add(1)
	}()
	took, ok, interrupted := backToWork(t.Context(), n, time.Now(), -1, 5*time.Second)
	require.True(t, ok)
	require.False(t, interrupted)
	require.GreaterOrEqual(t, took, 500*time.Millisecond)

	// An ingest counts too.
	go func() {
		time.Sleep(300 * time.Millisecond)
		ingested.Add(1)
	}()
	_, ok, _ = backToWork(t.Context(), n, time.Now(), -1, 5*time.Second)
	require.True(t, ok)

	// Work done before the first look counts when the base was read
	// before it (while the primary was dead).
	base, err := workDone(t.Context(), srv.Client(), srv.URL)
	require.NoError(t, err)
	delivered.Add(1)
	took, ok, _ = backToWork(t.Context(), n, time.Now(), base, 5*time.Second)
	require.True(t, ok)
	require.Less(t, took, 100*time.Millisecond)

	// Nothing done within the limit.
	_, ok, interrupted = backToWork(t.Context(), n, time.Now(), -1, 500*time.Millisecond)
	require.False(t, ok)
	require.False(t, interrupted)

	// Killed (a new life) or frozen before it was back: not judged.
	go func() {
		time.Sleep(200 * time.Millisecond)
		n.mu.Lock()
		n.starts++
		n.mu.Unlock()
	}()
	_, ok, interrupted = backToWork(t.Context(), n, time.Now(), -1, 5*time.Second)
	require.False(t, ok)
	require.True(t, interrupted)
	n.mu.Lock()
	n.stopped = true
	n.mu.Unlock()
	_, _, interrupted = backToWork(t.Context(), n, time.Now(), -1, 5*time.Second)
	require.True(t, interrupted)
}
