package cli_test

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhooks/herald/internal/cli"
	"github.com/heraldhooks/herald/verify"
)

const (
	secretA = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	secretB = "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD"
)

// listening is a running `herald listen`.
type listening struct {
	t     *testing.T
	url   string
	lines chan string
	stop  context.CancelFunc
	done  chan error
}

// startListen runs herald listen on a free port with args; it stops when
// the test ends. The first line it prints says where it listens.
func startListen(t *testing.T, env map[string]string, args ...string) *listening {
	t.Helper()
	ctx, stop := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	l := &listening{t: t, lines: make(chan string, 100), stop: stop, done: make(chan error, 1)}
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			l.lines <- sc.Text()
		}
		close(l.lines)
	}()
	if env == nil {
		env = map[string]string{}
	}
	go func() {
		cmd := cli.New(cli.IO{Out: pw, Err: io.Discard, Getenv: func(k string) string { return env[k] }})
		cmd.SetArgs(append([]string{"listen"}, args...))
		err := cmd.ExecuteContext(ctx)
		pw.Close()
		l.done <- err
	}()
	t.Cleanup(func() {
		stop()
		select {
		case <-l.done:
		case <-time.After(10 * time.Second):
			t.Error("listen did not stop")
		}
	})
	first := l.next()
	m := regexp.MustCompile(`listening on (http://127\.0\.0\.1:\d+) \(any path\)`).FindStringSubmatch(first)
	require.NotNil(t, m, "first line: %s", first)
	l.url = m[1]
	return l
}

// next waits for the next printed line.
func (l *listening) next() string {
	l.t.Helper()
	select {
	case line, ok := <-l.lines:
		require.True(l.t, ok, "listen stopped printing")
		return line
	case err := <-l.done:
		l.t.Fatalf("listen exited: %v", err)
	case <-time.After(10 * time.Second):
		l.t.Fatal("listen printed nothing")
	}
	return ""
}

// post sends body to path with headers and returns the status answered.
func (l *listening) post(path string, body []byte, headers http.Header) int {
	l.t.Helper()
	req, err := http.NewRequest(http.MethodPost, l.url+path, bytes.NewReader(body))
	require.NoError(l.t, err)
	req.Header = headers
	res, err := http.DefaultClient.Do(req)
	require.NoError(l.t, err)
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	return res.StatusCode
}

// standardHeaders signs body as Herald does with the standard scheme.
func standardHeaders(t *testing.T, secret, id, eventType string, body []byte) http.Header {
	t.Helper()
	ts := time.Now().Unix()
	sig, err := verify.SignStandard(secret, id, ts, body)
	require.NoError(t, err)
	h := http.Header{}
	h.Set("webhook-id", id)
	h.Set("webhook-timestamp", strconv.FormatInt(ts, 10))
	h.Set("webhook-signature", sig)
	h.Set("X-Webhook-Event", eventType)
	h.Set("Content-Type", "application/json")
	return h
}

// lineRE matches a request line: time, event type, webhook id, verdict, size.
func lineRE(eventType, id, verdict string, size int) *regexp.Regexp {
	return regexp.MustCompile(`^\d\d:\d\d:\d\d\.\d{3}  ` + regexp.QuoteMeta(eventType) + `\s+` + regexp.QuoteMeta(id) +
		`\s+` + verdict + `  ` + strconv.Itoa(size) + ` bytes$`)
}

