// Package sender makes one HTTP attempt of a webhook: it signs the stored
// body, POSTs it through a dialer that refuses private destinations (SSRF),
// reads at most 4 KiB of the answer and classifies the outcome. It keeps no
// state beyond its connection pool and never retries: the dispatcher decides
// what to do with the Class it returns (DESIGN.md, Delivery rules).
package sender

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"time"

	"code.dny.dev/ssrf"

	"github.com/heraldhooks/herald"
)

// Defaults for a zero Config field.
const (
	DefaultUserAgent           = "Herald"
	DefaultMaxIdleConnsPerHost = 64
	// maxIdleConns bounds the idle connections kept across all endpoints, so
	// fanning out to thousands of hosts does not hold thousands of sockets.
	maxIdleConns    = 1024
	idleConnTimeout = 90 * time.Second
	// MaxRetryAfter caps how long a receiver's Retry-After can hold a delivery.
	MaxRetryAfter = 24 * time.Hour
	// MaxResponseHeaderBytes caps a receiver's answer's headers: past it the
	// attempt fails, retryable, as a broken answer does.
	MaxResponseHeaderBytes = 64 << 10
)

// Config sets up a Sender.
type Config struct {
	// AllowPrivateNetworks lets webhooks reach loopback, private, link-local
	// (cloud metadata), CGNAT and other non-public addresses. Off by default:
	// such destinations are refused at dial time.
	AllowPrivateNetworks bool
	// ConnectTimeout bounds the TCP connect and the TLS handshake; default
	// herald.DefaultConnectTimeout.
	ConnectTimeout time.Duration
	// UserAgent is sent on every webhook, e.g. "Herald/1.2.0"; default
	// DefaultUserAgent.
	UserAgent string
	// MaxIdleConnsPerHost is how many keep-alive connections to one endpoint
	// host stay open between attempts; default DefaultMaxIdleConnsPerHost.
	MaxIdleConnsPerHost int
	// LookupIP, when set, resolves endpoint host names in place of the
	// system resolver, so a test can make a name resolve to the address it
	// chooses (DNS is the boundary Herald does not own). Every address it
	// returns is dialed through the same dialer, so the SSRF check still
	// runs on it at dial time. Nil in production.
	LookupIP func(ctx context.Context, host string) ([]netip.Addr, error)
	// EgressProxy, when set, sends every webhook through this HTTP CONNECT
	// proxy (config.ParseEgressProxy reads it), so receivers see the proxy's
	// address. The destination is still resolved and checked by the SSRF
	// guard here, and the proxy is asked for the checked IP:port
	// (proxyDialer). Nil: webhooks go direct.
	EgressProxy *url.URL
	// RootCAs, when set, are the roots receivers' certificates are
	// verified against, in place of the system's: a test's CA. Nil in
	// production.
	RootCAs *x509.CertPool
}

// Sender makes webhook attempts over one shared connection pool. It is safe
// for concurrent use.
type Sender struct {
	client    *http.Client
	transport *http.Transport
	userAgent string
	// certs are the pools of endpoints with a client certificate.
	certs certClients
}

