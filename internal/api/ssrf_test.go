package api_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhooks/herald"
	"github.com/heraldhooks/herald/internal/sender"
)

// TestSSRFMatrix holds every way an endpoint URL can point Herald at its own
// network, against a sentinel: a real TCP listener on 127.0.0.1, whose port
// every URL names, that records any connection and must record none. Each
// case is sent to the API (create, and change an endpoint's url) with private
// networks refused, then with them allowed; and then, whether the API took it
// or not, one delivery attempt is made to it by a sender with private
// networks refused, whose answer must be the clear refusal. Names resolve
// through a resolver the test controls (sender.Config.LookupIP), so a name
// can point at 127.0.0.1 or change its answer between creation and delivery.
func TestSSRFMatrix(t *testing.T) {
	t.Parallel()
	guard := newSentinel(t)
	port := guard.port
	dns := newTestResolver()
	closed := setup(t)
	open := setup(t, func(o *options) { o.allowPrivate = true })
	refusing := sender.New(sender.Config{LookupIP: dns.lookup})
	t.Cleanup(refusing.CloseIdleConnections)
	allowing := sender.New(sender.Config{AllowPrivateNetworks: true, LookupIP: dns.lookup})
	t.Cleanup(allowing.CloseIdleConnections)

	// private is the refusal of an address that is not public, at creation
	// (a literal) or at dial time (anything).
	private := func(addr string) string {
		return "destination " + addr + " is a private or loopback address; start Herald with --allow-private-networks"
	}
	// disguised is the refusal of an IPv4 address not in dotted decimal.
	disguised := func(host, canonical string) string {
		return "the host " + host + " is an IPv4 address written in a non-standard form; write it as dotted decimal (" + canonical + ")"
	}
	const dnsName = "names are checked where they are dialed"

	for _, tc := range []struct {
		name string
		host string // the URL is http://host:port/hook
		// resolve, for a name, is what the test resolver answers for it.
		resolve []string
		// created is "" when creation with private networks refused answers
		// 400 invalid_url; otherwise why it is accepted.
		created string
		// refused is a part of the 400's message when created is "".
		refused string
		// ambiguous: refused even with private networks allowed.
		ambiguous bool
		// attempt is a part of the delivery attempt's error, and
		// configFault that the attempt is a ClientError (nothing dialed)
		// rather than a Retryable refusal at dial time.
		attempt     string
		configFault bool
	}{
		// Literal addresses, refused at creation and at dial time.
		{name: "Loopback", host: "127.0.0.1", refused: private("127.0.0.1"), attempt: private("127.0.0.1")},
		{name: "LoopbackElsewhereIn127/8", host: "127.9.8.7", refused: private("127.9.8.7"), attempt: private("127.9.8.7")},
		{name: "Private10", host: "10.1.2.3", refused: private("10.1.2.3"), attempt: private("10.1.2.3")},
		{name: "Private172.16", host: "172.16.0.1", refused: private("172.16.0.1"), attempt: private("172.16.0.1")},
		{name: "Private172.31", host: "172.31.255.254", refused: private("172.31.255.254"), attempt: private("172.31.255.254")},
		{name: "Private192.168", host: "192.168.1.1", refused: private("192.168.1.1"), attempt: private("192.168.1.1")},
		{name: "LinkLocal", host: "169.254.1.1", refused: private("169.254.1.1"), attempt: private("169.254.1.1")},
		{name: "CloudMetadata", host: "169.254.169.254", refused: private("169.254.169.254"), attempt: private("169.254.169.254")},
		{name: "CGNAT", host: "100.64.0.1", refused: private("100.64.0.1"), attempt: private("100.64.0.1")},
		{name: "CGNATTop", host: "100.127.255.254", refused: private("100.127.255.254"), attempt: private("100.127.255.254")},
		{name: "Unspecified", host: "0.0.0.0", refused: private("0.0.0.0"), attempt: private("0.0.0.0")},
		{name: "IPv6Loopback", host: "[::1]", refused: private("::1"), attempt: private("::1")},
		{name: "IPv6Unspecified", host: "[::]", refused: private("::"), attempt: private("::")},
		{name: "IPv6UniqueLocal", host: "[fd12:3456::1]", refused: private("fd12:3456::1"), attempt: private("fd12:3456::1")},
		{name: "IPv6UniqueLocalFC", host: "[fc00::1]", refused: private("fc00::1"), attempt: private("fc00::1")},
		{name: "IPv6LinkLocal", host: "[fe80::1]", refused: private("fe80::1"), attempt: private("fe80::1")},
		{name: "IPv4MappedDotted", host: "[::ffff:127.0.0.1]", refused: private("::ffff:127.0.0.1"), attempt: private("127.0.0.1")},
		{name: "IPv4MappedHex", host: "[::ffff:7f00:1]", refused: private("::ffff:7f00:1"), attempt: private("127.0.0.1")},
		{name: "IPv4MappedMetadata", host: "[::ffff:a9fe:a9fe]", refused: private("::ffff:a9fe:a9fe"), attempt: private("169.254.169.254")},
		{name: "NAT64", host: "[64:ff9b::7f00:1]", refused: private("64:ff9b::7f00:1"), attempt: private("64:ff9b::7f00:1")},
		{name: "6to4", host: "[2002:7f00:1::1]", refused: private("2002:7f00:1::1"), attempt: private("2002:7f00:1::1")},
		{name: "Localhost", host: "localhost", refused: private("localhost"), attempt: private("127.0.0.1")},
		{name: "LocalhostTrailingDot", host: "LocalHost.", refused: private("LocalHost."), attempt: private("127.0.0.1")},
		{name: "UnderLocalhost", host: "api.localhost", refused: private("api.localhost"), attempt: private("127.0.0.1")},

		// IPv4 addresses written another way, which browsers, curl and the
		// C library's inet_aton read as the address on the right: refused
		// as ambiguous, whatever --allow-private-networks says, and by the
		// sender before it dials anything.
		{name: "HexParts", host: "0x7f.1", refused: disguised("0x7f.1", "127.0.0.1"), ambiguous: true, configFault: true},
		{name: "Decimal32", host: "2130706433", refused: disguised("2130706433", "127.0.0.1"), ambiguous: true, configFault: true},
		{name: "TwoParts", host: "127.1", refused: disguised("127.1", "127.0.0.1"), ambiguous: true, configFault: true},
		{name: "ThreeParts", host: "127.0.1", refused: disguised("127.0.1", "127.0.0.1"), ambiguous: true, configFault: true},
		{name: "Octal", host: "0177.0.0.1", refused: disguised("0177.0.0.1", "127.0.0.1"), ambiguous: true, configFault: true},
		{name: "Hex32", host: "0x7f000001", refused: disguised("0x7f000001", "127.0.0.1"), ambiguous: true, configFault: true},
		{name: "HexFirstPart", host: "0x7f.0.0.1", refused: disguised("0x7f.0.0.1", "127.0.0.1"), ambiguous: true, configFault: true},
		{name: "UpperHex", host: "0X7F.0X1", refused: disguised("0X7F.0X1", "127.0.0.1"), ambiguous: true, configFault: true},
		{name: "LeadingZeros", host: "127.000.000.001", refused: disguised("127.000.000.001", "127.0.0.1"), ambiguous: true, configFault: true},
		{name: "TrailingDot", host: "127.0.0.1.", refused: disguised("127.0.0.1.", "127.0.0.1"), ambiguous: true, configFault: true},
		{name: "ShortTrailingDot", host: "127.1.", refused: disguised("127.1.", "127.0.0.1"), ambiguous: true, configFault: true},
		{name: "HexTrailingDot", host: "0x7f.1.", refused: disguised("0x7f.1.", "127.0.0.1"), ambiguous: true, configFault: true},
		{name: "Zero", host: "0", refused: disguised("0", "0.0.0.0"), ambiguous: true, configFault: true},
		{name: "MetadataDecimal", host: "2852039166", refused: disguised("2852039166", "169.254.169.254"), ambiguous: true, configFault: true},
		{name: "MetadataTwoParts", host: "169.254.43518", refused: disguised("169.254.43518", "169.254.169.254"), ambiguous: true, configFault: true},
		{name: "PrivateOctal", host: "0300.0250.0.1", refused: disguised("0300.0250.0.1", "192.168.0.1"), ambiguous: true, configFault: true},
		{name: "PrivateShort", host: "10.1", refused: disguised("10.1", "10.0.0.1"), ambiguous: true, configFault: true},
		{name: "CGNATHex", host: "0x64.0x40.0.1", refused: disguised("0x64.0x40.0.1", "100.64.0.1"), ambiguous: true, configFault: true},
		{name: "PublicOctal", host: "010.8.8.8", refused: disguised("010.8.8.8", "8.8.8.8"), ambiguous: true, configFault: true},
		// Hosts that end in a number but are no IPv4 address: a browser
		// refuses them, and some parsers wrap 2^32 + 127 to 0.0.0.127.
		{name: "Wrapping32", host: "4294967423", refused: "the host 4294967423 ends in a number but is not an IPv4 address", ambiguous: true, configFault: true},
		{name: "FiveParts", host: "127.0.0.1.1", refused: "the host 127.0.0.1.1 ends in a number but is not an IPv4 address", ambiguous: true, configFault: true},
		{name: "PartOver255", host: "127.0.0.256", refused: "the host 127.0.0.256 ends in a number but is not an IPv4 address", ambiguous: true, configFault: true},
		// Non-ASCII names: browsers map fullwidth digits and dots to ASCII,
		// so this one is 127.0.0.1 to them.
		{name: "FullwidthDigits", host: "\uff11\uff12\uff17.\uff10.\uff10.\uff11", refused: "has non-ASCII characters", ambiguous: true, configFault: true},

		// Names that resolve to each kind of address: the API cannot know
		// what a name will resolve to when a delivery goes, so it takes
		// them, and the dialer refuses the address it is about to connect.
		{name: "NameToLoopback", host: "loopback.example.test", resolve: []string{"127.0.0.1"}, created: dnsName, attempt: private("127.0.0.1")},
		{name: "NameToPrivate10", host: "ten.example.test", resolve: []string{"10.0.0.1"}, created: dnsName, attempt: private("10.0.0.1")},
		{name: "NameToPrivate172", host: "oneseventwo.example.test", resolve: []string{"172.20.1.1"}, created: dnsName, attempt: private("172.20.1.1")},
		{name: "NameToPrivate192", host: "oneninetwo.example.test", resolve: []string{"192.168.0.10"}, created: dnsName, attempt: private("192.168.0.10")},
		{name: "NameToLinkLocal", host: "linklocal.example.test", resolve: []string{"169.254.7.7"}, created: dnsName, attempt: private("169.254.7.7")},
		{name: "NameToCloudMetadata", host: "metadata.example.test", resolve: []string{"169.254.169.254"}, created: dnsName, attempt: private("169.254.169.254")},
		{name: "NameToCGNAT", host: "cgnat.example.test", resolve: []string{"100.100.100.200"}, created: dnsName, attempt: private("100.100.100.200")},
		{name: "NameToUnspecified", host: "zero.example.test", resolve: []string{"0.0.0.0"}, created: dnsName, attempt: private("0.0.0.0")},
		{name: "NameToIPv6Loopback", host: "loopback6.example.test", resolve: []string{"::1"}, created: dnsName, attempt: private("::1")},
		{name: "NameToIPv6UniqueLocal", host: "ula.example.test", resolve: []string{"fd00::7"}, created: dnsName, attempt: private("fd00::7")},
		{name: "NameToIPv6LinkLocal", host: "linklocal6.example.test", resolve: []string{"fe80::7"}, created: dnsName, attempt: private("fe80::7")},
		{name: "NameToIPv4Mapped", host: "mapped.example.test", resolve: []string{"::ffff:127.0.0.1"}, created: dnsName, attempt: private("127.0.0.1")},
		{name: "NameToNAT64", host: "nat64.example.test", resolve: []string{"64:ff9b::7f00:1"}, created: dnsName, attempt: private("64:ff9b::7f00:1")},
		{name: "NameToSeveralPrivate", host: "several.example.test", resolve: []string{"10.9.9.9", "127.0.0.1", "::1"}, created: dnsName, attempt: private("10.9.9.9")},
		{name: "NameLocalhostLike", host: "localhost.example.test", resolve: []string{"127.0.0.1"}, created: dnsName, attempt: private("127.0.0.1")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			raw := "http://" + tc.host + ":" + port + "/hook"
			if tc.resolve != nil {
				dns.set(strings.TrimSuffix(tc.host, "."), tc.resolve...)
			}
			create := map[string]any{"url": raw}

			// Creation and change, private networks refused.
			c := closed.in(t)
			existing := c.createEndpoint(map[string]any{"url": "https://example.com/hooks"})
			if tc.created != "" {
				ep := c.createEndpoint(create)
				require.Equal(t, raw, ep.URL)
				c.do("PATCH", "/v1/endpoints/"+existing.ID, map[string]any{"url": raw}).must(http.StatusOK, nil)
			} else {
				for _, r := range []*response{
					c.do("POST", "/v1/endpoints", create),
					c.do("PATCH", "/v1/endpoints/"+existing.ID, map[string]any{"url": raw}),
				} {
					require.Contains(t, r.apiErr(http.StatusBadRequest, "invalid_url"), tc.refused)
				}
			}

			// Private networks allowed: only ambiguous hosts are refused.
			o := open.in(t)
			if tc.ambiguous {
				msg := o.do("POST", "/v1/endpoints", create).apiErr(http.StatusBadRequest, "invalid_url")
				require.Contains(t, msg, tc.refused)
				require.NotContains(t, msg, "--allow-private-networks", "the flag cannot allow it")
			} else {
				o.createEndpoint(create)
			}

			// A delivery attempt, private networks refused.
			res := refusing.Send(context.Background(), attemptTo(raw))
			require.Zero(t, res.StatusCode)
			if tc.attempt == "" {
				tc.attempt = tc.refused
			}
			require.Contains(t, res.Error, tc.attempt)
			if tc.configFault {
				require.Equal(t, sender.ClientError, res.Class, res.Error)
			} else {
				require.Equal(t, sender.Retryable, res.Class, res.Error)
			}
			if tc.ambiguous {
				res := allowing.Send(context.Background(), attemptTo(raw))
				require.Equal(t, sender.ClientError, res.Class, res.Error)
				require.Contains(t, res.Error, tc.refused)
			}
		})
	}

	// DNS rebinding: a name that resolves to a public address while the
	// endpoint is created (the API does not resolve names, but a check
	// that did would pass) and to loopback when the delivery dials it.
	t.Run("DNSRebinding", func(t *testing.T) {
		t.Parallel()
		const host = "rebind.example.test"
		raw := "http://" + host + ":" + port + "/hook"
		dns.set(host, "93.184.215.14")
		c := closed.in(t)
		ep := c.createEndpoint(map[string]any{"url": raw})
		require.Equal(t, raw, ep.URL)

		dns.set(host, "127.0.0.1")
		res := refusing.Send(context.Background(), attemptTo(ep.URL))

		require.Equal(t, sender.Retryable, res.Class, res.Error)
		require.Contains(t, res.Error, private("127.0.0.1"))
	})

	// The control: the same resolver and a sender that allows private
	// networks do reach a loopback receiver, so the refusals above come
	// from the SSRF check and not from a name that leads nowhere.
	t.Run("ControlAllowedSenderReachesLoopback", func(t *testing.T) {
		t.Parallel()
		got := make(chan struct{}, 1)
		srv := &http.Server{
			Handler:           http.HandlerFunc(func(http.ResponseWriter, *http.Request) { got <- struct{}{} }),
			ReadHeaderTimeout: 5 * time.Second,
		}
		ln, err := net.Listen("tcp4", "127.0.0.1:0")
		require.NoError(t, err)
		go func() { _ = srv.Serve(ln) }()
		t.Cleanup(func() { _ = srv.Close() })
		const host = "control.example.test"
		dns.set(host, "127.0.0.1")
		_, p, err := net.SplitHostPort(ln.Addr().String())
		require.NoError(t, err)

		res := allowing.Send(context.Background(), attemptTo("http://"+host+":"+p+"/hook"))

		require.Equal(t, sender.Success, res.Class, res.Error)
		select {
		case <-got:
		case <-time.After(5 * time.Second):
			t.Fatal("the control receiver got no request")
		}
	})

	t.Cleanup(func() {
		n, err := guard.connectionsSoFar()
		if err != nil {
			t.Error(err)
		}
		if n != 0 {
			t.Errorf("the sentinel on 127.0.0.1:%s took %d connections; it must take none", port, n)
		}
	})
}

