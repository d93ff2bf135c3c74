package config_test

import (
	"bytes"
	"encoding/base64"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhooks/herald/internal/config"
)

func TestParseDB(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in         string
		kind       config.DBKind
		target     string
		wantErrSub string
	}{
		{in: "sqlite://herald.db", kind: config.DBSQLite, target: "herald.db"},
		{in: "sqlite://data/h.db", kind: config.DBSQLite, target: "data/h.db"},
		{in: "./h.db", kind: config.DBSQLite, target: "./h.db"},
		{in: "postgres://u@127.0.0.1/h", kind: config.DBPostgres, target: "postgres://u@127.0.0.1/h"},
		{in: "postgresql://u@h/x", kind: config.DBPostgres, target: "postgresql://u@h/x"},
		{in: "", wantErrSub: "empty"},
		{in: "sqlite://", wantErrSub: "file path"},
		{in: "mysql://u:secret@h/x", wantErrSub: "unknown scheme"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			t.Parallel()
			kind, target, err := config.ParseDB(tt.in)
			if tt.wantErrSub != "" {
				require.ErrorContains(t, err, tt.wantErrSub)
				require.NotContains(t, err.Error(), "secret")
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.kind, kind)
			require.Equal(t, tt.target, target)
		})
	}
}

func TestValidateListsEveryProblem(t *testing.T) {
	t.Parallel()
	c := config.Default()
	require.NoError(t, c.Validate(true))
	c.Addr = "nope"
	c.DB = ""
	c.APIKey = "short"
	c.LogFormat = "xml"
	c.LogLevel = "loud"
	c.Concurrency = 0
	c.PollInterval = time.Hour
	c.LeaseMargin = 0
	c.MetricsAddr = "nowhere"
	c.PprofAddr = "anywhere"
	c.EncryptionKey = "k1:short"
	c.Retention = -time.Hour
	c.ReadTimeout = 0
	err := c.Validate(true)
	require.Error(t, err)
	for _, want := range []string{"addr:", "db:", "api-key:", "log-format:", "log-level:", "concurrency:", "poll-interval:", "lease-margin:", "metrics-addr:", "pprof-addr:", "encryption-key:", "retention:", "read-timeout:"} {
		require.ErrorContains(t, err, want)
	}
	require.NotRegexp(t, "(?m)^addr:", c.Validate(false).Error(), "worker has no address")
}

func TestLeaseMarginBounds(t *testing.T) {
	t.Parallel()
	require.Equal(t, 15*time.Second, config.Default().LeaseMargin)
	tests := []struct {
		margin time.Duration
		ok     bool
	}{
		{-time.Second, false},
		{0, false},
		{999 * time.Millisecond, false},
		{time.Second, true},
		{2 * time.Second, true},
		{15 * time.Second, true},
		{10 * time.Minute, true},
		{10*time.Minute + time.Millisecond, false},
		{time.Hour, false},
	}
	for _, tt := range tests {
		t.Run(tt.margin.String(), func(t *testing.T) {
			t.Parallel()
			c := config.Default()
			c.LeaseMargin = tt.margin
			err := c.Validate(true)
			if tt.ok {
				require.NoError(t, err)
				return
			}
			require.EqualError(t, err, "lease-margin: "+tt.margin.String()+" is not between 1s and 10m")
		})
	}
}

// TestReadTimeoutBounds: --read-timeout is 60 s unless set, from 1 s to
// 1 h, and is logged with the configuration.
func TestReadTimeoutBounds(t *testing.T) {
	t.Parallel()
	require.Equal(t, time.Minute, config.Default().ReadTimeout)
	tests := []struct {
		timeout time.Duration
		ok      bool
	}{
		{-time.Second, false},
		{0, false},
		{999 * time.Millisecond, false},
		{time.Second, true},
		{time.Minute, true},
		{time.Hour, true},
		{time.Hour + time.Millisecond, false},
	}
	for _, tt := range tests {
		t.Run(tt.timeout.String(), func(t *testing.T) {
			t.Parallel()
			c := config.Default()
			c.ReadTimeout = tt.timeout
			err := c.Validate(true)
			if tt.ok {
				require.NoError(t, err)
				return
			}
			require.EqualError(t, err, "read-timeout: "+tt.timeout.String()+" is not between 1s and 1h")
		})
	}

	var buf bytes.Buffer
	slog.New(slog.NewTextHandler(&buf, nil)).Info("start", "config", config.Default())
	require.Contains(t, buf.String(), "config.read_timeout=1m0s")
}

func TestRetention(t *testing.T) {
	t.Parallel()
	require.Equal(t, 720*time.Hour, config.Default().Retention, "30 days")
	for _, r := range []time.Duration{0, time.Hour, 720 * time.Hour, 10 * 365 * 24 * time.Hour} {
		c := config.Default()
		c.Retention = r
		require.NoError(t, c.Validate(true), r)
	}
	c := config.Default()
	c.Retention = -time.Second
	require.EqualError(t, c.Validate(true), "retention: -1s is negative (0 keeps everything)")
}

