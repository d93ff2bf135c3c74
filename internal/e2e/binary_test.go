package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhooks/herald/internal/store/sqlitestore/sqlitetest"
	"github.com/heraldhooks/herald/internal/syncbuf"
	"github.com/heraldhooks/herald/verify"
)

// TestBinaryAsAUserWould builds the herald binary and runs it as a user
// would: `herald serve` on a fresh SQLite file with no API key (it makes and
// prints one), an endpoint, an event, and the signed delivery arriving.
func TestBinaryAsAUserWould(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bin := heraldBinary(t)

	db := "sqlite://" + filepath.Join(dir, "herald.db")

	migrate := exec.Command(bin, "migrate", "--db", db)
	out, err := migrate.CombinedOutput()
	require.NoError(t, err, "herald migrate: %s", out)
	require.Contains(t, string(out), "up to date")

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// Port 0: the system picks a free port, which serve logs.
	serve := exec.CommandContext(ctx, bin, "serve", "--addr", "127.0.0.1:0", "--db", db, "--allow-private-networks")
	stdout, err := serve.StdoutPipe()
	require.NoError(t, err)
	var stderr syncbuf.Buffer
	serve.Stderr = &stderr
	require.NoError(t, serve.Start())
	// exited closes when serve has exited, waitErr then holding how: both
	// the test's own stop and the cleanup wait on it (a value sent on a
	// channel would reach only the first, and the cleanup would wait out
	// its 30 s for an exit that had already happened).
	exited := make(chan struct{})
	var waitErr error
	go func() { waitErr = serve.Wait(); close(exited) }()
	t.Cleanup(func() {
		select {
		case <-exited:
			return
		default:
		}
		_ = serve.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			_ = serve.Process.Kill()
		}
	})

	// The key is printed once on first start.
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

	base := "http://" + servingAddr(t, &stderr, "")
	waitFor(t, "herald to answer /healthz", func() bool {
		resp, err := http.Get(base + "/healthz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})

	call := func(method, path, key, body string) (int, map[string]any) {
		req, err := http.NewRequest(method, base+path, strings.NewReader(body))
		require.NoError(t, err)
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		var m map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&m)
		return resp.StatusCode, m
	}

	code, _ := call("GET", "/v1/endpoints", "", "")
	require.Equal(t, http.StatusUnauthorized, code, "no key, no entry")

	got := make(chan *http.Request, 1)
	bodies := make(chan []byte, 1)
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- r
		bodies <- b
	}))
	defer rcv.Close()

	code, ep := call("POST", "/v1/endpoints", key, fmt.Sprintf(`{"url": %q, "consumer_id": "cust_42"}`, rcv.URL+"/hooks"))
	require.Equal(t, http.StatusCreated, code, "%v", ep)
	secret, _ := ep["secret"].(string)
	require.True(t, strings.HasPrefix(secret, "whsec_"))

	code, ev := call("POST", "/v1/events", key, `{"consumer_id":"cust_42","event_type":"order.created","payload":{"order_id":"o_1"}}`)
	require.Equal(t, http.StatusAccepted, code, "%v", ev)

	select {
	case r := <-got:
		body := <-bodies
		require.Equal(t, `{"order_id":"o_1"}`, string(body))
		require.Equal(t, ev["id"], r.Header.Get("webhook-id"))
		v := verify.Verifier{Secrets: []string{secret}}
		_, err := v.VerifyPayload(r.Header, body)
		require.NoError(t, err, "the webhook verifies with the endpoint's secret")
	case <-time.After(30 * time.Second):
		t.Fatalf("no delivery arrived; stderr: %s", stderr.String())
	}

	// SIGTERM stops it cleanly.
	require.NoError(t, serve.Process.Signal(syscall.SIGTERM))
	select {
	case <-exited:
		require.NoError(t, waitErr, "stderr: %s", stderr.String())
	case <-time.After(30 * time.Second):
		t.Fatal("herald did not stop on SIGTERM")
	}
}

// TestPrivateDestinationsRefusedByDefault: without
// --allow-private-networks, an endpoint on loopback is refused with a
// message naming the flag.
func TestPrivateDestinationsRefusedByDefault(t *testing.T) {
	t.Parallel()
	e := setup(t, "sqlite://"+sqlitetest.Path(t), func(o *options) { o.denyPrivate = true })
	var out struct {
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	code := e.call("POST", "/v1/endpoints", map[string]any{"url": "http://127.0.0.1:9/hook"}, &out)
	require.Equal(t, http.StatusBadRequest, code)
	require.Equal(t, "invalid_url", out.Error.Code)
	require.Contains(t, out.Error.Message, "--allow-private-networks")
}

// servingAddr waits for a Herald's log (in logs) to say where it serves
// what ("" for its API, "metrics" for its metrics listener) and returns
// that address: a listener given port 0 is on the port the system chose.
func servingAddr(t *testing.T, logs *syncbuf.Buffer, what string) string {
	t.Helper()
	msg := "herald serving"
	if what != "" {
		msg += " " + what
	}
	re := regexp.MustCompile(`msg="` + msg + `" addr=(127\.0\.0\.1:\d+)`)
	var addr string
	waitFor(t, "herald to log where it serves "+msg, func() bool {
		if m := re.FindStringSubmatch(logs.String()); m != nil {
			addr = m[1]
		}
		return addr != ""
	})
	return addr
}

// freeAddr returns an address on loopback that was free a moment ago.
// Another process can take it before the caller listens on it: use it
// only where port 0 cannot be (an address a script must know beforehand).
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return addr
}
