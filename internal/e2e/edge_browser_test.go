package e2e

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/heraldhooks/herald/internal/auth"
	"github.com/heraldhooks/herald/internal/syncbuf"
	"github.com/heraldhooks/herald/internal/web"
)

// nginxPath is Debian's nginx, which .ci/run installs when missing.
const nginxPath = "/usr/sbin/nginx"

// tlsPair is a certificate for 127.0.0.1 and its key, in PEM files.
type tlsPair struct {
	certFile, keyFile string
	leaf              *x509.Certificate
}

// writeTLSPair makes a self-signed certificate for 127.0.0.1 (serial
// tells one from another) and writes it and its key to certFile and
// keyFile, readable by all (an unprivileged nginx reads them).
func writeTLSPair(t *testing.T, certFile, keyFile string, serial int64) tlsPair {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(serial),
		Subject:               pkix.Name{CommonName: "127.0.0.1"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	leaf, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	kb, err := x509.MarshalECPrivateKey(key)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644))
	require.NoError(t, os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o644))
	return tlsPair{certFile: certFile, keyFile: keyFile, leaf: leaf}
}

// client is an HTTP client (HTTP/2 when offered) that trusts the pair.
func (p tlsPair) client() *http.Client {
	pool := x509.NewCertPool()
	pool.AddCert(p.leaf)
	return &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, ForceAttemptHTTP2: true}}
}

// spki is the pair's public key as chromium's
// --ignore-certificate-errors-spki-list names it: chromium trusts this
// key, and no other certificate error is forgiven.
func (p tlsPair) spki() string {
	sum := sha256.Sum256(p.leaf.RawSubjectPublicKeyInfo)
	return base64.StdEncoding.EncodeToString(sum[:])
}

// startServe runs the herald binary's serve with args on a fresh SQLite
// file, with testAPIKey and debug logs, and returns the address it serves
// on and its logs; it is stopped with the test.
func startServe(t *testing.T, args ...string) (string, *syncbuf.Buffer) {
	t.Helper()
	db := "sqlite://" + filepath.Join(t.TempDir(), "herald.db")
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, heraldBinary(t), append([]string{"serve", "--addr", "127.0.0.1:0", "--db", db,
		"--api-key", testAPIKey, "--allow-private-networks", "--log-level", "debug"}, args...)...)
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 30 * time.Second
	logs := &syncbuf.Buffer{}
	cmd.Stdout, cmd.Stderr = io.Discard, logs
	require.NoError(t, cmd.Start())
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		cancel()
		<-exited
		if t.Failed() {
			t.Logf("herald serve's log:\n%s", tail(logs.String(), 16<<10))
		}
	})
	return servingAddr(t, logs, ""), logs
}

// nginxSiteFromREADME is the README's nginx example, the block between
// its nginx-example markers.
func nginxSiteFromREADME(t *testing.T) string {
	t.Helper()
	readme, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	m := regexp.MustCompile("(?s)<!-- nginx-example: begin[^>]*-->\n```nginx\n(.*?)```\n<!-- nginx-example: end -->").FindSubmatch(readme)
	require.NotNil(t, m, "README.md has no nginx example between its markers")
	return string(m[1])
}

// substitute replaces each old string of pairs in s with its new one,
// failing when one is not there exactly once: a README example that
// changed its shape must change this test too.
func substitute(t *testing.T, s string, pairs ...string) string {
	t.Helper()
	for i := 0; i+1 < len(pairs); i += 2 {
		require.Equal(t, 1, strings.Count(s, pairs[i]), "the README's nginx example should hold %q once:\n%s", pairs[i], s)
		s = strings.Replace(s, pairs[i], pairs[i+1], 1)
	}
	return s
}