func TestListen(t *testing.T) {
	t.Parallel()
	body := []byte(`{"order_id":"o_1","n":[1,2]}`)

	t.Run("ValidAndInvalidStandard", func(t *testing.T) {
		t.Parallel()
		l := startListen(t, nil, "--addr", "127.0.0.1:0", "--secret", secretA)

		require.Equal(t, http.StatusOK, l.post("/hooks", body, standardHeaders(t, secretA, "evt_1", "order.created", body)))
		require.Regexp(t, lineRE("order.created", "evt_1", "valid", len(body)), l.next())

		require.Equal(t, http.StatusOK, l.post("/other/path", body, standardHeaders(t, secretB, "evt_2", "order.paid", body)))
		require.Regexp(t, lineRE("order.paid", "evt_2", `INVALID \(no matching webhook signature\)`, len(body)), l.next())

		h := standardHeaders(t, secretA, "evt_3", "order.paid", body)
		h.Del("webhook-signature")
		l.post("/", body, h)
		require.Regexp(t, lineRE("order.paid", "evt_3", `INVALID \(missing webhook headers: webhook-signature\)`, len(body)), l.next())

		tampered := append([]byte(nil), body...)
		tampered[3] = 'X'
		l.post("/hooks", tampered, standardHeaders(t, secretA, "evt_4", "order.paid", body))
		require.Regexp(t, lineRE("order.paid", "evt_4", `INVALID \(no matching webhook signature\)`, len(body)), l.next())
	})
	t.Run("SeveralSecretsDuringARotation", func(t *testing.T) {
		t.Parallel()
		l := startListen(t, nil, "--addr", "127.0.0.1:0", "--secret", secretA, "--secret", secretB)
		l.post("/", body, standardHeaders(t, secretB, "evt_9", "a.b", body))
		require.Regexp(t, lineRE("a.b", "evt_9", "valid", len(body)), l.next())
	})
	t.Run("PrintBody", func(t *testing.T) {
		t.Parallel()
		l := startListen(t, nil, "--addr", "127.0.0.1:0", "--secret", secretA, "--print-body")
		l.post("/hooks", body, standardHeaders(t, secretA, "evt_1", "order.created", body))
		require.Regexp(t, lineRE("order.created", "evt_1", "valid", len(body)), l.next())
		want := []string{`  {`, `    "order_id": "o_1",`, `    "n": [`, `      1,`, `      2`, `    ]`, `  }`}
		for _, w := range want {
			require.Equal(t, w, l.next())
		}
		// Not JSON: printed as it came.
		l.post("/hooks", []byte("plain text"), http.Header{})
		require.Contains(t, l.next(), "INVALID")
		require.Equal(t, "  plain text", l.next())
	})
	t.Run("StatusIsAnswered", func(t *testing.T) {
		t.Parallel()
		l := startListen(t, nil, "--addr", "127.0.0.1:0", "--secret", secretA, "--status", "500")
		require.Equal(t, http.StatusInternalServerError, l.post("/hooks", body, standardHeaders(t, secretA, "evt_1", "a.b", body)))
		require.Regexp(t, lineRE("a.b", "evt_1", "valid", len(body)), l.next())
	})
	t.Run("HMACSHA256Scheme", func(t *testing.T) {
		t.Parallel()
		secret := "plain-shared-secret"
		l := startListen(t, nil, "--addr", "127.0.0.1:0", "--scheme", "hmac-sha256", "--secret", secret)
		ts := time.Now().Unix()
		h := http.Header{}
		h.Set("X-Webhook-ID", "evt_h")
		h.Set("X-Webhook-Timestamp", strconv.FormatInt(ts, 10))
		h.Set("X-Webhook-Signature", verify.SignHMACSHA256(secret, ts, body))
		h.Set("X-Webhook-Event", "invoice.paid")
		l.post("/", body, h)
		require.Regexp(t, lineRE("invoice.paid", "evt_h", "valid", len(body)), l.next())

		h.Set("X-Webhook-Signature", verify.SignHMACSHA256("another", ts, body))
		l.post("/", body, h)
		require.Regexp(t, lineRE("invoice.paid", "evt_h", `INVALID \(no matching webhook signature\)`, len(body)), l.next())
	})
	t.Run("WithoutSecretUnverified", func(t *testing.T) {
		t.Parallel()
		l := startListen(t, nil, "--addr", "127.0.0.1:0")
		l.post("/hooks", body, standardHeaders(t, secretB, "evt_u", "a.b", body))
		require.Regexp(t, lineRE("a.b", "evt_u", "unverified", len(body)), l.next())
		l.post("/hooks", nil, http.Header{})
		require.Regexp(t, lineRE("-", "-", "unverified", 0), l.next())
	})
	t.Run("OldTimestampIsInvalid", func(t *testing.T) {
		t.Parallel()
		l := startListen(t, nil, "--addr", "127.0.0.1:0", "--secret", secretA)
		ts := time.Now().Add(-time.Hour).Unix()
		sig, err := verify.SignStandard(secretA, "evt_old", ts, body)
		require.NoError(t, err)
		h := http.Header{}
		h.Set("webhook-id", "evt_old")
		h.Set("webhook-timestamp", strconv.FormatInt(ts, 10))
		h.Set("webhook-signature", sig)
		l.post("/", body, h)
		line := l.next()
		require.Contains(t, line, "INVALID (webhook timestamp outside tolerance")
		require.Contains(t, line, "evt_old")
	})
	t.Run("OwnTwinsForAddrAndStatus", func(t *testing.T) {
		t.Parallel()
		// HERALD_ADDR is where serve listens and HERALD_STATUS a filter of
		// the client commands; listen must take neither.
		l := startListen(t, map[string]string{
			"HERALD_ADDR": "nowhere:bad", "HERALD_LISTEN_ADDR": "127.0.0.1:0",
			"HERALD_STATUS": "dead", "HERALD_LISTEN_STATUS": "503", "HERALD_SECRET": secretA,
		})
		require.Equal(t, http.StatusServiceUnavailable, l.post("/", body, standardHeaders(t, secretA, "evt_t", "a.b", body)))
		require.Regexp(t, lineRE("a.b", "evt_t", "valid", len(body)), l.next())
	})
	t.Run("StopsCleanlyWhenItsContextEnds", func(t *testing.T) {
		t.Parallel()
		l := startListen(t, nil, "--addr", "127.0.0.1:0")
		l.stop()
		select {
		case err := <-l.done:
			require.NoError(t, err)
			l.done <- nil // for the cleanup
		case <-time.After(10 * time.Second):
			t.Fatal("listen did not stop")
		}
	})
}

func TestListenRejectsBadFlags(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"StatusTooLow", []string{"--status", "99"}, "--status 99"},
		{"StatusInformational", []string{"--status", "100"}, "200 to 599"},
		{"StatusTooHigh", []string{"--status", "600"}, "--status 600"},
		{"UnknownScheme", []string{"--scheme", "md5"}, "--scheme"},
		{"SecretNotStandard", []string{"--secret", "not base64!"}, "--secret 1 is not a standard secret"},
		{"BadAddress", []string{"--addr", "256.0.0.1:1"}, "listen on 256.0.0.1:1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, _, err := run(t, nil, append([]string{"listen"}, tc.args...)...)
			require.ErrorContains(t, err, tc.want)
		})
	}
}
