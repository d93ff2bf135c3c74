package sender

import (
	"fmt"
	"net/netip"
	"strings"
)

// HostFormError is an endpoint host that different URL parsers read
// differently: an IPv4 address written in a form other than dotted decimal
// (0x7f.1, 2130706433, 127.1, 0177.0.0.1, 127.0.0.1.), a name whose last
// label is a number but which is no IPv4 address (1.2.3.4.5, 256.0.0.1), or a
// name with non-ASCII characters (１２７.０.０.１). A browser, curl or the C
// library's resolver may connect such a host to an address that Herald's own
// parser never saw, so it is refused whatever --allow-private-networks says:
// it is ambiguous, not merely private.
type HostFormError struct {
	// Host is the host as the URL wrote it.
	Host string
	// Canonical is the dotted-decimal form of the IPv4 address Host stands
	// for, when it is one; "" otherwise.
	Canonical string
	// reason says what is wrong when Canonical is "".
	reason string
}

// Error says what is wrong with the host and how to write it.
func (e *HostFormError) Error() string {
	if e.Canonical != "" {
		return fmt.Sprintf("the host %s is an IPv4 address written in a non-standard form; write it as dotted decimal (%s)", e.Host, e.Canonical)
	}
	return fmt.Sprintf("the host %s %s", e.Host, e.reason)
}

// checkHostForm refuses a host (as url.URL.Hostname returns it, without
// brackets) that is not written the one way every parser reads alike: a name
// in ASCII, a dotted-decimal IPv4 address, or an IPv6 address. IPv6 literals
// are left to netip, which url.Parse has already applied to them.
func checkHostForm(host string) error {
	if strings.Contains(host, ":") {
		return nil // an IPv6 literal; url.Parse checked it
	}
	for i := 0; i < len(host); i++ {
		if host[i] >= 0x80 {
			return &HostFormError{Host: host, reason: "has non-ASCII characters, which browsers map to ASCII " +
				"(fullwidth digits to an IP address) but Herald resolves as they are; write the name in ASCII (IDNA, xn--…)"}
		}
	}
	addr, isIPv4, endsInNumber := parseIPv4Host(host)
	switch {
	case isIPv4 && addr.String() != host:
		return &HostFormError{Host: host, Canonical: addr.String()}
	case !isIPv4 && endsInNumber:
		return &HostFormError{Host: host, reason: "ends in a number but is not an IPv4 address; " +
			"write an IPv4 address as four decimal numbers from 0 to 255 (as in 203.0.113.7), or use a name"}
	}
	return nil
}

// parseIPv4Host reads an ASCII host as the WHATWG URL Standard's host parser
// does, which is how browsers (and, for the forms it takes, inet_aton) read
// it. A host whose last label is a number ("ends in a number") is an IPv4
// address: 1 to 4 dot-separated parts, each decimal, octal when it starts
// with 0, or hexadecimal after 0x; every part but the last is one byte and
// the last fills the remaining bytes; one trailing dot is ignored.
// endsInNumber is true when the host is to be read as an IPv4 address, and
// isIPv4 when that reading succeeds, giving addr.
func parseIPv4Host(host string) (addr netip.Addr, isIPv4, endsInNumber bool) {
	parts := strings.Split(host, ".")
	if parts[len(parts)-1] == "" && len(parts) > 1 {
		parts = parts[:len(parts)-1]
	}
	last := parts[len(parts)-1]
	if last == "" {
		return netip.Addr{}, false, false
	}
	if _, ok := parseIPv4Number(last); !ok && !allDigits(last) {
		return netip.Addr{}, false, false
	}
	if len(parts) > 4 {
		return netip.Addr{}, false, true
	}
	var numbers [4]uint64
	for i, p := range parts {
		n, ok := parseIPv4Number(p)
		if !ok {
			return netip.Addr{}, false, true
		}
		numbers[i] = n
	}
	count := len(parts)
	for _, n := range numbers[:count-1] {
		if n > 255 {
			return netip.Addr{}, false, true
		}
	}
	lastNumber := numbers[count-1]
	if lastNumber >= 1<<(8*(5-count)) {
		return netip.Addr{}, false, true
	}
	v := lastNumber
	for i, n := range numbers[:count-1] {
		v += n << (8 * (3 - i))
	}
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}), true, true
}

// parseIPv4Number reads one part of an IPv4 host as the WHATWG IPv4 number
// parser does: "0x" or "0X" starts hexadecimal, a leading 0 (with more
// after it) octal, anything else decimal; "0x" alone is 0. Values beyond
// 2^32 are reported as 2^32, which no part may reach, so no input overflows.
func parseIPv4Number(s string) (uint64, bool) {
	if s == "" {
		return 0, false
	}
	base := uint64(10)
	switch {
	case len(s) >= 2 && (s[:2] == "0x" || s[:2] == "0X"):
		s, base = s[2:], 16
	case len(s) >= 2 && s[0] == '0':
		s, base = s[1:], 8
	}
	const ceiling = 1 << 32
	var n uint64
	for i := 0; i < len(s); i++ {
		d, ok := digitValue(s[i])
		if !ok || d >= base {
			return 0, false
		}
		n = min(n*base+d, ceiling)
	}
	return n, true
}

// digitValue is the value of a hexadecimal digit of either case.
func digitValue(c byte) (uint64, bool) {
	switch {
	case c >= '0' && c <= '9':
		return uint64(c - '0'), true
	case c >= 'a' && c <= 'f':
		return uint64(c-'a') + 10, true
	case c >= 'A' && c <= 'F':
		return uint64(c-'A') + 10, true
	}
	return 0, false
}

// allDigits reports whether s is one or more ASCII digits.
func allDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
