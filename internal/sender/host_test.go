package sender

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestParseIPv4Host pins the WHATWG reading of hosts, with the examples of
// the URL Standard and the forms used to slip 127.0.0.1 past a parser.
func TestParseIPv4Host(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		host         string
		want         string // "" when the host is not an IPv4 address
		endsInNumber bool
	}{
		{"127.0.0.1", "127.0.0.1", true},
		{"127.0.0.1.", "127.0.0.1", true},
		{"0x7f.1", "127.0.0.1", true},
		{"0X7F.1", "127.0.0.1", true},
		{"0x7f.0.0.1", "127.0.0.1", true},
		{"0x7f000001", "127.0.0.1", true},
		{"2130706433", "127.0.0.1", true},
		{"127.1", "127.0.0.1", true},
		{"127.0.1", "127.0.0.1", true},
		{"0177.0.0.1", "127.0.0.1", true},
		{"0177.0.0.01", "127.0.0.1", true},
		{"127.000.000.001", "127.0.0.1", true},
		{"0x7f.0x0.0x0.0x1", "127.0.0.1", true},
		{"0x.0x.0x.0x", "0.0.0.0", true},
		{"0", "0.0.0.0", true},
		{"00", "0.0.0.0", true},
		{"0x", "0.0.0.0", true},
		{"4294967295", "255.255.255.255", true},
		{"169.254.43518", "169.254.169.254", true},
		{"0xa9fea9fe", "169.254.169.254", true},
		{"10.0x10000", "10.1.0.0", true}, // the last part fills three bytes
		{"0x100000000", "", true},        // 2^32
		{"4294967296", "", true},
		{"99999999999999999999999999", "", true}, // no overflow
		{"256.0.0.1", "", true},
		{"1.2.3.4..", "", false}, // an empty last label: a name, as WHATWG reads it
		{"1.2.3.4..", "", false}, // an empty last label: a name, as WHATWG reads it
		{"127..1", "", true},
		{"08", "", true},
		{"0x7g", "", false},
		{"example.com", "", false},
		{"example.com.", "", false},
		{"example.0x1", "", true},
		{"cafe.be", "", false},
		{"1.2.3.com", "", false},
		{"127.0.0.1.example", "", false},
		{"", "", false},
		{".", "", false},
		{"..", "", false},
	} {
		t.Run(tc.host, func(t *testing.T) {
			t.Parallel()
			addr, isIPv4, endsInNumber := parseIPv4Host(tc.host)
			require.Equal(t, tc.endsInNumber, endsInNumber, "ends in a number")
			require.Equal(t, tc.want != "", isIPv4, "is an IPv4 address")
			if tc.want != "" {
				require.Equal(t, tc.want, addr.String())
			}
		})
	}
}

// TestCheckURLHostForms checks that ambiguous hosts are refused with a
// HostFormError whatever allowPrivate says, and that plain forms pass.
func TestCheckURLHostForms(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		url, msg string // msg "" when the URL is accepted with private networks allowed
	}{
		{"http://0x7f.1/x", "the host 0x7f.1 is an IPv4 address written in a non-standard form; write it as dotted decimal (127.0.0.1)"},
		{"http://2130706433:8080/x", "the host 2130706433 is an IPv4 address written in a non-standard form; write it as dotted decimal (127.0.0.1)"},
		{"http://127.1/x", "(127.0.0.1)"},
		{"http://0177.0.0.1/x", "(127.0.0.1)"},
		{"http://0x7f000001/x", "(127.0.0.1)"},
		{"http://0x7f.0.0.1/x", "(127.0.0.1)"},
		{"http://127.0.1/x", "(127.0.0.1)"},
		{"http://127.0.0.1./x", "the host 127.0.0.1. is an IPv4 address written in a non-standard form"},
		{"http://0/x", "(0.0.0.0)"},
		{"https://010.8.8.8/x", "(8.8.8.8)"},
		{"https://0xa9fea9fe/latest/meta-data/", "(169.254.169.254)"},
		{"http://1.2.3.4.5/x", "the host 1.2.3.4.5 ends in a number but is not an IPv4 address"},
		{"http://256.0.0.1/x", "ends in a number"},
		{"http://4294967423/x", "ends in a number"}, // 2^32 + 127: some parsers wrap it to 0.0.0.127
		{"http://example.0x1/x", "ends in a number"},
		{"http://\uff11\uff12\uff17.\uff10.\uff10.\uff11/x", "has non-ASCII characters"},
		{"http://ex\u00e9.com/x", "has non-ASCII characters"},
		{"http://127.0.0.1/x", ""},
		{"http://8.8.8.8/x", ""},
		{"http://example.com./x", ""},
		{"http://xn--ex-9ia.com/x", ""},
		{"http://[::ffff:127.0.0.1]/x", ""},
		{"http://1.2.3.com/x", ""},
	} {
		t.Run(tc.url, func(t *testing.T) {
			t.Parallel()
			for _, allowPrivate := range []bool{true, false} {
				err := CheckURL(tc.url, allowPrivate)
				if tc.msg == "" {
					if allowPrivate {
						require.NoError(t, err)
					}
					require.False(t, errors.As(err, new(*HostFormError)), "%v", err)
					continue
				}
				var form *HostFormError
				require.ErrorAs(t, err, &form, "allowPrivate %v", allowPrivate)
				require.Contains(t, err.Error(), tc.msg)
			}
		})
	}
}
