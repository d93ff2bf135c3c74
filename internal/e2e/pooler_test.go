package e2e

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/heraldhooks/herald/internal/syncbuf"
)

const pgbouncerBinary = "/usr/sbin/pgbouncer"

// TestThroughPgBouncerTransactionMode runs the herald binary through
// Debian's PgBouncer in transaction mode (each transaction on whatever
// server connection is free; no named prepared statements, session
// settings or session advisory locks survive): herald migrate, then serve
// with --db through the pooler (?pooler=transaction) and --db-listen-url
// direct. Events are ingested and delivered to a real receiver, and with
// --poll-interval a minute only the wake-ups (LISTEN on the direct URL) can
// have sent them on at once. A worker without a listen URL warns that it
// polls.
func TestThroughPgBouncerTransactionMode(t *testing.T) {
	t.Parallel()
	if _, err := os.Stat(pgbouncerBinary); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s is missing: .ci/run installs Debian's pgbouncer", pgbouncerBinary)
		}
		t.Skipf("%s is missing (apt-get install pgbouncer)", pgbouncerBinary)
	}
	base := os.Getenv("HERALD_TEST_DATABASE_URL")
	if base == "" {
		t.Skip("HERALD_TEST_DATABASE_URL is not set")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	// A database of its own: a pooler cannot pass search_path at startup,
	// so the test does not use a schema of a shared database.
	admin, err := pgx.Connect(ctx, base)
	require.NoError(t, err)
	defer admin.Close(context.Background())
	dbName := fmt.Sprintf("herald_pgbouncer_%d", time.Now().UnixNano())
	_, err = admin.Exec(ctx, "CREATE DATABASE "+dbName)
	require.NoError(t, err)
	t.Cleanup(func() {
		c, err := pgx.Connect(context.Background(), base)
		if err == nil {
			_, _ = c.Exec(context.Background(), "DROP DATABASE IF EXISTS "+dbName+" WITH (FORCE)")
			_ = c.Close(context.Background())
		}
	})
	direct, err := url.Parse(base)
	require.NoError(t, err)
	direct.Path = "/" + dbName
	pgHost, pgPort, err := net.SplitHostPort(direct.Host)
	require.NoError(t, err)
	user := direct.User.Username()

	// PgBouncer, unprivileged, with its own ini on a free loopback port.
	dir, err := os.MkdirTemp("", "herald-pgbouncer-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	require.NoError(t, os.Chmod(dir, 0o755)) // readable by the user it drops to
	_, port, err := net.SplitHostPort(freeAddr(t))
	require.NoError(t, err)
	ini := filepath.Join(dir, "pgbouncer.ini")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "users.txt"), fmt.Appendf(nil, "%q \"\"\n", user), 0o644))
	require.NoError(t, os.WriteFile(ini, fmt.Appendf(nil, `[databases]
herald = host=%s port=%s dbname=%s user=%s

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = %s
unix_socket_dir =
auth_type = trust
auth_file = %s
pool_mode = transaction
default_pool_size = 4
max_client_conn = 200
`, pgHost, pgPort, dbName, user, port, filepath.Join(dir, "users.txt")), 0o644))
	args := []string{ini}
	if os.Geteuid() == 0 {
		args = []string{"-u", "postgres", ini} // it will not run as root
	}
	var bouncerLog syncbuf.Buffer
	bouncer := exec.CommandContext(ctx, pgbouncerBinary, args...)
	bouncer.Stdout, bouncer.Stderr = &bouncerLog, &bouncerLog
	require.NoError(t, bouncer.Start())
	t.Cleanup(func() {
		_ = bouncer.Process.Signal(syscall.SIGTERM)
		_ = bouncer.Wait()
	})
	waitFor(t, "pgbouncer to listen", func() bool {
		c, err := net.Dial("tcp", "127.0.0.1:"+port)
		if err == nil {
			c.Close()
		}
		return err == nil
	})

	q := direct.Query()
	q.Set("sslmode", "disable")
	direct.RawQuery = q.Encode()
	pooled := *direct
	pooled.Host = "127.0.0.1:" + port
	pooled.Path = "/herald"
	q.Set("pooler", "transaction")
	pooled.RawQuery = q.Encode()

	bin := heraldBinary(t)
	env := append(os.Environ(), "HERALD_ENCRYPTION_KEY="+testEncryptionKey)
	migrate := exec.CommandContext(ctx, bin, "migrate", "--db", pooled.String())
	migrate.Env = env
	out, err := migrate.CombinedOutput()
	require.NoError(t, err, "herald migrate through pgbouncer: %s\npgbouncer: %s", out, bouncerLog.String())
	require.Contains(t, string(out), "up to date")

	serve := exec.CommandContext(ctx, bin, "serve", "--addr", "127.0.0.1:0", "--db", pooled.String(),
		"--db-listen-url", direct.String(), "--poll-interval", "1m", "--allow-private-networks")
	serve.Env = env
	stdout, err := serve.StdoutPipe()
	require.NoError(t, err)
	var stderr syncbuf.Buffer
	serve.Stderr = &stderr
	require.NoError(t, serve.Start())
	stopped := stopOnCleanup(t, serve)
	keyRE := regexp.MustCompile(`Bearer (hk_[A-Za-z0-9_-]+)`)
	lines := bufio.NewScanner(stdout)
	var key string
	for key == "" && lines.Scan() {
		if m := keyRE.FindStringSubmatch(lines.Text()); m != nil {
			key = m[1]
		}
	}
	require.NotEmpty(t, key, "serve printed no API key; stderr: %s", stderr.String())
	go func() { _, _ = io.Copy(io.Discard, stdout) }()
	api := "http://" + servingAddr(t, &stderr, "")

	var mu sync.Mutex
	arrived := map[string]bool{}
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		arrived[r.Header.Get("webhook-id")] = true
		mu.Unlock()
	}))
	defer rcv.Close()
	post := func(path, body string) int {
		req, err := http.NewRequest("POST", api+path, strings.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	require.Equal(t, http.StatusCreated, post("/v1/endpoints", fmt.Sprintf(`{"url": %q, "consumer_id": "c1"}`, rcv.URL)))

	// Events one at a time and in overlapping requests (group commit).
	const n = 40
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			code := post("/v1/events", fmt.Sprintf(`{"consumer_id":"c1","event_type":"order.created","payload":{"n":%d}}`, i))
			require.Equal(t, http.StatusAccepted, code)
		}()
	}
	wg.Wait()
	sent := time.Now()
	waitFor(t, "every event delivered through the pooler", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(arrived) == n
	})
	require.Less(t, time.Since(sent), 20*time.Second, "the deliveries waited for a poll: no wake-ups")
	require.NotContains(t, stderr.String(), "level=ERROR", "stderr: %s", tail(stderr.String(), 4000))
	require.NotContains(t, stderr.String(), "poll for new work")

	// Without a listen URL a node warns at start that it polls.
	worker := exec.CommandContext(ctx, bin, "worker", "--db", pooled.String(), "--allow-private-networks")
	worker.Env = env
	var wlog syncbuf.Buffer
	worker.Stdout, worker.Stderr = &wlog, &wlog
	require.NoError(t, worker.Start())
	stopOnCleanup(t, worker)
	waitFor(t, "the worker to warn that it polls", func() bool {
		return strings.Contains(wlog.String(), "poll for new work")
	})

	require.NoError(t, serve.Process.Signal(syscall.SIGTERM))
	select {
	case <-stopped:
	case <-time.After(30 * time.Second):
		t.Fatal("herald did not stop on SIGTERM")
	}
}

// stopOnCleanup sends cmd SIGTERM at the test's end (killing it after
// 30 s); the channel closes when cmd has exited.
func stopOnCleanup(t *testing.T, cmd *exec.Cmd) <-chan struct{} {
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
		}
	})
	return exited
}
