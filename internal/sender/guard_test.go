package sender

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

const flagHint = "start Herald with --allow-private-networks (HERALD_ALLOW_PRIVATE_NETWORKS=true) to allow it"

// TestDialControl checks the hook the dialer runs on every resolved address,
// without dialing anything: each address is only handed to the function.
func TestDialControl(t *testing.T) {
	t.Parallel()
	control := dialControl(newGuardian())
	for _, tc := range []struct {
		network, address string
		refused          bool
	}{
		{"tcp4", "127.0.0.1:8080", true},
		{"tcp4", "127.255.255.254:443", true},
		{"tcp4", "0.0.0.0:80", true},
		{"tcp4", "10.0.0.1:80", true},
		{"tcp4", "172.16.5.4:9000", true},
		{"tcp4", "192.168.1.1:80", true},
		{"tcp4", "169.254.169.254:80", true}, // cloud metadata
		{"tcp4", "169.254.1.1:80", true},
		{"tcp4", "100.64.0.1:80", true}, // CGNAT
		{"tcp4", "100.127.255.254:80", true},
		{"tcp4", "224.0.0.1:80", true},
		{"tcp6", "[::1]:8080", true},
		{"tcp6", "[::]:80", true},
		{"tcp6", "[fc00::1]:80", true}, // ULA
		{"tcp6", "[fd12:3456::1]:80", true},
		{"tcp6", "[fe80::1]:80", true}, // link-local
		{"tcp6", "[::ffff:127.0.0.1]:80", true},
		{"tcp6", "[::ffff:10.0.0.1]:80", true},
		{"tcp6", "[::ffff:169.254.169.254]:80", true},
		{"tcp6", "[64:ff9b::7f00:1]:80", true}, // NAT64 form of 127.0.0.1
		{"tcp6", "[2002:7f00:1::1]:80", true},  // 6to4 form of 127.0.0.1
		// Public addresses pass the check (only the function runs here; the
		// tests never send traffic to them). Any port is allowed.
		{"tcp4", "1.1.1.1:8443", false},
		{"tcp6", "[2606:4700:4700::1111]:443", false},
	} {
		t.Run(tc.address, func(t *testing.T) {
			t.Parallel()
			err := control(tc.network, tc.address, nil)
			if !tc.refused {
				require.NoError(t, err)
				return
			}
			var private *PrivateAddressError
			require.ErrorAs(t, err, &private)
			require.Contains(t, err.Error(), flagHint)
		})
	}

	t.Run("UnmappedInMessage", func(t *testing.T) {
		t.Parallel()
		err := control("tcp6", "[::ffff:127.0.0.1]:80", nil)
		require.EqualError(t, err, "destination 127.0.0.1 is a private or loopback address; "+flagHint)
	})

	t.Run("UDPRefused", func(t *testing.T) {
		t.Parallel()
		err := control("udp4", "1.1.1.1:53", nil)
		require.Error(t, err)
		require.False(t, errors.As(err, new(*PrivateAddressError)))
	})
}

// TestSendRefusesPrivateDestinations sends through a Sender with private
// networks off. The loopback receivers are real and must see nothing; the
// other addresses are refused by the Control hook, which runs before
// connect, so no packet ever leaves.
func TestSendRefusesPrivateDestinations(t *testing.T) {
	t.Parallel()
	srv, got := receiver(t, status(http.StatusOK))
	u, err := url.Parse(srv.URL)
	require.NoError(t, err)
	port := u.Port()

	// An IPv6 loopback receiver, when the machine has IPv6.
	var got6 <-chan received
	url6 := "http://[::1]:9/hook"
	if ln, err := net.Listen("tcp6", "[::1]:0"); err == nil {
		c := make(chan received, 1)
		srv6 := &http.Server{
			Handler:           http.HandlerFunc(func(http.ResponseWriter, *http.Request) { c <- received{} }),
			ReadHeaderTimeout: 5 * time.Second,
		}
		go func() { _ = srv6.Serve(ln) }()
		t.Cleanup(func() { _ = srv6.Close() })
		got6 = c
		url6 = "http://" + ln.Addr().String() + "/hook"
	}

	for _, tc := range []struct {
		name, url, addr string
		got             <-chan received
	}{
		{"Loopback", "http://127.0.0.1:" + port + "/hook", "127.0.0.1", got},
		{"IPv6Loopback", url6, "::1", got6},
		{"NameResolvingToLoopback", "http://localhost:" + port + "/hook", "", got},
		{"Metadata", "http://169.254.169.254/latest/meta-data/", "169.254.169.254", nil},
		{"RFC1918", "http://10.0.0.1:8080/hook", "10.0.0.1", nil},
		{"CGNAT", "https://100.64.0.1/hook", "100.64.0.1", nil},
		{"IPv4MappedIPv6", "http://[::ffff:127.0.0.1]:" + port + "/hook", "127.0.0.1", got},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := New(Config{})
			t.Cleanup(s.CloseIdleConnections)

			res := s.Send(context.Background(), request(tc.url))

			require.Equal(t, Retryable, res.Class)
			require.Zero(t, res.StatusCode)
			require.Contains(t, res.Error, flagHint)
			require.Contains(t, res.Error, "destination "+tc.addr)
			if tc.addr == "" { // localhost: either loopback address
				require.Regexp(t, `^destination (127\.0\.0\.1|::1) is a private`, res.Error)
			}
			if tc.got != nil {
				none(t, tc.got)
			}
		})
	}

	t.Run("AllowedWithFlag", func(t *testing.T) {
		t.Parallel()
		s := New(Config{AllowPrivateNetworks: true})
		t.Cleanup(s.CloseIdleConnections)
		fresh, freshGot := receiver(t, status(http.StatusOK))

		res := s.Send(context.Background(), request(fresh.URL))

		require.Equal(t, Success, res.Class, res.Error)
		one(t, freshGot)
	})
}

