// Package cli is Herald's command line (cobra). Every flag is declared once
// and has an environment twin, HERALD_ followed by the flag name in upper
// case with dashes as underscores (--allow-private-networks is
// HERALD_ALLOW_PRIVATE_NETWORKS); a flag given on the command line wins over
// its twin.
package cli

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/heraldhooks/herald/internal/app"
	"github.com/heraldhooks/herald/internal/config"
)

// IO is where commands read and write; tests pass buffers.
type IO struct {
	// In is read by commands that take "-" for standard input (os.Stdin
	// when nil).
	In  io.Reader
	Out io.Writer
	Err io.Writer
	// Getenv reads the environment twins (os.Getenv in production).
	Getenv func(string) string
}

// New builds the herald command tree.
func New(stdio IO) *cobra.Command {
	if stdio.Getenv == nil {
		stdio.Getenv = os.Getenv
	}
	if stdio.In == nil {
		stdio.In = os.Stdin
	}
	root := &cobra.Command{
		Use:           "herald",
		Short:         "Herald delivers your application's events as signed webhooks, at least once.",
		Version:       app.Version,
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			return applyEnvTwins(cmd.Flags(), stdio.Getenv)
		},
	}
	root.SetOut(stdio.Out)
	root.SetErr(stdio.Err)
	root.AddCommand(serveCmd(stdio), workerCmd(stdio), migrateCmd(stdio), secretsCmd(stdio))
	root.AddCommand(endpointsCmd(stdio), eventsCmd(stdio), deliveriesCmd(stdio), statsCmd(stdio), keysCmd(stdio), portalCmd(stdio), eventTypesCmd(stdio), consumersCmd(stdio))
	root.AddCommand(listenCmd(stdio), benchCmd(stdio), probeCmd(stdio))
	root.AddCommand(versionCmd(stdio), backupCmd(stdio))
	return root
}

