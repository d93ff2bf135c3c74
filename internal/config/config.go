// Package config holds Herald's run-time settings, their defaults, and
// Validate, which lists every problem at once so an operator fixes a bad
// start in one go. Secrets are redacted whenever the config is logged.
package config

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/heraldhooks/herald/internal/edge"
	"github.com/heraldhooks/herald/internal/keyring"
)

// Config is everything `herald serve` and `herald worker` need.
type Config struct {
	// Addr is where the API listens (serve only).
	Addr string
	// DB names the database: sqlite://path, a bare file path, or
	// postgres://... (postgresql:// too).
	DB string
	// APIKey, when set, is the key every /v1 call must present. When empty,
	// serve makes one on first start and keeps only its hash.
	APIKey string
	// AllowPrivateNetworks lets deliveries reach loopback, private,
	// link-local and metadata addresses. Off by default (SSRF).
	AllowPrivateNetworks bool
	// EgressProxy, when set, is the HTTP CONNECT proxy every webhook goes
	// through (http://host:port), so receivers see one fixed source
	// address. The SSRF rules still apply to each destination before the
	// proxy is asked (ParseEgressProxy).
	EgressProxy string
	// LogFormat is text or json; LogLevel debug, info, warn or error.
	LogFormat string
	LogLevel  string
	// Concurrency is how many attempts run at once on this node.
	Concurrency int
	// PollInterval is how often an idle dispatcher looks for due retries.
	PollInterval time.Duration
	// LeaseMargin is how long past twice the endpoint timeout a claim holds
	// a delivery: it covers writing the outcome. A node that stops for
	// longer (a freeze, a long pause) loses its leases, and another node
	// redelivers; a short margin makes that happen sooner, and makes a
	// slow outcome write lose its lease more often.
	LeaseMargin time.Duration
	// MaxLeaseLosses is how many times a delivery's lease may be lost (its
	// node died or froze mid-attempt) before the claim that finds it lost
	// again ends it dead with reason lease_lost (store.LeaseLossesEnd):
	// a payload that kills the nodes taking it is not taken for ever.
	MaxLeaseLosses int
	// MaxPayloadBytes bounds an event payload.
	MaxPayloadBytes int
	// MaxEndpointsPerConsumer is how many endpoints a consumer may have
	// for its own key or portal session to create another (0: no limit).
	// An operator key creates endpoints whatever their consumer has.
	MaxEndpointsPerConsumer int
	// ConsumerRateLimit is the request limit of each consumer key and each
	// portal session, OperatorRateLimit of each operator key, as
	// ParseRequestRate reads them ("50/s", "600/m,burst=20", "off").
	ConsumerRateLimit string
	OperatorRateLimit string
	// ShutdownTimeout bounds a graceful stop (in-flight attempts included).
	ShutdownTimeout time.Duration
	// ReadTimeout is how long every HTTP listener Herald serves (the API
	// and pages, a worker's /metrics, /debug/pprof/) waits for a whole
	// request, body included: a client that sends slower loses its
	// connection. It must cover the largest event batch on the slowest
	// link a sender uses. The listeners' other limits are fixed:
	// ReadHeaderTimeout, IdleTimeout, MaxHeaderBytes.
	ReadTimeout time.Duration
	// DBWait is how long serve and worker wait at start for a PostgreSQL
	// that is not accepting connections yet (starting, restarting, out of
	// connection slots), trying again with backoff and logging each try.
	// A node started beside its database, or restarted while the database
	// restarts, then comes up instead of exiting. 0 tries once.
	DBWait time.Duration
	// DBListenURL is a direct PostgreSQL URL for the wake-ups (LISTEN)
	// when DB goes through a transaction pooler (pooler=transaction).
	DBListenURL string
	// CompressPayloads has the events this node ingests stored with their
	// payloads compressed (zstd). Every node reads both; a node of a
	// release that could not refuses to start on a database migrated by
	// this one (a contracting migration).
	CompressPayloads bool
	// MetricsAddr, when set, is where `herald worker` serves /metrics
	// (serve always has /metrics on Addr). Empty: no metrics listener.
	MetricsAddr string
	// PprofAddr, when set, is where serve and worker serve Go's runtime
	// profiles (/debug/pprof/). Off by default: profiles show internals,
	// so bind it to loopback.
	PprofAddr string
	// EncryptionKey is the key ring that seals endpoint secrets at rest,
	// as keyring.Parse reads it: "k2:<base64>,k1:<base64>", the sealing
	// key first. Empty: on SQLite, the key file beside the database (made
	// on first start); on PostgreSQL, serve and worker refuse to start.
	EncryptionKey string
	// Retention is how long history is kept once it ended: an event whose
	// deliveries all ended (delivered, dead or cancelled) longer ago than
	// this is deleted with its deliveries and attempts, and dead deliveries
	// stay in the dead-letter queue until then. 0 keeps everything.
	Retention time.Duration
	// PortalFrameAncestors are the origins (scheme://host[:port], such as
	// https://app.example.com) that may show /portal/ in a frame of their
	// own pages. Empty: no site may frame the portal.
	PortalFrameAncestors []string
	// SMTPURL, when set, is the mail server notices go through
	// (ParseSMTP): a consumer with a notice address is mailed when
	// an endpoint of its is failing or disabled, or a delivery dies.
	// Empty: no mail is sent.
	SMTPURL string
	// SMTPFrom is the sender of notices; it overrides the URL's ?from=.
	SMTPFrom string
	// PublicURL is where people's browsers reach this Herald (such as
	// https://hooks.example.com): the links Herald mails (the
	// confirmation of a notice address) start with it. Empty:
	// http:// and Addr (PublicBaseURL), right only when browsers reach
	// Herald there. Links are never built from a request's Host header,
	// which whoever sets an address could forge to steal its token.
	PublicURL string
	// TLSCert and TLSKey, both or neither, are the files of the pair that
	// Addr (serve) and the metrics and pprof listeners serve HTTPS with,
	// HTTP/2 included; a renewed pair is picked up without a restart
	// (edge.Certificate). Without them those listeners speak plain HTTP,
	// and the metrics and pprof listeners stay on loopback.
	TLSCert, TLSKey string
	// TrustedProxies are the proxies (CIDRs, or addresses) whose
	// X-Forwarded-For, -Proto and -Host Herald believes (serve): the
	// client's address in logs and limits, and without PublicURL the
	// scheme and host browsers see. Anyone else's are ignored.
	TrustedProxies []string
}

