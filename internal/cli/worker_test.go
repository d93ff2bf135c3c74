package cli_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhooks/herald"
	"github.com/heraldhooks/herald/internal/cli"
	"github.com/heraldhooks/herald/internal/store"
	"github.com/heraldhooks/herald/internal/store/sqlitestore"
	"github.com/heraldhooks/herald/internal/syncbuf"
	"github.com/heraldhooks/herald/internal/testdb"
)

// TestWorkerDispatchesAndStops: `herald worker` runs no API, only a
// dispatcher: an event already queued in its database is delivered, and
// the worker stops cleanly when its context ends (SIGTERM in main).
func TestWorkerDispatchesAndStops(t *testing.T) {
	t.Parallel()
	path := testdb.SQLitePath(t)
	arrived := make(chan string, 1)
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived <- r.Header.Get("webhook-id")
	}))
	defer rcv.Close()

	ctx := context.Background()
	st, err := sqlitestore.Open(ctx, path, nil)
	require.NoError(t, err)
	require.NoError(t, st.Migrate(ctx))
	_, err = st.EndpointCreate(ctx, &store.EndpointCreateParams{Endpoint: &herald.Endpoint{
		ConsumerID: "c1", URL: rcv.URL, EventTypes: []string{"*"}, Enabled: true,
		Secret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", Timeout: 10 * time.Second,
		SignatureScheme: herald.SchemeStandard,
	}})
	require.NoError(t, err)
	res, err := st.EventIngest(ctx, &store.EventIngestParams{Events: []store.EventIngestItem{
		{ConsumerID: "c1", EventType: "a.b", Payload: []byte(`{}`)},
	}})
	require.NoError(t, err)
	require.NoError(t, st.Close())

	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		var out, errb syncbuf.Buffer
		cmd := cli.New(cli.IO{Out: &out, Err: &errb, Getenv: func(k string) string {
			return map[string]string{"HERALD_ALLOW_PRIVATE_NETWORKS": "true"}[k]
		}})
		cmd.SetArgs([]string{"worker", "--db", "sqlite://" + path})
		done <- cmd.ExecuteContext(runCtx)
	}()
	select {
	case id := <-arrived:
		require.Equal(t, res[0].Event.ID, id)
	case err := <-done:
		t.Fatalf("worker exited early: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("the worker delivered nothing")
	}
	stopAndWait(t, stop, done)
}

// TestWorkerServesProfilesWhenAsked: --pprof-addr serves Go's runtime
// profiles beside the dispatcher, and the worker still stops cleanly.
func TestWorkerServesProfilesWhenAsked(t *testing.T) {
	t.Parallel()
	path := testdb.SQLitePath(t)
	runCtx, stop := context.WithCancel(context.Background())
	defer stop()
	var out, errb syncbuf.Buffer
	done := make(chan error, 1)
	go func() {
		cmd := cli.New(cli.IO{Out: &out, Err: &errb, Getenv: func(string) string { return "" }})
		cmd.SetArgs([]string{"worker", "--db", "sqlite://" + path, "--pprof-addr", "127.0.0.1:0"})
		done <- cmd.ExecuteContext(runCtx)
	}()
	served := regexp.MustCompile(`msg="herald serving pprof" addr=(127\.0\.0\.1:\d+)`)
	var addr string
	require.Eventually(t, func() bool {
		m := served.FindStringSubmatch(errb.String())
		if m != nil {
			addr = m[1]
		}
		return m != nil
	}, 30*time.Second, 10*time.Millisecond, "no pprof address logged: %s", errb.String())

	// The profiles are served from before the dispatcher starts: its
	// goroutines show once it has.
	var profile string
	require.Eventually(t, func() bool {
		resp, err := http.Get("http://" + addr + "/debug/pprof/goroutine?debug=1")
		if err != nil {
			profile = err.Error()
			return false
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		profile = fmt.Sprintf("%d %s %v", resp.StatusCode, body, err)
		return err == nil && resp.StatusCode == http.StatusOK && strings.Contains(string(body), "dispatch.(*Dispatcher)")
	}, 30*time.Second, 20*time.Millisecond, "the profile is of this worker: %.2000s", profile)

	// Not the command line: it carries the flags' secrets.
	cmdline, err := http.Get("http://" + addr + "/debug/pprof/cmdline")
	require.NoError(t, err)
	line, _ := io.ReadAll(cmdline.Body)
	cmdline.Body.Close()
	require.Equal(t, http.StatusNotFound, cmdline.StatusCode, "%s", line)
	require.NotContains(t, string(line), path)

	stopAndWait(t, stop, done)
	_, err = http.Get("http://" + addr + "/debug/pprof/")
	require.Error(t, err, "the profile server stops with the worker")
}

// stopAndWait stops a worker and waits for it to return without error.
func stopAndWait(t *testing.T, stop func(), done <-chan error) {
	t.Helper()
	stop()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(30 * time.Second):
		t.Fatal("the worker did not stop")
	}
}
