package cli_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
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

// TestBackupWhileDelivering: `herald backup` copies a SQLite database
// while a worker delivers from it and events keep arriving; the copy opens
// as a database of its own and holds every event acknowledged before the
// backup began. A second backup to the same file is refused without
// --force, and PostgreSQL is refused with a pointer to its own tools.
func TestBackupWhileDelivering(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := testdb.SQLitePath(t)
	var delivered atomic.Int64
	rcv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { delivered.Add(1) }))
	defer rcv.Close()

	st, err := sqlitestore.Open(ctx, path, nil)
	require.NoError(t, err)
	defer st.Close()
	require.NoError(t, st.Migrate(ctx))
	_, err = st.EndpointCreate(ctx, &store.EndpointCreateParams{Endpoint: &herald.Endpoint{
		ConsumerID: "c1", URL: rcv.URL, EventTypes: []string{"*"}, Enabled: true,
		Secret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", Timeout: 10 * time.Second,
		SignatureScheme: herald.SchemeStandard,
	}})
	require.NoError(t, err)

	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		var out, errb syncbuf.Buffer
		cmd := cli.New(cli.IO{Out: &out, Err: &errb, Getenv: func(k string) string {
			return map[string]string{"HERALD_ALLOW_PRIVATE_NETWORKS": "true"}[k]
		}})
		cmd.SetArgs([]string{"worker", "--db", "sqlite://" + path, "--poll-interval", "50ms"})
		done <- cmd.ExecuteContext(runCtx)
	}()

	// Events keep arriving, before, during and after the backup.
	var mu sync.Mutex
	var acked []string
	ingestDone := make(chan struct{})
	ingestCtx, stopIngest := context.WithCancel(ctx)
	go func() {
		defer close(ingestDone)
		for ingestCtx.Err() == nil {
			res, err := st.EventIngest(ingestCtx, &store.EventIngestParams{Events: []store.EventIngestItem{
				{ConsumerID: "c1", EventType: "a.b", Payload: []byte(`{"n":1}`)},
			}})
			if err != nil {
				t.Logf("ingest: %v", err)
				return
			}
			mu.Lock()
			acked = append(acked, res[0].Event.ID)
			mu.Unlock()
			// Another process's writes wait on SQLite's lock, which is not
			// fair: a writer that never pauses would starve the worker's.
			time.Sleep(2 * time.Millisecond)
		}
	}()
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(acked) >= 50 && delivered.Load() >= 10
	}, 30*time.Second, 10*time.Millisecond, "the node neither ingests nor delivers")

	mu.Lock()
	before := append([]string(nil), acked...)
	mu.Unlock()
	to := filepath.Join(t.TempDir(), "copy.db")
	out, _, err := run(t, nil, "backup", "--db", "sqlite://"+path, "--to", to)
	require.NoError(t, err)
	require.Contains(t, out, "backed up")
	deliveredAfter := delivered.Load()
	require.Eventually(t, func() bool { return delivered.Load() > deliveredAfter }, 30*time.Second, 10*time.Millisecond,
		"delivery stopped during the backup")

	stopIngest()
	<-ingestDone
	stopAndWait(t, stop, done)

	cp, err := sqlitestore.Open(ctx, to, nil)
	require.NoError(t, err)
	defer cp.Close()
	require.NoError(t, cp.Migrate(ctx)) // already at the newest: nothing to do
	for _, id := range before {
		ev, err := cp.EventGet(ctx, id)
		require.NoError(t, err, "event %s acknowledged before the backup is missing from the copy", id)
		require.Equal(t, id, ev.ID)
	}

	// The copy is not overwritten unless asked.
	_, _, err = run(t, nil, "backup", "--db", "sqlite://"+path, "--to", to)
	require.ErrorContains(t, err, "--force")
	_, _, err = run(t, nil, "backup", "--db", "sqlite://"+path, "--to", to, "--force")
	require.NoError(t, err)
	_, err = os.Stat(to)
	require.NoError(t, err)

	_, _, err = run(t, nil, "backup", "--db", "postgres://127.0.0.1/x", "--to", filepath.Join(t.TempDir(), "pg"))
	require.ErrorContains(t, err, "pg_dump")
}

// TestVersionPrintsReleaseCommitAndSchema: herald version names the build
// ("devel" when the release process set none), the commit and the newest
// migration of each backend.
func TestVersionPrintsReleaseCommitAndSchema(t *testing.T) {
	t.Parallel()
	out, _, err := run(t, nil, "version")
	require.NoError(t, err)
	require.Contains(t, out, "herald devel\n")
	require.Contains(t, out, "commit: ")
	require.Regexp(t, `schema: postgres migration [1-9][0-9]*, sqlite migration [1-9][0-9]*`, out)
}