// PublicBaseURL is where links Herald mails point: PublicURL without a
// trailing slash, or else http:// and Addr (an unspecified host, as in
// ":8080" or "0.0.0.0:8080", written as localhost).
func (c *Config) PublicBaseURL() string {
	if c.PublicURL != "" {
		return strings.TrimRight(c.PublicURL, "/")
	}
	host, port, err := net.SplitHostPort(c.Addr)
	if err != nil {
		return "http://" + c.Addr
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "localhost"
	}
	return "http://" + net.JoinHostPort(host, port)
}

// The limits of every HTTP listener Herald serves: the API and the pages
// on Addr, a worker's /metrics on MetricsAddr, the profiles on PprofAddr.
// They close the connections of clients that would hold a goroutine and
// a socket without end: one that sends its headers or its body slowly
// (slowloris), or keeps an idle connection open. Each timeout counts from
// the connection's opening, or on a kept-alive connection from the next
// request's first byte.
//
// There is no write timeout. Nothing Herald answers streams for long (the
// longest, a profile on PprofAddr, lasts the ?seconds= it is asked for),
// but net/http counts a write timeout from the end of the headers, the
// handler's own time included, and when it fires closes the connection
// without an answer: a page waiting on a slow database would look to the
// browser like a broken network. So a client that reads its answer slowly
// is not cut off; answers are bounded (lists are paged).
const (
	// ReadHeaderTimeout is how long a listener waits for a request's
	// headers: a browser or a load balancer sends them at once.
	ReadHeaderTimeout = 10 * time.Second
	// DefaultReadTimeout is ReadTimeout's default (--read-timeout): the
	// largest batch body the API takes (16 MiB) arrives in time at about
	// 280 KiB/s, an event of the default largest payload at 5 KiB/s.
	DefaultReadTimeout = 60 * time.Second
	// IdleTimeout is how long a kept-alive connection may wait for its
	// next request. It is above the 60 s idle timeout of common load
	// balancers (AWS's ALB), so the balancer closes an idle connection
	// first and never sends a request on one Herald is closing.
	IdleTimeout = 120 * time.Second
	// MaxHeaderBytes bounds a request's line and headers (net/http adds
	// 4 KiB of slack); past it a request answers 431. Herald's longest
	// header is an API key or a session cookie, far below it.
	MaxHeaderBytes = 64 << 10
)