// New returns a Sender. Its transport keeps connections alive per host, uses
// HTTP/2 where TLS offers it, never follows redirects and ignores proxy
// settings from the environment: a proxy would dial on Herald's behalf and so
// bypass the SSRF check.
func New(cfg Config) *Sender {
	if cfg.ConnectTimeout <= 0 {
		cfg.ConnectTimeout = herald.DefaultConnectTimeout
	}
	if cfg.UserAgent == "" {
		cfg.UserAgent = DefaultUserAgent
	}
	if cfg.MaxIdleConnsPerHost <= 0 {
		cfg.MaxIdleConnsPerHost = DefaultMaxIdleConnsPerHost
	}
	dialer := &net.Dialer{Timeout: cfg.ConnectTimeout, KeepAlive: 30 * time.Second}
	if !cfg.AllowPrivateNetworks {
		dialer.Control = dialControl(newGuardian())
	}
	dial := dialer.DialContext
	if cfg.LookupIP != nil {
		dial = lookupDialer(dialer, cfg.LookupIP)
	}
	if cfg.EgressProxy != nil {
		// The proxy is dialed without the Control hook (the operator named
		// it); destinations are checked before the CONNECT instead.
		var guard *ssrf.Guardian
		if !cfg.AllowPrivateNetworks {
			guard = newGuardian()
		}
		proxyDial := &net.Dialer{Timeout: cfg.ConnectTimeout, KeepAlive: 30 * time.Second}
		dial = newProxyDialer(cfg.EgressProxy, proxyDial, guard, cfg.LookupIP).DialContext
	}
	transport := &http.Transport{
		Proxy:               nil,
		DialContext:         dial,
		ForceAttemptHTTP2:   true,
		TLSHandshakeTimeout: cfg.ConnectTimeout,
		MaxIdleConns:        maxIdleConns,
		MaxIdleConnsPerHost: cfg.MaxIdleConnsPerHost,
		IdleConnTimeout:     idleConnTimeout,
		// No Accept-Encoding: the kept bytes are the answer as sent, and no
		// CPU goes to inflating answers nobody reads past 4 KiB.
		DisableCompression: true,
		// A receiver's headers, which nobody reads but the status line,
		// are not let to fill the node's memory (Go's default is 10 MB).
		MaxResponseHeaderBytes: MaxResponseHeaderBytes,
	}
	if cfg.RootCAs != nil {
		transport.TLSClientConfig = &tls.Config{RootCAs: cfg.RootCAs, MinVersion: tls.VersionTLS12}
	}
	return &Sender{
		transport: transport,
		userAgent: cfg.UserAgent,
		client: &http.Client{
			Transport: transport,
			// Redirects are not followed (SSRF): the 3xx is the answer.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
	}
}

// lookupDialer dials through lookup: a literal IP address is dialed as it
// is; a name is resolved by lookup and its addresses are tried in the order
// given until one connects. Each dial goes through d, and so through its
// Control hook: a refused address is never connected to.
func lookupDialer(d *net.Dialer, lookup func(context.Context, string) ([]netip.Addr, error)) func(context.Context, string, string) (net.Conn, error) {
	return func(ctx context.Context, network, address string) (net.Conn, error) {
		host, port, err := net.SplitHostPort(address)
		if err != nil {
			return nil, err
		}
		if _, err := netip.ParseAddr(host); err == nil {
			return d.DialContext(ctx, network, address)
		}
		addrs, err := lookup(ctx, host)
		if err != nil {
			return nil, &net.DNSError{Err: err.Error(), Name: host}
		}
		if len(addrs) == 0 {
			return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
		}
		var first error
		for _, a := range addrs {
			conn, err := d.DialContext(ctx, network, net.JoinHostPort(a.String(), port))
			if err == nil {
				return conn, nil
			}
			if first == nil {
				first = err
			}
		}
		return nil, first
	}
}

// CloseIdleConnections closes the kept-alive connections; call it at shutdown.
func (s *Sender) CloseIdleConnections() {
	s.transport.CloseIdleConnections()
	s.certs.closeIdle()
}

// Request is one attempt to make.
type Request struct {
	// WebhookID is the event id: the same on every attempt and replay, so
	// receivers can deduplicate (invariant 6).
	WebhookID string
	// EventType is sent as X-Webhook-Event.
	EventType string
	// Body is sent exactly as stored and is what the signature covers
	// (invariant 5).
	Body []byte
	// URL is the endpoint's URL.
	URL string
	// Secrets sign the body, the current secret first, then a previous one
	// still valid after a rotation; each gives one signature, space-separated.
	Secrets []string
	// Scheme is the signature scheme; "" means herald.SchemeStandard.
	Scheme herald.SignatureScheme
	// Headers are the endpoint's custom headers. Names CheckHeader reserves
	// are dropped, so they never override the signature headers,
	// X-Webhook-Event, Content-Type or User-Agent.
	Headers map[string]string
	// Timeout bounds the whole attempt (connect, send, answer, reading the
	// kept body); default herald.DefaultTimeout.
	Timeout time.Duration
	// Timestamp is the signing time, from the injected clock; Retry-After
	// dates are taken relative to it. Zero means now.
	Timestamp time.Time
	// ClientCert, when set, is presented to a receiver that asks for a
	// client certificate; a pair that does not load is a ClientError with
	// nothing sent. Nil: the shared pool, no certificate.
	ClientCert *ClientCert
	// TraceParent, when not "", is sent as the W3C traceparent header (the
	// attempt's span), so that the receiver's spans join the trace. The
	// signature covers the body only; the header is beside it.
	TraceParent string
}

// Class is what an attempt's outcome means for the delivery.
type Class int

// The classes. The zero Class is none of them.
const (
	// Success is a 2xx answer: the delivery is delivered.
	Success Class = iota + 1
	// Retryable is a failure that may pass: 408, 425, 429, 5xx, a 3xx (not
	// followed), a timeout, a connection or TLS error, a refused private
	// destination (the operator may allow private networks).
	Retryable
	// Gone is a 410 answer: the receiver asks never to be called again.
	Gone
	// ClientError is any other 4xx, or a configuration fault found before
	// sending (a secret that does not decode, an invalid custom header or
	// URL): retrying the same request cannot fix it.
	ClientError
)

// String names the class for logs.
func (c Class) String() string {
	switch c {
	case Success:
		return "success"
	case Retryable:
		return "retryable"
	case Gone:
		return "gone"
	case ClientError:
		return "client_error"
	}
	return "Class(" + strconv.Itoa(int(c)) + ")"
}

// Result is the outcome of one attempt.
type Result struct {
	Class Class
	// StatusCode is the HTTP status of the answer; 0 when none came.
	StatusCode int
	// Body is at most herald.MaxResponseBodyKeep bytes of the answer.
	Body []byte
	// Duration is how long the attempt took, answer body included; 0 when
	// nothing was sent.
	Duration time.Duration
	// Error is the transport error, or a short description of the failure;
	// "" on Success.
	Error string
	// RetryAfter is the receiver's Retry-After on a 429 or 503 (seconds, or
	// an HTTP date taken relative to Request.Timestamp), capped at
	// MaxRetryAfter; 0 when absent, unparseable or in the past.
	RetryAfter time.Duration
}

// Send makes one attempt and classifies it. It never returns an error: every
// failure is a Result with a Class and an Error. A configuration fault found
// before sending (no secret, a secret that does not decode, an unknown
// scheme, an invalid custom header, a URL that is not http(s)) is a
// ClientError with StatusCode 0 and nothing sent: retrying cannot fix it, and
// after the endpoint is fixed the dead delivery can be replayed. A cancelled
// ctx gives a Retryable result whose Error says so; the caller can tell it
// from a timeout by ctx.Err().
func (s *Sender) Send(ctx context.Context, req *Request) Result {
	if req.WebhookID == "" {
		return Result{Class: ClientError, Error: "request has no webhook id"}
	}
	if err := CheckURL(req.URL, true); err != nil {
		return Result{Class: ClientError, Error: err.Error()}
	}
	ts := req.Timestamp
	if ts.IsZero() {
		ts = time.Now()
	}
	header, err := buildHeaders(req, s.userAgent, ts.Unix())
	if err != nil {
		return Result{Class: ClientError, Error: err.Error()}
	}
	timeout := req.Timeout
	if timeout <= 0 {
		timeout = herald.DefaultTimeout
	}
	start := time.Now() // before the deadline is set, so Duration covers it
	attemptCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	httpReq, err := http.NewRequestWithContext(attemptCtx, http.MethodPost, req.URL, bytes.NewReader(req.Body))
	if err != nil {
		return Result{Class: ClientError, Error: fmt.Sprintf("build request: %v", err)}
	}
	httpReq.Header = header
	if req.TraceParent != "" {
		httpReq.Header["Traceparent"] = []string{req.TraceParent}
	}
	client := s.client
	if req.ClientCert != nil {
		if client, err = s.clientFor(req.ClientCert); err != nil {
			return Result{Class: ClientError, Error: err.Error()}
		}
	}
	resp, err := client.Do(httpReq)
	if err != nil {
		return Result{
			Class:    Retryable,
			Duration: time.Since(start),
			Error:    describeTransportError(ctx, attemptCtx, timeout, err),
		}
	}
	// Read at most the kept bytes; closing the body drops the rest unread
	// (the connection is then not reused, which beats draining megabytes).
	body, readErr := io.ReadAll(io.LimitReader(resp.Body, herald.MaxResponseBodyKeep))
	_ = resp.Body.Close()
	res := Result{
		Class:      classify(resp.StatusCode),
		StatusCode: resp.StatusCode,
		Body:       body,
		Duration:   time.Since(start),
	}
	if resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable {
		res.RetryAfter = parseRetryAfter(resp.Header.Get("Retry-After"), ts)
	}
	if res.Class != Success {
		// The status decides the class; a body cut short does not change it.
		res.Error = describeStatus(resp)
		if readErr != nil {
			res.Error += "; reading the answer: " + describeTransportError(ctx, attemptCtx, timeout, readErr)
		}
	}
	return res
}

// classify maps an HTTP status to its Class (DESIGN.md, Delivery rules).
func classify(code int) Class {
	switch {
	case code >= 200 && code < 300:
		return Success
	case code == http.StatusGone:
		return Gone
	case code == http.StatusRequestTimeout, code == http.StatusTooEarly, code == http.StatusTooManyRequests:
		return Retryable
	case code >= 400 && code < 500:
		return ClientError
	default: // 1xx that ended the exchange, 3xx, 5xx and anything unknown
		return Retryable
	}
}

// describeStatus is the Error of a non-2xx answer.
func describeStatus(resp *http.Response) string {
	msg := "HTTP " + strconv.Itoa(resp.StatusCode)
	if text := http.StatusText(resp.StatusCode); text != "" {
		msg += " " + text
	}
	if resp.StatusCode >= 300 && resp.StatusCode < 400 {
		msg += ": redirect not followed"
		if loc := resp.Header.Get("Location"); loc != "" {
			msg += " (Location: " + loc + ")"
		}
	}
	return msg
}

// describeTransportError turns a failed exchange into a short Error: the
// SSRF refusal as its own clear message, a timeout of the attempt as such,
// a cancellation of the caller's ctx as such, anything else as the network
// error without the "Post <url>:" prefix (the URL is the endpoint's anyway).
func describeTransportError(parent, attemptCtx context.Context, timeout time.Duration, err error) string {
	var private *PrivateAddressError
	if errors.As(err, &private) {
		return private.Error()
	}
	var refused *EgressProxyError
	if errors.As(err, &refused) {
		return refused.Error()
	}
	if parent.Err() != nil {
		return "attempt cancelled: " + parent.Err().Error()
	}
	if errors.Is(attemptCtx.Err(), context.DeadlineExceeded) {
		return "timed out after " + timeout.String()
	}
	var urlErr *url.Error
	if errors.As(err, &urlErr) && urlErr.Err != nil {
		return urlErr.Err.Error()
	}
	return err.Error()
}

// parseRetryAfter reads a Retry-After value, delay-seconds or an HTTP date
// (taken relative to now), capped at MaxRetryAfter; 0 when absent,
// unparseable or already past.
func parseRetryAfter(value string, now time.Time) time.Duration {
	value = strings.TrimSpace(value)
	if value == "" {
		return 0
	}
	var d time.Duration
	if secs, err := strconv.ParseInt(value, 10, 64); err == nil {
		if secs <= 0 {
			return 0
		}
		if secs >= int64(MaxRetryAfter/time.Second) {
			return MaxRetryAfter
		}
		d = time.Duration(secs) * time.Second
	} else if at, err := http.ParseTime(value); err == nil {
		d = at.Sub(now)
	} else {
		return 0
	}
	if d <= 0 {
		return 0
	}
	return min(d, MaxRetryAfter)
}