func TestDBWait(t *testing.T) {
	t.Parallel()
	require.Equal(t, time.Minute, config.Default().DBWait)
	c := config.Default()
	c.DBWait = 0
	require.NoError(t, c.Validate(true), "0 tries once")
	c.DBWait = -time.Second
	require.EqualError(t, c.Validate(true), "db-wait: -1s is negative (0 tries once)")
}

func TestRedact(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want string }{
		{"postgres://u:hunter2@h:5432/db", "postgres://u:xxxxx@h:5432/db"},
		{"postgres://u@h/db", "postgres://u@h/db"},
		{"sqlite://x.db", "sqlite://x.db"},
		{"sqlite:///var/lib/herald/herald.db?_pragma=busy_timeout(5000)", "sqlite:///var/lib/herald/herald.db?_pragma=busy_timeout(5000)"},
		// An @ in the password: the host is after the last one.
		{"postgres://u:p@ss@h/db", "postgres://u:xxxxx@h/db"},
		{"postgresql://u:hunter2@h/db?sslmode=require", "postgresql://u:xxxxx@h/db?sslmode=require"},
		// In the query, whatever its case, beside other parameters.
		{"postgres://h/db?user=u&password=hunter2&sslmode=disable", "postgres://h/db?xxxxx"},
		{"postgres://u@h/db?PASSWORD=hunter2", "postgres://u@h/db?xxxxx"},
		{"postgres://u@h/db?sslpassword=hunter2&sslkey=/k.pem", "postgres://u@h/db?xxxxx"},
		{"postgres://h/db?password=hun&ter2", "postgres://h/db?xxxxx"},
		// A password holding an unescaped / is read as a port and a path.
		{"postgres://u:1234/hunter2@h/db", "postgres://xxxxx"},
		{"postgres://u:hunter2?x@h/db", "postgres://xxxxx"},
		// An escaped password, and one that does not parse.
		{"postgres://u:hun%40ter2@h/db", "postgres://u:xxxxx@h/db"},
		{"postgres://u:hunter2%zz@h/db", "postgres://xxxxx"},
		// PostgreSQL's key=value form.
		{"host=h user=u password=hunter2 dbname=db", "host=h user=u password=xxxxx dbname=db"},
		{"host=h password = 'hunter 2' dbname=db", "host=h password=xxxxx dbname=db"},
		{`host=h password='it\'s hunter2' sslpassword=hunter3`, "host=h password=xxxxx sslpassword=xxxxx"},
		{`host=h password=hunter\ two dbname=db`, "host=h password=xxxxx dbname=db"},
		// A :// in a key=value string does not make it a URL.
		{"host=h password=hunter2 application_name=herald://n", "host=h password=xxxxx application_name=herald://n"},
	} {
		got := config.Redact(tc.in)
		require.Equal(t, tc.want, got, tc.in)
		require.NotContains(t, got, "hunter", tc.in)
	}
}

// TestEncryptionKeyIsCheckedAndNeverLogged: a bad ring is named without
// its keys, and a logged Config shows the key ids only.
func TestEncryptionKeyIsCheckedAndNeverLogged(t *testing.T) {
	t.Parallel()
	k2, k1 := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{2}, 32)), base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{1}, 32))
	c := config.Default()
	c.EncryptionKey = "k2:" + k2 + ",k1:" + k1
	require.NoError(t, c.Validate(true))

	var buf bytes.Buffer
	slog.New(slog.NewTextHandler(&buf, nil)).Info("start", "config", c)
	require.Contains(t, buf.String(), "encryption_key=\"k2,k1 (keys hidden)\"")
	require.NotContains(t, buf.String(), k2)
	require.NotContains(t, buf.String(), k1)

	c.EncryptionKey = "k2:" + k2 + ",k1:" + k1[:20]
	err := c.Validate(true)
	require.ErrorContains(t, err, "encryption-key: key k1: 15 bytes, want 32")
	require.NotContains(t, err.Error(), k1[:20])
	require.NotContains(t, err.Error(), k2)
	buf.Reset()
	slog.New(slog.NewTextHandler(&buf, nil)).Info("start", "config", c)
	require.NotContains(t, buf.String(), k2)
	require.Contains(t, buf.String(), "(invalid, hidden)")
}

func TestPortalFrameAncestors(t *testing.T) {
	t.Parallel()
	c := config.Default()
	c.PortalFrameAncestors = []string{"https://app.example.com", "http://localhost:3000", "https://admin.example.com/"}
	require.NoError(t, c.Validate(true))
	for _, bad := range []string{"app.example.com", "https://app.example.com/path", "https://*.example.com",
		"https://a.example.com; script-src *", "'self'", "javascript:alert(1)", "https://u:p@a.example.com", ""} {
		c.PortalFrameAncestors = []string{bad}
		require.ErrorContains(t, c.Validate(true), "portal-frame-ancestors: ", bad)
	}
}