// attemptTo is a delivery attempt to rawURL.
func attemptTo(rawURL string) *sender.Request {
	return &sender.Request{
		WebhookID: "evt_ssrf",
		EventType: "order.created",
		Body:      []byte(`{"id":1}`),
		URL:       rawURL,
		Secrets:   []string{"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"},
		Scheme:    herald.SchemeStandard,
		Timeout:   5 * time.Second,
		Timestamp: start,
	}
}

// in returns a copy of e that reports to t, for subtests sharing one server.
func (e *env) in(t *testing.T) *env {
	c := *e
	c.t = t
	return &c
}

// sentinel is a TCP listener on 127.0.0.1 that records every connection
// made to it and closes it at once.
type sentinel struct {
	addr     string
	port     string
	accepted chan string // remote addresses, in the order accepted
}

func newSentinel(t *testing.T) *sentinel {
	t.Helper()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	require.NoError(t, err)
	_, port, err := net.SplitHostPort(ln.Addr().String())
	require.NoError(t, err)
	s := &sentinel{addr: ln.Addr().String(), port: port, accepted: make(chan string, 1024)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			s.accepted <- conn.RemoteAddr().String()
			_ = conn.Close()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		<-done
	})
	return s
}

// connectionsSoFar counts the connections the sentinel took before now. It
// connects once itself and waits until its own connection is accepted:
// connections are accepted in the order they arrive, so every connection
// made before it has been counted by then.
func (s *sentinel) connectionsSoFar() (int, error) {
	conn, err := net.Dial("tcp4", s.addr)
	if err != nil {
		return 0, fmt.Errorf("connect to the sentinel: %w", err)
	}
	defer conn.Close()
	mine := conn.LocalAddr().String()
	n := 0
	deadline := time.After(5 * time.Second)
	for {
		select {
		case remote := <-s.accepted:
			if remote == mine {
				return n, nil
			}
			n++
		case <-deadline:
			return n, fmt.Errorf("the sentinel did not accept its own connection")
		}
	}
}

// testResolver answers lookups from a table the test fills, which starts
// with the loopback names a hosts file gives; an unknown name does not
// resolve.
type testResolver struct {
	mu    sync.Mutex
	names map[string][]netip.Addr
}

func newTestResolver() *testResolver {
	r := &testResolver{names: make(map[string][]netip.Addr)}
	r.set("localhost", "127.0.0.1", "::1")
	r.set("api.localhost", "127.0.0.1", "::1")
	return r
}

// set makes host resolve to addrs from now on.
func (r *testResolver) set(host string, addrs ...string) {
	parsed := make([]netip.Addr, len(addrs))
	for i, a := range addrs {
		parsed[i] = netip.MustParseAddr(a)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.names[strings.ToLower(host)] = parsed
}

func (r *testResolver) lookup(_ context.Context, host string) ([]netip.Addr, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	addrs, ok := r.names[strings.ToLower(strings.TrimSuffix(host, "."))]
	if !ok {
		return nil, fmt.Errorf("no such host %s in the test resolver", host)
	}
	return addrs, nil
}