func TestCheckURL(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		url          string
		allowPrivate bool
		private      bool   // refused as a private destination
		errPart      string // refused for another reason
	}{
		{url: "https://example.com/hooks"},
		{url: "http://example.com:8080/hooks?x=1"},
		{url: "HTTPS://Example.COM/x"},
		{url: "https://user:pass@example.com/x"},
		{url: "https://93.184.215.14/x"},
		{url: "https://[2606:4700::1111]:8443/x"},
		{url: "https://internal.example.com/x"}, // names are checked at dial time
		{url: "ftp://example.com/x", errPart: "http or https"},
		{url: "example.com/hooks", errPart: "http or https"},
		{url: "/hooks", errPart: "http or https"},
		{url: "", errPart: "http or https"},
		{url: "https:///hooks", errPart: "a host is required"},
		{url: "http://:8080/x", errPart: "a host is required"},
		{url: "https://exa mple.com/", errPart: "invalid URL"},
		{url: "http://127.0.0.1/x", private: true},
		{url: "http://127.0.0.1:9000/x", allowPrivate: true},
		{url: "http://localhost:3000/x", private: true},
		{url: "http://LOCALHOST./x", private: true},
		{url: "http://api.localhost/x", private: true},
		{url: "http://localhost:3000/x", allowPrivate: true},
		{url: "http://[::1]:8080/x", private: true},
		{url: "http://[::ffff:127.0.0.1]/x", private: true},
		{url: "http://[fe80::1%25eth0]/x", private: true},
		{url: "http://[fd00::1]/x", private: true},
		{url: "http://169.254.169.254/latest/meta-data/", private: true},
		{url: "http://10.0.0.1/x", private: true},
		{url: "http://172.31.255.255/x", private: true},
		{url: "http://192.168.0.10/x", private: true},
		{url: "http://100.100.100.200/x", private: true},
		{url: "http://0.0.0.0/x", private: true},
		{url: "http://10.0.0.1/x", allowPrivate: true},
		{url: "ftp://10.0.0.1/x", allowPrivate: true, errPart: "http or https"},
	} {
		t.Run(tc.url, func(t *testing.T) {
			t.Parallel()
			err := CheckURL(tc.url, tc.allowPrivate)
			switch {
			case tc.private:
				var private *PrivateAddressError
				require.ErrorAs(t, err, &private)
				require.Contains(t, err.Error(), flagHint)
			case tc.errPart != "":
				require.ErrorContains(t, err, tc.errPart)
				require.False(t, errors.As(err, new(*PrivateAddressError)))
			default:
				require.NoError(t, err)
			}
		})
	}
}

func TestCheckHeader(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, value string
		errPart     string
	}{
		{"X-Team", "a", ""},
		{"authorization", "Bearer x\ty", ""},
		{"webhook-signature", "v1,x", "cannot be overridden"},
		{"X-WEBHOOK-SIGNATURE", "x", "cannot be overridden"},
		{"Content-Type", "text/plain", "cannot be overridden"},
		{"User-Agent", "x", "cannot be overridden"},
		{"Host", "evil.example", "cannot be overridden"},
		{"Transfer-Encoding", "chunked", "cannot be overridden"},
		{"", "x", "not a valid HTTP header name"},
		{"X Team", "x", "not a valid HTTP header name"},
		{"X-Team:", "x", "not a valid HTTP header name"},
		{"X-Team", "a\r\nX-Other: b", "control characters"},
		{"X-Team", "a\x00", "control characters"},
	} {
		t.Run(tc.name+"="+tc.value, func(t *testing.T) {
			t.Parallel()
			err := CheckHeader(tc.name, tc.value)
			if tc.errPart == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorContains(t, err, tc.errPart)
		})
	}
}