// Default returns the configuration used when nothing is set.
func Default() Config {
	return Config{
		Addr:            "127.0.0.1:8080",
		DB:              "sqlite://herald.db",
		LogFormat:       "text",
		LogLevel:        "info",
		Concurrency:     512,
		PollInterval:    time.Second,
		LeaseMargin:     15 * time.Second,
		MaxLeaseLosses:  5, // herald.DefaultMaxLeaseLosses
		MaxPayloadBytes: 256 << 10,
		// CompressPayloads: every node that can start on a migrated
		// database reads them (pgstore 0033, sqlitestore 0027).
		CompressPayloads: true,
		// MaxEndpointsPerConsumer: enough for a customer's environments
		// and services, few enough that a consumer's test sends cannot be
		// aimed at many hosts.
		MaxEndpointsPerConsumer: 50,
		ConsumerRateLimit:       DefaultConsumerRateLimit,
		OperatorRateLimit:       DefaultOperatorRateLimit,
		ShutdownTimeout:         30 * time.Second,
		ReadTimeout:             DefaultReadTimeout,
		DBWait:                  time.Minute,
		Retention:               720 * time.Hour,
	}
}

// DBKind is the kind of database a DB string names.
type DBKind string

// The database kinds.
const (
	DBSQLite   DBKind = "sqlite"
	DBPostgres DBKind = "postgres"
)

// ParseDB splits a DB string into its kind and what the driver takes: a
// file path for SQLite, the URL itself for PostgreSQL.
func ParseDB(db string) (DBKind, string, error) {
	switch {
	case db == "":
		return "", "", errors.New("db: empty; give sqlite://path or postgres://...")
	case strings.HasPrefix(db, "postgres://"), strings.HasPrefix(db, "postgresql://"):
		return DBPostgres, db, nil
	case strings.HasPrefix(db, "sqlite://"):
		path := strings.TrimPrefix(db, "sqlite://")
		if path == "" {
			return "", "", errors.New("db: sqlite:// needs a file path, as in sqlite://data/herald.db")
		}
		return DBSQLite, path, nil
	case strings.Contains(db, "://"):
		return "", "", fmt.Errorf("db: unknown scheme in %q; give sqlite://path or postgres://...", Redact(db))
	default:
		return DBSQLite, db, nil
	}
}