// startNginx runs Debian's nginx with site (a server block) in a
// configuration of its own in a fresh directory, as an unprivileged
// user when the test runs as root, until the test ends. site is given
// that directory, where it may write the files its block names.
func startNginx(t *testing.T, site func(dir string) string) {
	t.Helper()
	if _, err := os.Stat(nginxPath); err != nil {
		t.Fatalf("the proxy tests need Debian's nginx at %s (apt-get install nginx): %v", nginxPath, err)
	}
	dir, err := os.MkdirTemp("", "herald-nginx-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	conf := filepath.Join(dir, "nginx.conf")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "site.conf"), []byte(site(dir)), 0o644))
	require.NoError(t, os.WriteFile(conf, []byte(fmt.Sprintf(`daemon off;
worker_processes 1;
pid %[1]s/nginx.pid;
error_log %[1]s/error.log info;
events { worker_connections 256; }
http {
    access_log %[1]s/access.log;
    client_body_temp_path %[1]s/client_body;
    proxy_temp_path %[1]s/proxy;
    fastcgi_temp_path %[1]s/fastcgi;
    uwsgi_temp_path %[1]s/uwsgi;
    scgi_temp_path %[1]s/scgi;
    include %[1]s/site.conf;
}
`, dir)), 0o644))
	cmd := exec.Command(nginxPath, "-p", dir, "-c", conf, "-e", filepath.Join(dir, "error.log"))
	var out syncbuf.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if os.Geteuid() == 0 {
		// nobody: nginx needs no privilege on a port above 1024.
		require.NoError(t, filepath.Walk(dir, func(p string, _ os.FileInfo, err error) error {
			if err != nil {
				return err
			}
			return os.Chown(p, 65534, 65534)
		}))
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	}
	require.NoError(t, cmd.Start())
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGQUIT) // a graceful stop
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			errLog, _ := os.ReadFile(filepath.Join(dir, "error.log"))
			t.Logf("nginx's output:\n%s\nits error log:\n%s", out.String(), tail(string(errLog), 8<<10))
		}
	})
	select {
	case <-exited:
		errLog, _ := os.ReadFile(filepath.Join(dir, "error.log"))
		t.Fatalf("nginx exited at start: %s\n%s", out.String(), errLog)
	default:
	}
}

// browserRun is what one run through the pages needs: where browsers
// reach Herald, and the pair they are served with.
type browserRun struct {
	base   string // https://127.0.0.1:port
	pair   tlsPair
	client *http.Client // pair.client()
}

// call makes an API call as the operator through base; out, when not nil,
// receives the JSON answer. It returns the status and the protocol.
func (b browserRun) call(t *testing.T, method, path string, body any, out any) (int, string) {
	t.Helper()
	var rd io.Reader = http.NoBody
	if body != nil {
		js, err := json.Marshal(body)
		require.NoError(t, err)
		rd = bytes.NewReader(js)
	}
	req, err := http.NewRequest(method, b.base+path, rd)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+testAPIKey)
	req.Header.Set("Content-Type", "application/json")
	resp, err := b.client.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	if out != nil && resp.StatusCode < 300 {
		require.NoError(t, json.Unmarshal(raw, out), "%s", raw)
	}
	return resp.StatusCode, resp.Proto
}

func (b browserRun) deliveryStatus(t *testing.T, id string) string {
	t.Helper()
	var d struct {
		Status string `json:"status"`
	}
	code, _ := b.call(t, "GET", "/v1/deliveries/"+id, nil, &d)
	require.Equal(t, http.StatusOK, code)
	return d.Status
}

// setCookie is a Set-Cookie line a page answered, with its URL.
type setCookie struct{ url, line string }