// TestPublicURL: --public-url is a base URL for the links Herald mails;
// without it they point at --addr.
func TestPublicURL(t *testing.T) {
	t.Parallel()
	c := config.Default()
	for _, good := range []string{"https://hooks.example.com", "https://hooks.example.com/", "http://127.0.0.1:8080", "https://example.com/herald"} {
		c.PublicURL = good
		require.NoError(t, c.Validate(true), good)
	}
	for _, bad := range []string{"hooks.example.com", "ftp://hooks.example.com", "https://", "https://u:p@hooks.example.com",
		"https://hooks.example.com/?x=1", "https://hooks.example.com/#x", "https://hooks.example.com/a b"} {
		c.PublicURL = bad
		require.ErrorContains(t, c.Validate(true), "public-url: ", bad)
	}

	for _, tc := range []struct{ public, addr, want string }{
		{"https://hooks.example.com/", "127.0.0.1:8080", "https://hooks.example.com"},
		{"https://example.com/herald", "127.0.0.1:8080", "https://example.com/herald"},
		{"", "127.0.0.1:8080", "http://127.0.0.1:8080"},
		{"", ":8080", "http://localhost:8080"},
		{"", "0.0.0.0:9000", "http://localhost:9000"},
		{"", "[::]:9000", "http://localhost:9000"},
		{"", "[::1]:9000", "http://[::1]:9000"},
	} {
		c := config.Default()
		c.PublicURL, c.Addr = tc.public, tc.addr
		require.Equal(t, tc.want, c.PublicBaseURL(), "%+v", tc)
	}
}

// TestTLSAndProxies: the TLS pair comes whole or not at all, trusted
// proxies are CIDRs or addresses, and the metrics and pprof listeners
// leave loopback only with the pair.
func TestTLSAndProxies(t *testing.T) {
	t.Parallel()
	c := config.Default()
	c.TLSCert = "cert.pem"
	require.ErrorContains(t, c.Validate(true), "tls-cert and tls-key: give both")
	c.TLSCert, c.TLSKey = "", "key.pem"
	require.ErrorContains(t, c.Validate(true), "tls-cert and tls-key: give both")
	c.TLSCert = "cert.pem"
	require.NoError(t, c.Validate(true))

	c = config.Default()
	c.TrustedProxies = []string{"10.0.0.0/8", "127.0.0.1", "::1"}
	require.NoError(t, c.Validate(true))
	c.TrustedProxies = []string{"10.0.0.0/8", "proxy.internal"}
	require.ErrorContains(t, c.Validate(true), `trusted-proxies: "proxy.internal" is not a CIDR`)

	for _, flag := range []string{"pprof-addr", "metrics-addr"} {
		c = config.Default()
		set := func(addr string) {
			if flag == "pprof-addr" {
				c.PprofAddr = addr
			} else {
				c.MetricsAddr = addr
			}
		}
		for _, addr := range []string{"127.0.0.1:6060", "[::1]:6060", "localhost:6060"} {
			set(addr)
			require.NoError(t, c.Validate(true), addr)
		}
		for _, addr := range []string{":6060", "0.0.0.0:6060", "10.0.0.5:6060"} {
			set(addr)
			require.ErrorContains(t, c.Validate(true), flag+": "+`"`+addr+`" is not a loopback address; without --tls-cert`, addr)
			c.TLSCert, c.TLSKey = "cert.pem", "key.pem"
			require.NoError(t, c.Validate(true), "with the pair it may leave loopback: %s", addr)
			c.TLSCert, c.TLSKey = "", ""
		}
	}
}

func TestParseEgressProxy(t *testing.T) {
	t.Parallel()
	u, err := config.ParseEgressProxy("http://proxy.internal:3128")
	require.NoError(t, err)
	require.Equal(t, "proxy.internal:3128", u.Host)
	u, err = config.ParseEgressProxy("")
	require.NoError(t, err)
	require.Nil(t, u, "none: webhooks go direct")
	for _, bad := range []string{"https://proxy:3128", "socks5://proxy:1080", "http://proxy", "proxy:3128", "http://proxy:3128/path", "http://:3128", "http://user:hunter2@proxy"} {
		_, err := config.ParseEgressProxy(bad)
		require.ErrorContains(t, err, "egress-proxy:", bad)
		require.NotContains(t, err.Error(), "hunter2")
	}
	c := config.Default()
	c.EgressProxy = "http://user:hunter2@proxy:3128"
	require.NoError(t, c.Validate(true))
	require.NotContains(t, c.LogValue().String(), "hunter2")
	c.EgressProxy = "squid:3128"
	require.ErrorContains(t, c.Validate(true), "egress-proxy:")
}
