package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/heraldhooks/herald/verify"
)

// listenShutdownTimeout bounds how long a stopping listen waits for the
// requests it is answering.
const listenShutdownTimeout = 5 * time.Second

// listenTime is how listen stamps each request: local time to the
// millisecond.
const listenTime = "15:04:05.000"

func listenCmd(stdio IO) *cobra.Command {
	var (
		addr, scheme        string
		secrets, publicKeys []string
		printBody           bool
		status              int
	)
	cmd := &cobra.Command{
		Use:   "listen [--addr 127.0.0.1:4000] [--secret whsec_… | --public-key whpk_…] [flags]",
		Short: "Receive webhooks locally: verify each one and print a line about it",
		Long: "Run a webhook receiver for development. It accepts POSTs on any path, verifies\n" +
			"each with the endpoint's secret (several --secret during a rotation), or for an\n" +
			"ed25519 endpoint with its public key (--public-key, the endpoint's public_key;\n" +
			"several during a rotation), prints one line per request (time, event type,\n" +
			"webhook id, valid or INVALID with the reason, body size) and answers --status,\n" +
			"so retries can be tried out.\n\n" +
			"Register it as an endpoint (serve needs --allow-private-networks to deliver to\n" +
			"your own machine):\n" +
			"  herald endpoints create --url http://127.0.0.1:4000/hooks\n\n" +
			"Its --addr and --status have the twins HERALD_LISTEN_ADDR and HERALD_LISTEN_STATUS,\n" +
			"not HERALD_ADDR (where serve listens) and HERALD_STATUS (a filter of the client commands).",
		Example: "  herald listen --secret whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw --print-body\n" +
			"  herald listen --addr 127.0.0.1:4001 --scheme hmac-sha256 --secret s3cret --status 503\n" +
			"  herald listen --public-key whpk_11qYAYKxCrfVS/7TyWQHOg7hcvPapiMlrwIaaPcHURo=",
		Args: cobra.NoArgs,
	}
	fs := cmd.Flags()
	fs.StringVar(&addr, "addr", "127.0.0.1:4000", "address to listen on")
	// HERALD_ADDR is serve's; sharing it would put both on one port.
	_ = fs.SetAnnotation("addr", envAnnotation, []string{"HERALD_LISTEN_ADDR"})
	fs.StringArrayVar(&secrets, "secret", nil, "the endpoint's signing secret; repeat during a rotation (none: print requests unverified)")
	fs.StringArrayVar(&publicKeys, "public-key", nil, "an ed25519 endpoint's public key (whpk_…); repeat during a rotation; implies --scheme ed25519")
	fs.StringVar(&scheme, "scheme", string(verify.SchemeStandard), "signature scheme: standard, hmac-sha256 or ed25519")
	fs.BoolVar(&printBody, "print-body", false, "print each body, JSON pretty-printed, under its line")
	fs.IntVar(&status, "status", http.StatusOK, "HTTP status to answer every request with, 200..599 (500 to try retries)")
	// HERALD_STATUS would also filter `deliveries list`.
	_ = fs.SetAnnotation("status", envAnnotation, []string{"HERALD_LISTEN_STATUS"})
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if len(publicKeys) > 0 && !cmd.Flags().Changed("scheme") {
			scheme = string(verify.SchemeEd25519)
		}
		l, err := newListener(stdio.Out, verify.Scheme(scheme), secrets, publicKeys, printBody, status)
		if err != nil {
			return err
		}
		return l.run(cmd.Context(), addr, stdio.Err)
	}
	return cmd
}

// listener is the handler of herald listen.
type listener struct {
	// mu keeps the lines of concurrent requests whole.
	mu        sync.Mutex
	out       io.Writer
	scheme    verify.Scheme
	verifier  *verify.Verifier // nil without secrets: nothing is verified
	printBody bool
	status    int
}

func newListener(out io.Writer, scheme verify.Scheme, secrets, publicKeys []string, printBody bool, status int) (*listener, error) {
	if scheme != verify.SchemeStandard && scheme != verify.SchemeHMACSHA256 && scheme != verify.SchemeEd25519 {
		return nil, fmt.Errorf("--scheme %q: give %s, %s or %s", scheme, verify.SchemeStandard, verify.SchemeHMACSHA256, verify.SchemeEd25519)
	}
	// A 1xx is informational and cannot end an HTTP exchange: net/http
	// would follow it with a 200, which is not what was asked.
	if status < 200 || status > 599 {
		return nil, fmt.Errorf("--status %d: give an HTTP status from 200 to 599", status)
	}
	l := &listener{out: out, scheme: scheme, printBody: printBody, status: status}
	if scheme == verify.SchemeEd25519 {
		return l.withPublicKeys(secrets, publicKeys)
	}
	if len(publicKeys) > 0 {
		return nil, fmt.Errorf("--public-key verifies %s webhooks, not --scheme %s; give the endpoint's --secret instead", verify.SchemeEd25519, scheme)
	}
	if len(secrets) == 0 {
		return l, nil
	}
	for i, s := range secrets {
		if s == "" {
			return nil, fmt.Errorf("--secret %d is empty", i+1)
		}
		if scheme == verify.SchemeStandard {
			if key, err := verify.StandardKey(s); err != nil || len(key) == 0 {
				return nil, fmt.Errorf("--secret %d is not a standard secret (whsec_ followed by base64); for a plain secret use --scheme hmac-sha256", i+1)
			}
		}
	}
	l.verifier = &verify.Verifier{Secrets: secrets, Scheme: scheme}
	return l, nil
}

