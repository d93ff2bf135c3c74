package sender

import (
	"bufio"
	"context"
	"encoding/base64"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"

	"code.dny.dev/ssrf"
)

// EgressProxyError is a webhook the egress proxy would not carry: it
// answered the CONNECT with a status other than 200, or not in HTTP.
type EgressProxyError struct {
	// Target is the checked IP:port Herald asked the proxy to reach.
	Target string
	// Status is the proxy's status line ("403 Forbidden"); "" when it did
	// not answer in HTTP.
	Status string
	// Err is what went wrong when there is no status.
	Err error
}

// Error says the proxy refused, and what it said.
func (e *EgressProxyError) Error() string {
	if e.Status != "" {
		return "egress proxy refused CONNECT " + e.Target + ": " + e.Status
	}
	return "egress proxy CONNECT " + e.Target + ": " + e.Err.Error()
}

// Unwrap gives the underlying error, if any.
func (e *EgressProxyError) Unwrap() error { return e.Err }

// proxyDialer dials every destination through an HTTP CONNECT proxy. The
// destination is resolved and its addresses checked here, by the same SSRF
// guard as the direct dialer, before the proxy is asked: the CONNECT names
// the checked IP:port, never the host name, so the proxy cannot be steered
// to an address Herald refused nor resolve the name to another one. A
// refused destination never reaches the proxy. The proxy itself is dialed
// unchecked: the operator named it, and it may well sit on a private
// network. TLS to the receiver runs over the tunnel as it would direct, with
// the destination's host name for SNI and verification.
type proxyDialer struct {
	proxy  string // host:port
	auth   string // the Proxy-Authorization value, or ""
	dialer *net.Dialer
	guard  *ssrf.Guardian // nil: private destinations allowed
	lookup func(ctx context.Context, host string) ([]netip.Addr, error)
}

func newProxyDialer(u *url.URL, d *net.Dialer, guard *ssrf.Guardian, lookup func(context.Context, string) ([]netip.Addr, error)) *proxyDialer {
	p := &proxyDialer{proxy: u.Host, dialer: d, guard: guard, lookup: lookup}
	if u.User != nil {
		pass, _ := u.User.Password()
		p.auth = "Basic " + base64.StdEncoding.EncodeToString([]byte(u.User.Username()+":"+pass))
	}
	if p.lookup == nil {
		p.lookup = func(ctx context.Context, host string) ([]netip.Addr, error) {
			return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
		}
	}
	return p
}

// DialContext resolves and checks address, then opens a tunnel to the
// first of its addresses the proxy connects to.
func (p *proxyDialer) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(address)
	if err != nil {
		return nil, err
	}
	var addrs []netip.Addr
	if a, err := netip.ParseAddr(host); err == nil {
		addrs = []netip.Addr{a}
	} else {
		if addrs, err = p.lookup(ctx, host); err != nil {
			return nil, &net.DNSError{Err: err.Error(), Name: host}
		}
		if len(addrs) == 0 {
			return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
		}
	}
	// Every address is checked before any is tried: a name that resolves
	// to one public and one private address is refused whole, as it
	// would be refused address by address on the direct path.
	for i, a := range addrs {
		a = a.Unmap().WithZone("")
		addrs[i] = a
		if p.guard != nil && p.guard.SafeAddr(a) != nil {
			return nil, &PrivateAddressError{Addr: a.String()}
		}
	}
	var first error
	for _, a := range addrs {
		conn, err := p.connect(ctx, net.JoinHostPort(a.String(), port))
		if err == nil {
			return conn, nil
		}
		if first == nil {
			first = err
		}
		if ctx.Err() != nil {
			break
		}
	}
	return nil, first
}

// connect dials the proxy and asks it for a tunnel to target (IP:port).
func (p *proxyDialer) connect(ctx context.Context, target string) (net.Conn, error) {
	conn, err := p.dialer.DialContext(ctx, "tcp", p.proxy)
	if err != nil {
		return nil, fmt.Errorf("dial egress proxy %s: %w", p.proxy, err)
	}
	// The CONNECT exchange is bounded by ctx: closing the connection when
	// ctx ends unblocks the write and the read.
	stop := context.AfterFunc(ctx, func() { _ = conn.Close() })
	req := "CONNECT " + target + " HTTP/1.1\r\nHost: " + target + "\r\n"
	if p.auth != "" {
		req += "Proxy-Authorization: " + p.auth + "\r\n"
	}
	req += "\r\n"
	br := bufio.NewReader(conn)
	var resp *http.Response
	if _, err = conn.Write([]byte(req)); err == nil {
		resp, err = http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	}
	if !stop() {
		_ = conn.Close()
		return nil, fmt.Errorf("egress proxy CONNECT %s: %w", target, context.Cause(ctx))
	}
	if err != nil {
		_ = conn.Close()
		return nil, &EgressProxyError{Target: target, Err: err}
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_ = conn.Close()
		return nil, &EgressProxyError{Target: target, Status: strings.TrimSpace(resp.Status)}
	}
	if br.Buffered() > 0 {
		// Bytes past the proxy's answer belong to the tunnel.
		return &bufferedConn{Conn: conn, r: br}, nil
	}
	return conn, nil
}

// bufferedConn is a tunnel whose first bytes were read with the proxy's
// answer.
type bufferedConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *bufferedConn) Read(b []byte) (int, error) { return c.r.Read(b) }