// Validate lists every problem with c, joined into one error.
func (c *Config) Validate(needAddr bool) error {
	var errs []error
	if needAddr {
		if _, _, err := net.SplitHostPort(c.Addr); err != nil {
			errs = append(errs, fmt.Errorf("addr: %q is not host:port: %v", c.Addr, err))
		}
	}
	if _, _, err := ParseDB(c.DB); err != nil {
		errs = append(errs, err)
	}
	if c.APIKey != "" && len(c.APIKey) < 16 {
		errs = append(errs, errors.New("api-key: must be at least 16 characters"))
	}
	if c.LogFormat != "text" && c.LogFormat != "json" {
		errs = append(errs, fmt.Errorf("log-format: %q is not text or json", c.LogFormat))
	}
	if _, err := ParseLevel(c.LogLevel); err != nil {
		errs = append(errs, err)
	}
	if c.Concurrency < 1 || c.Concurrency > 10000 {
		errs = append(errs, fmt.Errorf("concurrency: %d is not between 1 and 10000", c.Concurrency))
	}
	if c.PollInterval < 10*time.Millisecond || c.PollInterval > time.Minute {
		errs = append(errs, fmt.Errorf("poll-interval: %s is not between 10ms and 1m", c.PollInterval))
	}
	if c.LeaseMargin < time.Second || c.LeaseMargin > 10*time.Minute {
		errs = append(errs, fmt.Errorf("lease-margin: %s is not between 1s and 10m", c.LeaseMargin))
	}
	if c.MaxLeaseLosses < 1 || c.MaxLeaseLosses > 1000 {
		errs = append(errs, fmt.Errorf("max-lease-losses: %d is not between 1 and 1000", c.MaxLeaseLosses))
	}
	if c.MaxEndpointsPerConsumer < 0 || c.MaxEndpointsPerConsumer > 1_000_000 {
		errs = append(errs, fmt.Errorf("max-endpoints-per-consumer: %d is not between 0 (no limit) and 1000000", c.MaxEndpointsPerConsumer))
	}
	if _, err := ParseRequestRate(c.ConsumerRateLimit); err != nil {
		errs = append(errs, fmt.Errorf("consumer-rate-limit: %w", err))
	}
	if _, err := ParseRequestRate(c.OperatorRateLimit); err != nil {
		errs = append(errs, fmt.Errorf("operator-rate-limit: %w", err))
	}
	if c.MaxPayloadBytes < 1 || c.MaxPayloadBytes > 10<<20 {
		errs = append(errs, fmt.Errorf("max-payload-bytes: %d is not between 1 and 10485760", c.MaxPayloadBytes))
	}
	for _, side := range []struct{ flag, addr string }{{"pprof-addr", c.PprofAddr}, {"metrics-addr", c.MetricsAddr}} {
		if side.addr == "" {
			continue
		}
		if _, _, err := net.SplitHostPort(side.addr); err != nil {
			errs = append(errs, fmt.Errorf("%s: %q is not host:port: %v", side.flag, side.addr, err))
		} else if c.TLSCert == "" && !edge.IsLoopback(side.addr) {
			// Profiles show the process's insides and metrics its
			// traffic: in plain HTTP they stay on this machine.
			errs = append(errs, fmt.Errorf("%s: %q is not a loopback address; without --tls-cert and --tls-key it must be one (such as 127.0.0.1:%s), or give the pair to serve it over HTTPS", side.flag, side.addr, portOf(side.addr)))
		}
	}
	if (c.TLSCert == "") != (c.TLSKey == "") {
		errs = append(errs, errors.New("tls-cert and tls-key: give both (the certificate, chain included, and its private key, PEM files) or neither"))
	}
	if _, err := edge.ParseProxies(c.TrustedProxies); err != nil {
		errs = append(errs, err)
	}
	if _, err := ParseEgressProxy(c.EgressProxy); err != nil {
		errs = append(errs, err)
	}
	if c.ShutdownTimeout < 0 {
		errs = append(errs, fmt.Errorf("shutdown-timeout: %s is negative", c.ShutdownTimeout))
	}
	if c.ReadTimeout < time.Second || c.ReadTimeout > time.Hour {
		errs = append(errs, fmt.Errorf("read-timeout: %s is not between 1s and 1h", c.ReadTimeout))
	}
	if c.DBWait < 0 {
		errs = append(errs, fmt.Errorf("db-wait: %s is negative (0 tries once)", c.DBWait))
	}
	if c.Retention < 0 {
		errs = append(errs, fmt.Errorf("retention: %s is negative (0 keeps everything)", c.Retention))
	}
	for _, o := range c.PortalFrameAncestors {
		if err := checkOrigin(o); err != nil {
			errs = append(errs, fmt.Errorf("portal-frame-ancestors: %w", err))
		}
	}
	if c.EncryptionKey != "" {
		if _, err := keyring.Parse(c.EncryptionKey); err != nil {
			errs = append(errs, fmt.Errorf("encryption-key: %w", err))
		}
	}
	if c.PublicURL != "" {
		if err := checkPublicURL(c.PublicURL); err != nil {
			errs = append(errs, err)
		}
	}
	if c.SMTPURL != "" {
		if _, err := ParseSMTP(c.SMTPURL, c.SMTPFrom); err != nil {
			errs = append(errs, err)
		}
	} else if c.SMTPFrom != "" {
		errs = append(errs, errors.New("smtp-from: needs --smtp-url (HERALD_SMTP_URL): without it no mail is sent"))
	}
	return errors.Join(errs...)
}