// runPagesOverHTTPS signs in to the dashboard, replays a dead delivery
// and signs out; opens a portal link, edits an endpoint and signs out;
// all in chromium over https at b.base. Every page comes over HTTP/2, and
// every cookie set is Secure, HttpOnly and SameSite=Strict.
func runPagesOverHTTPS(t *testing.T, b browserRun) {
	t.Helper()
	var failing atomic.Bool
	failing.Store(true)
	rc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if failing.Load() {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(rc.Close)

	// A dead delivery: one attempt, answered 500.
	var ep struct {
		ID string `json:"id"`
	}
	code, proto := b.call(t, "POST", "/v1/endpoints", map[string]any{"consumer_id": "acme", "url": rc.URL + "/hooks",
		"description": "orders", "retry_schedule": []string{"0s"}}, &ep)
	require.Equal(t, http.StatusCreated, code)
	require.Equal(t, "HTTP/2.0", proto, "the API over HTTP/2")
	var ev struct {
		Deliveries []struct {
			ID string `json:"id"`
		} `json:"deliveries"`
	}
	code, _ = b.call(t, "POST", "/v1/events", map[string]any{"consumer_id": "acme", "event_type": "order.created",
		"payload": map[string]any{"order_id": "o_1"}}, &ev)
	require.Equal(t, http.StatusAccepted, code)
	require.Len(t, ev.Deliveries, 1)
	dlv := ev.Deliveries[0].ID
	waitFor(t, "the delivery to go dead", func() bool { return b.deliveryStatus(t, dlv) == "dead" })

	ctx := newBrowser(t, chromedp.Flag("ignore-certificate-errors-spki-list", b.pair.spki()))
	var mu sync.Mutex
	var cookies []setCookie
	var blocked []string
	protocols := map[string]string{}
	require.NoError(t, chromedp.Listen(ctx, func(ev any) {
		mu.Lock()
		defer mu.Unlock()
		switch ev := ev.(type) {
		case *network.EventResponseReceived:
			if ev.Type == network.ResourceTypeDocument {
				protocols[ev.Response.URL] = ev.Response.Protocol
			}
		case *network.EventResponseReceivedExtraInfo:
			for k, v := range ev.Headers {
				if s, ok := v.(string); ok && strings.EqualFold(k, "set-cookie") {
					for _, line := range strings.Split(s, "\n") {
						cookies = append(cookies, setCookie{string(ev.RequestID), line})
					}
				}
			}
			for _, c := range ev.BlockedCookies {
				blocked = append(blocked, c.CookieLine)
			}
		}
	}))
	do, text := browserSteps(t, ctx)

	// The dashboard: sign in, replay the dead delivery, sign out.
	do(chromedp.Navigate(b.base+"/ui/"), chromedp.WaitVisible(chromedp.CSS("#api_key")))
	do(chromedp.SendKeys(chromedp.CSS("#api_key"), testAPIKey), chromedp.Click(chromedp.CSS("#signin")),
		chromedp.WaitVisible(chromedp.CSS("#due-now")))
	failing.Store(false)
	do(chromedp.Navigate(b.base+"/ui/deliveries/"+dlv), chromedp.WaitVisible(chromedp.CSS("#replay")))
	require.Equal(t, "dead", text("#delivery-status"))
	do(chromedp.Click(chromedp.CSS("#replay")), chromedp.WaitVisible(chromedp.CSS(".flash.ok")))
	require.Contains(t, text(".flash"), "Replayed")
	waitFor(t, "the replayed delivery", func() bool { return b.deliveryStatus(t, dlv) == "delivered" })
	do(chromedp.Click(chromedp.CSS(`form[action="/ui/sign-out"] button`)), chromedp.WaitVisible(chromedp.CSS("#api_key")))

	// The portal: a link made through the same address, an endpoint
	// edited, signed out.
	var link struct {
		URL string `json:"url"`
	}
	code, _ = b.call(t, "POST", "/v1/consumers/acme/portal-sessions", map[string]any{"ttl": "5m"}, &link)
	require.Equal(t, http.StatusCreated, code)
	require.True(t, strings.HasPrefix(link.URL, b.base+"/portal/"), "the link leads where browsers reach Herald: %s", link.URL)
	do(chromedp.Navigate(link.URL))
	waitFor(t, "the portal to open", func() bool {
		// A link may answer a page whose button opens the session.
		state, err := chromedp.Run(ctx, chromedp.Evaluate[string](`(() => {
			if (document.querySelector("#endpoints")) return "open";
			const b = document.querySelector("main form[method=post] button");
			if (b && !window.__clicked) { window.__clicked = true; b.click(); }
			return "waiting";
		})()`))
		return err == nil && state == "open"
	})
	do(chromedp.Navigate(b.base+"/portal/endpoints/"+ep.ID+"/edit"), chromedp.WaitVisible(chromedp.CSS("#description")))
	do(chromedp.SetValue(chromedp.CSS("#description"), "orders, edited over https"),
		chromedp.Click(chromedp.CSS("#save")), chromedp.WaitVisible(chromedp.CSS("#endpoint-state")))
	var got struct {
		Description string `json:"description"`
	}
	code, _ = b.call(t, "GET", "/v1/endpoints/"+ep.ID, nil, &got)
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, "orders, edited over https", got.Description)
	do(chromedp.Click(chromedp.CSS(`form[action="/portal/session/end"] button`)))
	waitFor(t, "the portal session to end", func() bool {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range cookies {
			if strings.HasPrefix(c.line, auth.SessionCookie+"=;") || strings.HasPrefix(c.line, auth.SessionCookie+"=\"\";") {
				return true
			}
		}
		return false
	})

	mu.Lock()
	defer mu.Unlock()
	require.Empty(t, blocked, "the browser refused no cookie")
	names := map[string]int{}
	for _, c := range cookies {
		parsed, err := http.ParseSetCookie(c.line)
		require.NoError(t, err, c.line)
		names[parsed.Name]++
		require.True(t, parsed.Secure, "Secure: %s", c.line)
		require.True(t, parsed.HttpOnly, "HttpOnly: %s", c.line)
		require.Equal(t, http.SameSiteStrictMode, parsed.SameSite, "SameSite=Strict: %s", c.line)
	}
	require.Equal(t, 2, names[web.DashboardSessionCookie], "the dashboard's session set at sign-in and cleared at sign-out: %v", names)
	require.GreaterOrEqual(t, names[auth.SessionCookie], 2, "the portal's session opened and ended: %v", names)
	require.NotEmpty(t, protocols)
	for u, p := range protocols {
		require.True(t, strings.HasPrefix(u, b.base+"/"), u)
		require.Equal(t, "h2", p, "%s over HTTP/2", u)
	}
}

