package sender

import (
	"net/netip"
	"testing"
	"time"
)

// FuzzParseRetryAfter checks that no Retry-After value, at any time of the
// sender's clock, gives a negative delay or one above MaxRetryAfter.
func FuzzParseRetryAfter(f *testing.F) {
	now := testTime.Unix()
	for _, v := range []string{
		"", "0", "1", "120", " 120 ", "-1", "+5", "1.5", "1e3", "86400", "86401",
		"9223372036854775807", "-9223372036854775808", "99999999999999999999",
		"Wed, 04 Mar 2026 05:07:07 GMT", "Wed, 04 Mar 2026 05:06:06 GMT",
		"Sun, 06 Nov 1994 08:49:37 GMT", "Sunday, 06-Nov-94 08:49:37 GMT", "Sun Nov  6 08:49:37 1994",
		"Fri, 31 Dec 9999 23:59:59 GMT", "Mon, 01 Jan 0001 00:00:00 GMT", "soon",
	} {
		f.Add(v, now)
	}
	f.Add("120", int64(-62135596800)) // year 1
	f.Add("Fri, 31 Dec 9999 23:59:59 GMT", int64(-1<<63))
	f.Add("Mon, 01 Jan 0001 00:00:00 GMT", int64(1<<63-1))
	f.Fuzz(func(t *testing.T, value string, nowUnix int64) {
		d := parseRetryAfter(value, time.Unix(nowUnix, 0))
		if d < 0 || d > MaxRetryAfter {
			t.Fatalf("parseRetryAfter(%q, %d) = %v, outside [0, %v]", value, nowUnix, d, MaxRetryAfter)
		}
	})
}

// FuzzCheckHostForm checks the WHATWG reading of hosts against netip and
// against itself: a dotted-decimal address reads as itself, whatever reads
// as an IPv4 address reads the same once written in dotted decimal, and a
// host checkHostForm lets through that reads as an IPv4 address is already
// in dotted decimal.
func FuzzCheckHostForm(f *testing.F) {
	for _, h := range []string{
		"127.0.0.1", "0x7f.1", "2130706433", "127.1", "0177.0.0.1", "0x7f000001", "127.0.0.1.",
		"1.2.3.4.5", "256.0.0.1", "4294967296", "example.com", "example.com.", "0x", "0", "08",
		"cafe.be", "1.2.3.com", "", ".", "::1", "\uff11\uff12\uff17.\uff10.\uff10.\uff11", "a..1",
	} {
		f.Add(h)
	}
	f.Fuzz(func(t *testing.T, host string) {
		addr, isIPv4, endsInNumber := parseIPv4Host(host)
		if isIPv4 && !endsInNumber {
			t.Fatalf("%q reads as %v without ending in a number", host, addr)
		}
		if std, err := netip.ParseAddr(host); err == nil && std.Is4() {
			if !isIPv4 || addr != std {
				t.Fatalf("dotted decimal %q reads as %v (IPv4 %v)", host, addr, isIPv4)
			}
		}
		err := checkHostForm(host)
		if !isIPv4 {
			return
		}
		again, ok, _ := parseIPv4Host(addr.String())
		if !ok || again != addr {
			t.Fatalf("%q reads as %v, whose dotted decimal reads as %v", host, addr, again)
		}
		if err == nil && host != addr.String() {
			t.Fatalf("checkHostForm let %q through, which reads as %v", host, addr)
		}
		if err != nil && host == addr.String() {
			t.Fatalf("checkHostForm refused dotted decimal %q: %v", host, err)
		}
	})
}