// checkPublicURL accepts a base URL for links: http or https, a host, an
// optional port and path, no user, query or fragment.
func checkPublicURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil ||
		u.RawQuery != "" || u.Fragment != "" || u.Opaque != "" || strings.ContainsAny(raw, " \t\r\n") {
		return fmt.Errorf("public-url: %q is not a base URL such as https://hooks.example.com (an absolute http or https URL, without user, query or fragment)", raw)
	}
	return nil
}

// portOf is addr's port ("" when it has none).
func portOf(addr string) string {
	_, port, _ := net.SplitHostPort(addr)
	return port
}

// checkOrigin accepts an origin a frame-ancestors list may name: http or
// https, a host, an optional port, and nothing else (no path, query,
// wildcard, or the characters that would end a CSP directive).
func checkOrigin(o string) error {
	if strings.ContainsAny(o, " ;,'\"*") {
		return fmt.Errorf("%q is not an origin such as https://app.example.com", o)
	}
	u, err := url.Parse(o)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil ||
		(u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || u.Opaque != "" {
		return fmt.Errorf("%q is not an origin such as https://app.example.com", o)
	}
	return nil
}

// ParseLevel reads a log level name.
func ParseLevel(s string) (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(s)); err != nil {
		return 0, fmt.Errorf("log-level: %q is not debug, info, warn or error", s)
	}
	return l, nil
}

// Redact hides the secrets of a database URL, for logs and errors: the
// password of its user (which may hold an @), a query holding a password
// or sslpassword (all of it: a value with an unescaped & would leave its
// tail as a parameter of its own), and, in PostgreSQL's key=value form,
// the values of password and sslpassword. A URL that does not parse, or
// that still holds an @ once its user's password is hidden (a password
// holding an unescaped / or ?, read as the host and path), is hidden
// whole but for its scheme.
func Redact(db string) string {
	scheme, _, ok := strings.Cut(db, "://")
	if !ok || !urlScheme.MatchString(scheme) {
		return redactKeyValues.ReplaceAllString(db, "${1}=xxxxx")
	}
	u, err := url.Parse(db)
	if err != nil {
		return scheme + "://xxxxx"
	}
	if _, has := u.User.Password(); has {
		u.User = url.UserPassword(u.User.Username(), "xxxxx")
	}
	if u.RawQuery != "" {
		if q, err := url.ParseQuery(u.RawQuery); err != nil || hasSecretParam(q) {
			u.RawQuery = "xxxxx"
		}
	}
	out := u.String()
	if strings.Contains(strings.TrimPrefix(out, scheme+"://"+u.User.String()+"@"), "@") {
		return scheme + "://xxxxx"
	}
	return out
}