// withPublicKeys sets up l to verify ed25519 webhooks with publicKeys
// (none: print them unverified). Secrets are refused: Herald never shows an
// ed25519 endpoint's private key, so a --secret here is a mistake.
func (l *listener) withPublicKeys(secrets, publicKeys []string) (*listener, error) {
	if len(secrets) > 0 {
		return nil, fmt.Errorf("--secret does not verify %s webhooks: give the endpoint's public key with --public-key %s…", verify.SchemeEd25519, verify.PublicKeyPrefix)
	}
	if len(publicKeys) == 0 {
		return l, nil
	}
	for i, pk := range publicKeys {
		if _, err := verify.ParseEd25519PublicKey(pk); err != nil {
			return nil, fmt.Errorf("--public-key %d: %w", i+1, err)
		}
	}
	l.verifier = &verify.Verifier{PublicKeys: publicKeys, Scheme: verify.SchemeEd25519}
	return l, nil
}

// run listens on addr until ctx ends, then stops, letting requests being
// answered finish.
func (l *listener) run(ctx context.Context, addr string, errOut io.Writer) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w (another program there? choose one with --addr)", addr, err)
	}
	srv := &http.Server{
		Handler:           l,
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          log.New(errOut, "herald listen: ", 0),
	}
	l.println(l.banner(ln.Addr().String()))
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err := <-served:
		return fmt.Errorf("serve on %s: %w", addr, err)
	case <-ctx.Done():
	}
	stopCtx, cancel := context.WithTimeout(context.Background(), listenShutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(stopCtx); err != nil {
		srv.Close()
	}
	if err := <-served; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve on %s: %w", addr, err)
	}
	return nil
}

func (l *listener) banner(addr string) string {
	verifying := "no --secret: requests are printed unverified"
	switch {
	case l.verifier == nil && l.scheme == verify.SchemeEd25519:
		verifying = "no --public-key: requests are printed unverified"
	case l.verifier != nil && l.scheme == verify.SchemeEd25519:
		verifying = fmt.Sprintf("verifying %s signatures with %s", l.scheme, plural(len(l.verifier.PublicKeys), "public key", "public keys"))
	case l.verifier != nil:
		verifying = fmt.Sprintf("verifying %s signatures with %s", l.scheme, plural(len(l.verifier.Secrets), "secret", "secrets"))
	}
	return fmt.Sprintf("herald listen: listening on http://%s (any path); %s; answering %d %s; Ctrl-C stops",
		addr, verifying, l.status, http.StatusText(l.status))
}

// ServeHTTP prints one line about the request (and its body with
// --print-body), then answers the configured status whatever the verdict,
// so what Herald does with each status can be watched.
func (l *listener) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	at := time.Now()
	body, size, readErr := readCapped(r.Body, verify.DefaultMaxBodyBytes)

	idHeader, otherIDHeader := verify.HeaderStandardID, verify.HeaderHMACID
	if l.scheme == verify.SchemeHMACSHA256 {
		idHeader, otherIDHeader = otherIDHeader, idHeader
	}
	id := r.Header.Get(idHeader)
	if id == "" && l.verifier == nil {
		id = r.Header.Get(otherIDHeader)
	}

	var verdict string
	switch {
	case l.verifier == nil:
		verdict = "unverified"
	case readErr != nil:
		verdict = fmt.Sprintf("INVALID (%v: %v)", verify.ErrReadBody, readErr)
	case int64(size) > verify.DefaultMaxBodyBytes:
		verdict = fmt.Sprintf("INVALID (%v: more than %d bytes)", verify.ErrBodyTooLarge, verify.DefaultMaxBodyBytes)
	default:
		if _, err := l.verifier.VerifyPayload(r.Header, body); err != nil {
			verdict = "INVALID (" + err.Error() + ")"
		} else {
			verdict = "valid"
		}
	}

	line := fmt.Sprintf("%s  %-20s  %-30s  %s  %s", at.Format(listenTime), orDash(r.Header.Get(verify.HeaderEvent)),
		orDash(id), verdict, plural(size, "byte", "bytes"))
	if l.printBody {
		if len(body) == 0 {
			line += "\n  (empty body)"
		} else {
			line += "\n" + strings.TrimRight(indentJSON(body, "  "), "\n")
		}
	}
	l.println(line)

	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(l.status)
	fmt.Fprintf(w, "herald listen answered %d\n", l.status)
}

func (l *listener) println(s string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fmt.Fprintln(l.out, s)
}

// readCapped reads at most limit bytes of rd and counts (and discards) the
// rest, so the size printed is the real one.
func readCapped(rd io.Reader, limit int64) ([]byte, int, error) {
	if rd == nil {
		return nil, 0, nil
	}
	body, err := io.ReadAll(io.LimitReader(rd, limit))
	if err != nil {
		return body, len(body), err
	}
	rest, err := io.Copy(io.Discard, rd)
	return body, len(body) + int(rest), err
}

func orDash(s string) string {
	if s == "" {
		return none
	}
	return s
}