// EnvName is the environment twin of a flag.
func EnvName(flag string) string {
	return "HERALD_" + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

// envAnnotation, set on a flag, names its environment twin when EnvName's
// would clash with another command's meaning of the same variable (listen's
// --addr is HERALD_LISTEN_ADDR, since HERALD_ADDR is where serve listens, and
// its --status HERALD_LISTEN_STATUS). Every other flag keeps EnvName's twin.
const envAnnotation = "herald_env"

// envNameOf is the environment twin of f.
func envNameOf(f *pflag.Flag) string {
	if names := f.Annotations[envAnnotation]; len(names) > 0 {
		return names[0]
	}
	return EnvName(f.Name)
}

// applyEnvTwins sets every flag not given on the command line from its
// environment twin, so the flag's own parser checks the value.
func applyEnvTwins(fs *pflag.FlagSet, getenv func(string) string) error {
	var err error
	fs.VisitAll(func(f *pflag.Flag) {
		if err != nil || f.Changed || f.Name == "help" {
			return
		}
		name := envNameOf(f)
		if v := getenv(name); v != "" {
			if serr := fs.Set(f.Name, v); serr != nil {
				err = fmt.Errorf("%s=%q: %w", name, v, serr)
			}
		}
	})
	return err
}

// nodeFlags declares the flags that serve and worker share.
func nodeFlags(fs *pflag.FlagSet, c *config.Config) {
	fs.StringVar(&c.DB, "db", c.DB, "database: sqlite://path (embedded, one node) or postgres://... (shared by many nodes)")
	fs.DurationVar(&c.DBWait, "db-wait", c.DBWait, "how long to wait at start for a PostgreSQL that is not accepting connections yet (starting, restarting), trying again with backoff; 0 tries once")
	fs.StringVar(&c.DBListenURL, "db-listen-url", c.DBListenURL, "direct postgres:// URL for the wake-ups (LISTEN) when --db goes through a transaction pooler (its URL says ?pooler=transaction); without it such a node polls (--poll-interval)")
	fs.BoolVar(&c.CompressPayloads, "compress-payloads", c.CompressPayloads, "store the payloads of the events this node ingests compressed (zstd, when that saves an eighth or more): about half the space and the write volume of JSON payloads; they are read back and sent byte for byte. --compress-payloads=false stores them as they come")
	fs.BoolVar(&c.AllowPrivateNetworks, "allow-private-networks", c.AllowPrivateNetworks, "allow deliveries to loopback, private, link-local and metadata addresses")
	fs.StringVar(&c.EgressProxy, "egress-proxy", c.EgressProxy, "HTTP CONNECT proxy every webhook goes through, as http://host:port (user:password@ for basic auth), so receivers see its fixed address; each destination is still checked against private addresses before the proxy is asked (default: direct)")
	fs.StringVar(&c.LogFormat, "log-format", c.LogFormat, "log format: text or json")
	fs.StringVar(&c.LogLevel, "log-level", c.LogLevel, "log level: debug, info, warn or error")
	fs.IntVar(&c.Concurrency, "concurrency", c.Concurrency, "attempts in flight at once on this node")
	fs.DurationVar(&c.PollInterval, "poll-interval", c.PollInterval, "how often an idle dispatcher looks for due retries")
	fs.IntVar(&c.MaxLeaseLosses, "max-lease-losses", c.MaxLeaseLosses, "how many times a delivery's lease may be lost (its node died or froze mid-attempt) before it goes dead with reason lease_lost instead of being claimed again; a replay starts the count afresh (1 to 1000)")
	fs.DurationVar(&c.LeaseMargin, "lease-margin", c.LeaseMargin, "how long past twice the endpoint timeout a claim holds a delivery: covers writing the outcome; a node that stops for longer loses its leases and another node redelivers (1s to 10m)")
	fs.DurationVar(&c.Retention, "retention", c.Retention, "how long history is kept once it ended: an event whose deliveries all ended (delivered, dead or cancelled) longer ago than this is deleted with its deliveries and attempts; 0 keeps everything")
	fs.DurationVar(&c.ShutdownTimeout, "shutdown-timeout", c.ShutdownTimeout, "how long a stop waits for attempts in flight")
	fs.DurationVar(&c.ReadTimeout, "read-timeout", c.ReadTimeout, "how long every HTTP listener (API and pages, /metrics, /debug/pprof/) waits for a whole request, body included, before it closes the connection; it must cover the largest batch on the slowest sender's link (1s to 1h)")
	fs.StringVar(&c.PprofAddr, "pprof-addr", c.PprofAddr, "address to serve Go's runtime profiles (/debug/pprof/) on, as host:port; a loopback address unless --tls-cert is given (default: none)")
	fs.StringVar(&c.TLSCert, "tls-cert", c.TLSCert, "PEM file of the TLS certificate (chain included) to serve HTTPS with HTTP/2 on every listener (serve's --addr, --metrics-addr, --pprof-addr); a renewed file is picked up within 5s, without a restart. Needs --tls-key")
	fs.StringVar(&c.TLSKey, "tls-key", c.TLSKey, "PEM file of the private key of --tls-cert")
	fs.StringVar(&c.SMTPURL, "smtp-url", c.SMTPURL, "mail server for notices to consumers (failing, disabled, dead; at most one per endpoint per hour): smtp://user:pass@host:587?from=herald@example.com (STARTTLS required; plain allowed to loopback or with &insecure=true) or smtps://user:pass@host:465 (TLS). Default: no mail")
	fs.StringVar(&c.SMTPFrom, "smtp-from", c.SMTPFrom, "sender of notices, as herald@example.com or \"Herald <herald@example.com>\" (overrides the --smtp-url's from)")
	encryptionKeyFlag(fs, &c.EncryptionKey)
}

// encryptionKeyFlag declares --encryption-key, which serve, worker, migrate
// and secrets reencrypt take.
func encryptionKeyFlag(fs *pflag.FlagSet, key *string) {
	fs.StringVar(key, "encryption-key", *key, "key ring that encrypts endpoint secrets: id:base64 of 32 bytes, the encrypting key first, then older ones (k2:…,k1:…; herald secrets keygen makes one). Default: on SQLite a key file beside the database, made on first start; PostgreSQL requires it")
}

func newLogger(c *config.Config, w io.Writer) *slog.Logger {
	level, _ := config.ParseLevel(c.LogLevel) // validated before use
	opts := &slog.HandlerOptions{Level: level}
	if c.LogFormat == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

func serveCmd(stdio IO) *cobra.Command {
	c := config.Default()
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the API and a dispatcher",
		Long: "Run the HTTP API and a dispatcher. With no --db, Herald keeps everything in\n" +
			"./herald.db (SQLite) and needs nothing else.\n\n" +
			"On the internet, give it TLS of its own (--tls-cert, --tls-key), or put it behind\n" +
			"a TLS-terminating proxy and say where browsers reach it (--public-url) and which\n" +
			"proxies' X-Forwarded-* headers to believe (--trusted-proxies).",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runNode(cmd.Context(), c, stdio, true)
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&c.Addr, "addr", c.Addr, "address the API listens on")
	fs.StringVar(&c.APIKey, "api-key", c.APIKey, "API key for /v1 calls (default: made on first start and printed once)")
	fs.IntVar(&c.MaxPayloadBytes, "max-payload-bytes", c.MaxPayloadBytes, "largest event payload accepted")
	fs.IntVar(&c.MaxEndpointsPerConsumer, "max-endpoints-per-consumer", c.MaxEndpointsPerConsumer, "endpoints a consumer may have for its own key or portal to create another; 0: no limit (operator keys create endpoints whatever the consumer has)")
	fs.StringVar(&c.ConsumerRateLimit, "consumer-rate-limit", c.ConsumerRateLimit, "API requests of each consumer key and each portal session, across all nodes, as N/s, N/m or N/h with a burst of twice the rate a second unless ,burst=B follows (600/m,burst=20); past it 429 rate_limited with Retry-After; off: no limit")
	fs.StringVar(&c.OperatorRateLimit, "operator-rate-limit", c.OperatorRateLimit, "API requests of each operator key, as --consumer-rate-limit takes them; off: no limit")
	fs.StringVar(&c.PublicURL, "public-url", c.PublicURL, "where people's browsers reach this Herald, as https://hooks.example.com (behind a proxy, the proxy's address): cookies are Secure when it is https, the pages' Origin checks compare with it, portal links and mailed links start with it. Default: the request's own scheme and host for pages and portal links, http:// and --addr for mails")
	fs.StringSliceVar(&c.TrustedProxies, "trusted-proxies", c.TrustedProxies, "proxies whose X-Forwarded-For, X-Forwarded-Proto and X-Forwarded-Host are believed, as CIDRs or addresses, comma separated (10.0.0.0/8,127.0.0.1); anyone else's are ignored. Default: none")
	fs.StringSliceVar(&c.PortalFrameAncestors, "portal-frame-ancestors", c.PortalFrameAncestors, "origins that may show /portal/ in a frame of their own pages, comma separated (https://app.example.com); the portal's cookies are then partitioned (CHIPS) inside such a frame. Default: no site may frame it")
	nodeFlags(fs, &c)
	return cmd
}

func workerCmd(stdio IO) *cobra.Command {
	c := config.Default()
	cmd := &cobra.Command{
		Use:   "worker",
		Short: "Run a dispatcher only, to scale out on a shared PostgreSQL",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runNode(cmd.Context(), c, stdio, false)
		},
	}
	cmd.Flags().StringVar(&c.MetricsAddr, "metrics-addr", c.MetricsAddr, "address to serve Prometheus /metrics on, as host:port; a loopback address unless --tls-cert is given (default: none)")
	nodeFlags(cmd.Flags(), &c)
	return cmd
}

func runNode(ctx context.Context, c config.Config, stdio IO, withAPI bool) error {
	if err := c.Validate(withAPI); err != nil {
		return fmt.Errorf("invalid configuration:\n%w", err)
	}
	logger := newLogger(&c, stdio.Err)
	a, err := app.New(ctx, c, app.Deps{Logger: logger, Out: stdio.Out, Getenv: stdio.Getenv}, withAPI)
	if err != nil {
		return err
	}
	defer a.Close()
	if withAPI {
		return a.Serve(ctx, nil)
	}
	return a.Work(ctx)
}

func migrateCmd(stdio IO) *cobra.Command {
	c := config.Default()
	cmd := &cobra.Command{
		Use:   "migrate",
		Short: "Apply the database migrations (serve and worker also do this at start)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := app.Migrate(cmd.Context(), c.DB, c.EncryptionKey, newLogger(&c, stdio.Err)); err != nil {
				return err
			}
			fmt.Fprintf(stdio.Out, "database %s is up to date\n", config.Redact(c.DB))
			return nil
		},
	}
	cmd.Flags().StringVar(&c.DB, "db", c.DB, "database: sqlite://path or postgres://...")
	encryptionKeyFlag(cmd.Flags(), &c.EncryptionKey)
	return cmd
}
