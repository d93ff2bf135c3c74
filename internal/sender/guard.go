package sender

import (
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"strings"
	"syscall"

	"code.dny.dev/ssrf"

	"github.com/heraldhooks/herald"
)

// PrivateAddressError is a destination refused because it is loopback,
// private, link-local (cloud metadata included), CGNAT or otherwise not a
// public unicast address, while private networks are not allowed. Its message
// names the flag that allows such destinations.
type PrivateAddressError struct {
	// Addr is the refused destination: an IP address, or the host name
	// ("localhost") CheckURL refused.
	Addr string
}

// Error says what was refused and how to allow it.
func (e *PrivateAddressError) Error() string {
	return herald.RefusedDestinationError(e.Addr)
}

// newGuardian returns the SSRF check shared by the dialer and CheckURL: any
// port (webhooks listen on many), TCP only, and the library's deny lists.
//
// Those lists already cover everything Herald must refuse: for IPv4 the IANA
// special-purpose registry (0/8, 10/8, 100.64/10 CGNAT, 127/8, 169.254/16
// with the 169.254.169.254 metadata address, 172.16/12, 192.168/16,
// multicast, reserved...); for IPv6 every address outside global unicast
// 2000::/3, which takes in ::1, ::, fc00::/7 ULA, fe80::/10 link-local,
// IPv4-mapped ::ffff:0:0/96 and NAT64 64:ff9b::/96 (so 127.0.0.1 cannot come
// back disguised), plus the special ranges inside 2000::/3 (6to4, Teredo,
// documentation). The tests pin each of these.
func newGuardian() *ssrf.Guardian {
	return ssrf.New(ssrf.WithAnyPort(), ssrf.WithNetworks("tcp4", "tcp6"))
}

// dialControl returns the net.Dialer Control hook that refuses private
// destinations. It runs on the resolved address after the socket is made and
// before connect, so a DNS name pointing at 127.0.0.1 is refused too and a
// refused address never sees a packet.
func dialControl(g *ssrf.Guardian) func(network, address string, c syscall.RawConn) error {
	return func(network, address string, c syscall.RawConn) error {
		err := g.Safe(network, address, c)
		if err == nil {
			return nil
		}
		if errors.Is(err, ssrf.ErrProhibitedIP) {
			host := address
			if ap, perr := netip.ParseAddrPort(address); perr == nil {
				host = ap.Addr().Unmap().String()
			}
			return &PrivateAddressError{Addr: host}
		}
		return fmt.Errorf("refuse destination %s: %w", address, err)
	}
}

// CheckURL reports whether rawURL is acceptable as an endpoint URL: absolute,
// http or https, with a host. A host that parsers read differently (an IPv4
// address not in dotted decimal, a name ending in a number, a non-ASCII
// name) is refused with a *HostFormError, even when allowPrivate. Unless
// allowPrivate, a host that is a literal private, loopback or link-local IP,
// or "localhost" (or a name under .localhost), is refused with a
// *PrivateAddressError. Other names are only checked when a delivery dials
// them, since what they resolve to can change.
func CheckURL(rawURL string, allowPrivate bool) error {
	u, err := url.Parse(rawURL)
	if err != nil {
		return fmt.Errorf("invalid URL: %w", err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return fmt.Errorf("invalid URL %q: the scheme must be http or https", rawURL)
	}
	host := u.Hostname()
	if host == "" {
		return fmt.Errorf("invalid URL %q: a host is required", rawURL)
	}
	if err := checkHostForm(host); err != nil {
		return err
	}
	if allowPrivate {
		return nil
	}
	name := strings.TrimSuffix(strings.ToLower(host), ".")
	if name == "localhost" || strings.HasSuffix(name, ".localhost") {
		return &PrivateAddressError{Addr: host}
	}
	addr, err := netip.ParseAddr(host)
	if err != nil {
		return nil // a name: checked at dial time
	}
	if newGuardian().SafeAddr(addr.WithZone("")) != nil {
		return &PrivateAddressError{Addr: host}
	}
	return nil
}