// urlScheme is what may come before :// in a URL (RFC 3986).
var urlScheme = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*$`)

// hasSecretParam says whether a connection URL's query names a secret.
func hasSecretParam(q url.Values) bool {
	for k := range q {
		switch strings.ToLower(k) {
		case "password", "sslpassword":
			return true
		}
	}
	return false
}

// redactKeyValues finds the secrets of PostgreSQL's key=value connection
// strings: password or sslpassword, then a quoted value (with \' and \\
// escapes) or one up to the next unescaped space.
var redactKeyValues = regexp.MustCompile(`(?i)\b(password|sslpassword)\s*=\s*('(?:[^'\\]|\\.)*'|(?:[^\s\\]|\\.)*)`)

// RedactKeyRing shows a key ring by its key ids only ("k2,k1 (keys
// hidden)"), for logs; "" when none is given.
func RedactKeyRing(ring string) string {
	if ring == "" {
		return ""
	}
	r, err := keyring.Parse(ring)
	if err != nil {
		return "(invalid, hidden)"
	}
	return strings.Join(r.IDs(), ",") + " (keys hidden)"
}

// LogValue lets slog print a Config without its secrets.
func (c Config) LogValue() slog.Value {
	key := ""
	if c.APIKey != "" {
		key = "(set)"
	}
	return slog.GroupValue(
		slog.String("addr", c.Addr),
		slog.String("db", Redact(c.DB)),
		slog.String("api_key", key),
		slog.String("encryption_key", RedactKeyRing(c.EncryptionKey)),
		slog.Bool("allow_private_networks", c.AllowPrivateNetworks),
		slog.String("egress_proxy", RedactEgressProxy(c.EgressProxy)),
		slog.Int("concurrency", c.Concurrency),
		slog.Duration("poll_interval", c.PollInterval),
		slog.Duration("lease_margin", c.LeaseMargin),
		slog.Int("max_lease_losses", c.MaxLeaseLosses),
		slog.Duration("read_timeout", c.ReadTimeout),
		slog.Int("max_endpoints_per_consumer", c.MaxEndpointsPerConsumer),
		slog.String("consumer_rate_limit", c.ConsumerRateLimit),
		slog.String("operator_rate_limit", c.OperatorRateLimit),
		slog.Duration("db_wait", c.DBWait),
		slog.Duration("retention", c.Retention),
		slog.Any("portal_frame_ancestors", c.PortalFrameAncestors),
		slog.String("metrics_addr", c.MetricsAddr),
		slog.String("pprof_addr", c.PprofAddr),
		slog.String("smtp_url", RedactSMTP(c.SMTPURL)),
		slog.String("smtp_from", c.SMTPFrom),
		slog.String("public_url", c.PublicURL),
		slog.String("tls_cert", c.TLSCert),
		slog.String("tls_key", c.TLSKey),
		slog.Any("trusted_proxies", c.TrustedProxies),
	)
}

// ParseEgressProxy reads --egress-proxy: "" for none, else http://host:port
// with an optional user:password for the proxy's basic authentication.
// The proxy is spoken to in plain HTTP (the CONNECT); what goes through its
// tunnel is the webhook as it would go direct, TLS to the receiver
// included. Errors show the value with its password hidden.
func ParseEgressProxy(raw string) (*url.URL, error) {
	if raw == "" {
		return nil, nil
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, errors.New("egress-proxy: not a URL; want http://host:port")
	}
	switch {
	case u.Scheme != "http":
		return nil, fmt.Errorf("egress-proxy: %q: the scheme must be http (an HTTP CONNECT proxy), as in http://proxy:3128", u.Redacted())
	case u.Hostname() == "" || u.Port() == "":
		return nil, fmt.Errorf("egress-proxy: %q: want http://host:port", u.Redacted())
	case u.Path != "" && u.Path != "/" || u.RawQuery != "" || u.Fragment != "":
		return nil, fmt.Errorf("egress-proxy: %q: want http://host:port, with no path or query", u.Redacted())
	}
	return u, nil
}

// RedactEgressProxy shows --egress-proxy with its password hidden.
func RedactEgressProxy(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(invalid, hidden)"
	}
	return u.Redacted()
}