// TestPagesBehindNginx: Herald behind Debian's nginx, configured with the
// README's example (ports and files substituted), terminating TLS with a
// certificate the test makes; herald serve is given --public-url and
// --trusted-proxies as the README says. The dashboard and the portal work
// in a browser over https through it, with Secure cookies; the request
// log names the client nginx forwarded.
func TestPagesBehindNginx(t *testing.T) {
	t.Parallel()
	proxyAddr := freeAddr(t)
	base := "https://" + proxyAddr
	heraldAddr, logs := startServe(t, "--public-url", base, "--trusted-proxies", "127.0.0.1")
	var pair tlsPair
	startNginx(t, func(dir string) string {
		pair = writeTLSPair(t, filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem"), 1)
		return substitute(t, nginxSiteFromREADME(t),
			"listen 443 ssl http2;", "listen "+proxyAddr+" ssl http2;",
			"/etc/letsencrypt/live/herald.example.com/fullchain.pem", pair.certFile,
			"/etc/letsencrypt/live/herald.example.com/privkey.pem", pair.keyFile,
			"proxy_pass http://127.0.0.1:8080;", "proxy_pass http://"+heraldAddr+";")
	})
	b := browserRun{base: base, pair: pair, client: pair.client()}
	waitFor(t, "nginx to pass /healthz on", func() bool {
		resp, err := b.client.Get(base + "/healthz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	runPagesOverHTTPS(t, b)
	// nginx said who its client was (X-Forwarded-For): the log names that
	// client, port unknown, beside nginx's own address.
	require.Regexp(t, `msg=request method=POST path=/ui/sign-in status_code=303 duration_ms=\d+ client_addr=127\.0\.0\.1:0 peer_addr=127\.0\.0\.1:\d+`, logs.String())
}

// TestPagesOverNativeTLS: the same run with Herald's own TLS
// (--tls-cert, --tls-key) and no proxy, nor --public-url: the request
// over TLS is https.
func TestPagesOverNativeTLS(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	pair := writeTLSPair(t, filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem"), 1)
	addr, logs := startServe(t, "--tls-cert", pair.certFile, "--tls-key", pair.keyFile)
	runPagesOverHTTPS(t, browserRun{base: "https://" + addr, pair: pair, client: pair.client()})
	require.NotContains(t, logs.String(), "peer_addr=", "no proxy: the peer is the client")
}
