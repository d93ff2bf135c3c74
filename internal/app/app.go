// Package app is the composition root: it opens the store named by the
// config, migrates it, settles the API key, wires the API, the sender and the
// dispatcher, runs them, and drains them on shutdown. It is the only package
// (tests aside) that knows the concrete storage backends.
package app

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"strings"
	"time"

	"github.com/heraldhooks/herald"
	"github.com/heraldhooks/herald/internal/api"
	"github.com/heraldhooks/herald/internal/clock"
	"github.com/heraldhooks/herald/internal/config"
	"github.com/heraldhooks/herald/internal/dispatch"
	"github.com/heraldhooks/herald/internal/edge"
	"github.com/heraldhooks/herald/internal/keyring"
	"github.com/heraldhooks/herald/internal/logkey"
	"github.com/heraldhooks/herald/internal/maintenance"
	"github.com/heraldhooks/herald/internal/metrics"
	"github.com/heraldhooks/herald/internal/notice"
	"github.com/heraldhooks/herald/internal/ratelimit"
	"github.com/heraldhooks/herald/internal/sender"
	"github.com/heraldhooks/herald/internal/store"
	"github.com/heraldhooks/herald/internal/store/pgstore"
	"github.com/heraldhooks/herald/internal/store/sqlitestore"
	"github.com/heraldhooks/herald/internal/trace"
	"github.com/heraldhooks/herald/internal/web"
	"github.com/heraldhooks/herald/internal/wire"
)

// Version is the release this binary reports (User-Agent, logs).
const Version = "0.1.0"

// apiKeySetting is where the hash of a generated API key is kept.
const apiKeySetting = "api_key_sha256"

// Deps are the parts the environment provides; zero values give the real ones.
type Deps struct {
	Clock  clock.Clock
	Logger *slog.Logger
	// Out receives what is printed for the operator (the new API key).
	Out io.Writer
	// Getenv reads the OTEL_* variables that configure tracing
	// (os.Getenv by default; tests give their own).
	Getenv func(string) string
}

// App is a wired Herald node.
type App struct {
	Config config.Config
	Store  store.Store
	// Handler is everything serve answers on Addr: GET /metrics, and the
	// API for every other path. Nil for a worker.
	Handler    http.Handler
	Dispatcher *dispatch.Dispatcher
	// Purger deletes the history past Config.Retention (none when it is
	// 0, keep everything) and the activity series' minutes older than a
	// day and an hour; serve and worker run it beside the dispatcher.
	Purger *maintenance.Purger
	// Sampler samples the queue's depth into the database once a minute
	// for the dashboard's charts (one sample a minute whatever the number
	// of nodes); serve and worker run it beside the dispatcher.
	Sampler *maintenance.Sampler
	// Metrics counts what this node does and reads the queue gauges.
	Metrics *metrics.Metrics
	// KeyRing seals the endpoint secrets in Store (see KeyRing).
	KeyRing *keyring.Ring
	// Mailer mails notices to consumers (--smtp-url); serve and worker
	// run it beside the dispatcher. Nil without --smtp-url.
	Mailer *notice.Mailer
	// Trace records the spans of API calls, ingests and attempts when the
	// OTEL_* variables name a collector; off (a no-op) otherwise. Serve
	// and Work flush it once drained.
	Trace *trace.Tracing
	log   *slog.Logger
	// readHeaderTimeout, when not 0, replaces config.ReadHeaderTimeout on
	// every listener: tests shorten it to see a slow client cut off.
	readHeaderTimeout time.Duration
	// cert is the TLS pair every listener serves (--tls-cert), nil for
	// plain HTTP.
	cert *edge.Certificate
}

// OpenStore opens (without migrating) the store that db names. opts give
// the key ring that seals endpoint secrets (store.WithSecrets).
func OpenStore(ctx context.Context, db string, logger *slog.Logger, opts ...store.OpenOption) (store.Store, error) {
	kind, target, err := config.ParseDB(db)
	if err != nil {
		return nil, err
	}
	opts = append([]store.OpenOption{store.WithRelease(Version)}, opts...)
	switch kind {
	case config.DBPostgres:
		return pgstore.Open(ctx, target, logger, opts...)
	default:
		return sqlitestore.Open(ctx, target, logger, opts...)
	}
}

// OpenStore opens another store on the node's database with its key ring,
// as another node would.
func (a *App) OpenStore(ctx context.Context) (store.Store, error) {
	return OpenStore(ctx, a.Config.DB, a.log, secretsOptions(a.KeyRing)...)
}

// Migrate opens the store named by db, applies its migrations, encrypts
// the endpoint secrets still plain when it has a key (encryptionKey, or on
// SQLite the key file, made if need be; see KeyRing), and closes it. On
// PostgreSQL without a key it only migrates.
func Migrate(ctx context.Context, db, encryptionKey string, logger *slog.Logger) error {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	ring, err := KeyRing(ctx, db, encryptionKey, false, logger)
	if err != nil {
		return err
	}
	st, err := OpenStore(ctx, db, logger, secretsOptions(ring)...)
	if err != nil {
		return err
	}
	defer st.Close()
	if err := st.Migrate(ctx); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	return prepareSecrets(ctx, st, ring, logger)
}

// New validates cfg, settles the key ring (KeyRing: on PostgreSQL without
// --encryption-key it refuses), opens and migrates the store, encrypts the
// endpoint secrets still plain, settles the API key and wires the node.
// withAPI is false for `herald worker`, which only dispatches.
func New(ctx context.Context, cfg config.Config, deps Deps, withAPI bool) (*App, error) {
	if err := cfg.Validate(withAPI); err != nil {
		return nil, fmt.Errorf("invalid configuration:\n%w", err)
	}
	if deps.Clock == nil {
		deps.Clock = clock.Real{}
	}
	if deps.Logger == nil {
		deps.Logger = slog.New(slog.DiscardHandler)
	}
	if deps.Out == nil {
		deps.Out = io.Discard
	}
	if deps.Getenv == nil {
		deps.Getenv = os.Getenv
	}
	tracing, err := trace.New(trace.Config{Getenv: deps.Getenv, ServiceVersion: Version})
	if err != nil {
		return nil, fmt.Errorf("invalid configuration:\n%w", err)
	}
	var cert *edge.Certificate
	if cfg.TLSCert != "" {
		var err error
		cert, err = edge.LoadCertificate(edge.CertificateConfig{CertFile: cfg.TLSCert, KeyFile: cfg.TLSKey, Clock: deps.Clock, Logger: deps.Logger})
		if err != nil {
			return nil, err
		}
	}
	ring, err := KeyRing(ctx, cfg.DB, cfg.EncryptionKey, true, deps.Logger)
	if err != nil {
		return nil, err
	}
	opts := append(secretsOptions(ring), store.WithConnectWait(cfg.DBWait))
	if cfg.DBListenURL != "" {
		opts = append(opts, store.WithListenURL(cfg.DBListenURL))
	}
	if cfg.CompressPayloads {
		opts = append(opts, store.WithCompressedPayloads())
	}
	st, err := OpenStore(ctx, cfg.DB, deps.Logger, opts...)
	if err != nil {
		return nil, fmt.Errorf("open database %s: %w", config.Redact(cfg.DB), err)
	}
	a := &App{Config: cfg, Store: st, KeyRing: ring, Trace: tracing, log: deps.Logger, cert: cert}
	if err := st.Migrate(ctx); err != nil {
		st.Close()
		return nil, fmt.Errorf("migrate %s: %w", config.Redact(cfg.DB), err)
	}
	if err := prepareSecrets(ctx, st, ring, deps.Logger); err != nil {
		st.Close()
		return nil, err
	}

	a.Metrics = metrics.New(st, metrics.Options{Clock: deps.Clock, Logger: deps.Logger})
	var notify func(herald.Notification)
	var confirmations api.ConfirmationMailer
	if cfg.SMTPURL != "" {
		smtpCfg, err := config.ParseSMTP(cfg.SMTPURL, cfg.SMTPFrom)
		if err != nil { // Validate has refused it already
			st.Close()
			return nil, err
		}
		smtp := notice.NewSMTP(smtpCfg)
		a.Mailer = notice.New(notice.Config{
			Store:   st,
			Sender:  smtp,
			Clock:   deps.Clock,
			Logger:  deps.Logger,
			Counted: a.Metrics.NoticeCounted,
			// Confirmation mails go through the same queue, with retries;
			// the mailer counts them.
			Confirmer: notice.NewConfirmer(smtp, cfg.PublicBaseURL(), nil),
		})
		notify = a.Mailer.Notify
		confirmations = a.Mailer
		if withAPI && cfg.PublicURL == "" {
			deps.Logger.Warn("no --public-url: the confirmation links mailed to notice addresses point at "+
				cfg.PublicBaseURL()+"; set --public-url (HERALD_PUBLIC_URL) to where browsers reach Herald",
				"public_url", cfg.PublicBaseURL())
		}
	}

	egressProxy, err := config.ParseEgressProxy(cfg.EgressProxy) // Validate has checked it
	if err != nil {
		st.Close()
		return nil, err
	}
	egressShown := "" // the proxy's address, for the dashboard; "" when direct
	if egressProxy != nil {
		egressShown = egressProxy.Host
	}
	if withAPI {
		hash, err := a.settleAPIKey(ctx, deps.Out)
		if err != nil {
			st.Close()
			return nil, err
		}
		apiHandler := api.New(api.Config{
			Store:                   a.Metrics.CountIngest(st),
			Clock:                   deps.Clock,
			Logger:                  deps.Logger,
			APIKeyHash:              hash,
			AllowPrivateNetworks:    cfg.AllowPrivateNetworks,
			MaxPayloadBytes:         cfg.MaxPayloadBytes,
			MaxEndpointsPerConsumer: cfg.MaxEndpointsPerConsumer,
			Notify:                  notify,
			Confirmations:           confirmations,
			ConsumerRateLimit:       requestRate(cfg.ConsumerRateLimit),
			OperatorRateLimit:       requestRate(cfg.OperatorRateLimit),
			RequestLimitFailedOpen:  a.Metrics.RequestLimitFailedOpen,
			Trace:                   tracing,
		})
		assets := web.NewAssets()
		portal := web.NewPortal(web.PortalConfig{Store: st, API: apiHandler, Assets: assets, Clock: deps.Clock,
			Logger: deps.Logger, FrameAncestors: cfg.PortalFrameAncestors})
		ui := web.NewDashboard(web.DashboardConfig{API: apiHandler, Sessions: st, Assets: assets, Clock: deps.Clock, Logger: deps.Logger,
			EgressProxy: egressShown})
		proxies, err := edge.ParseProxies(cfg.TrustedProxies) // Validate has checked them
		if err == nil {
			a.Handler, err = edge.Handler(edge.Config{PublicURL: cfg.PublicURL, TrustedProxies: proxies, Clock: deps.Clock, Logger: deps.Logger},
				withPages(assets, ui, portal, withMetrics(apiHandler, a.Metrics.Handler())))
		}
		if err != nil {
			st.Close()
			return nil, err
		}
	}
	a.Dispatcher = dispatch.New(dispatch.Config{
		Store: st,
		Sender: sender.New(sender.Config{
			AllowPrivateNetworks: cfg.AllowPrivateNetworks,
			EgressProxy:          egressProxy,
			UserAgent:            "Herald/" + Version,
			// A node has at most Concurrency requests out at once; keeping
			// as many open to one host spares a busy host (many endpoints
			// behind one API host) a new connection per attempt.
			MaxIdleConnsPerHost: cfg.Concurrency,
		}),
		Clock:          deps.Clock,
		Logger:         deps.Logger,
		Concurrency:    cfg.Concurrency,
		PollInterval:   cfg.PollInterval,
		LeaseMargin:    cfg.LeaseMargin,
		MaxLeaseLosses: cfg.MaxLeaseLosses,
		DrainTimeout:   cfg.ShutdownTimeout,
		Linger:         dispatchLinger,
		Hooks: dispatch.Hooks{
			InFlight:       a.Metrics.AttemptsInFlight,
			Redelivered:    a.Metrics.Redelivered,
			LeaseTooShort:  a.Metrics.AttemptSkippedLeaseExpired,
			Frozen:         a.Metrics.AttemptFrozen,
			AttemptDone:    a.Metrics.AttemptDone,
			OutcomeWritten: a.Metrics.OutcomeWritten,
			Notified:       notify,
			DeadAtClaim:    a.Metrics.DeliveryDead,
		},
		Trace: tracing,
	})
	// An ingest leases to this node's dispatcher what a claim would take
	// at once, and hands it over (store.Taker): no claim, and no wake-up
	// of every node, for it.
	if leaser, ok := st.(store.Leaser); ok {
		leaser.SetTaker(a.Dispatcher)
	}
	// With a retention of 0 the purger keeps every event and purges only
	// the activity series' old minutes.
	a.Purger = maintenance.NewPurger(maintenance.PurgerConfig{
		Store:     st,
		Clock:     deps.Clock,
		Logger:    deps.Logger,
		Retention: cfg.Retention,
		Limit:     purgeLimit(cfg.DB),
		Purged:    a.Metrics.Purged,
	})
	a.Sampler = maintenance.NewSampler(maintenance.SamplerConfig{Store: st, Clock: deps.Clock, Logger: deps.Logger})
	return a, nil
}

// purgeLimit is how many events one purge batch looks at. SQLite has one
// writer, which ingest and outcomes wait for while a batch holds it, so
// its batches are smaller; PostgreSQL's lock only the rows they delete.
func purgeLimit(db string) int {
	if kind, _, _ := config.ParseDB(db); kind == config.DBSQLite {
		return sqlitePurgeLimit
	}
	return store.DefaultPurgeLimit
}

// sqlitePurgeLimit is the batch of a purge on SQLite (see purgeLimit).
const sqlitePurgeLimit = 100

// dispatchLinger is the dispatchers' batching pause (dispatch.Config.Linger):
// at 300 events/s on PostgreSQL a claim and an outcome write per delivery
// cost the database more CPU than everything else together; 5 ms lets a
// claim carry the deliveries of a few events at such rates, for 5 ms more
// latency; an event that wakes a node quiet for longer goes at once, and
// under load the pause is gone.
const dispatchLinger = 5 * time.Millisecond

// runPurger, runSampler and runMailer run the purger, the depth sampler
// and the mailer, if there is one, until ctx ends; the channel each
// returns is closed once it has stopped.
func (a *App) runPurger(ctx context.Context) <-chan struct{} {
	if a.Purger == nil {
		return runBackground(ctx, nil)
	}
	return runBackground(ctx, a.Purger.Run)
}

func (a *App) runSampler(ctx context.Context) <-chan struct{} {
	if a.Sampler == nil {
		return runBackground(ctx, nil)
	}
	return runBackground(ctx, a.Sampler.Run)
}

func (a *App) runMailer(ctx context.Context) <-chan struct{} {
	if a.Mailer == nil {
		return runBackground(ctx, nil)
	}
	return runBackground(ctx, a.Mailer.Run)
}

// runBackground runs run (which logs its own failures) until ctx ends, and
// closes the channel it returns once run has returned; a nil run is done
// at once.
func runBackground(ctx context.Context, run func(context.Context) error) <-chan struct{} {
	done := make(chan struct{})
	if run == nil {
		close(done)
		return done
	}
	go func() {
		defer close(done)
		_ = run(ctx)
	}()
	return done
}

// withMetrics answers GET /metrics with the metrics and passes every other
// request to the API, which keeps its own 404 and 405 answers. /metrics
// needs no API key, like /healthz: it shows counts, never data, and a
// Prometheus server scrapes it without credentials.
func withMetrics(apiHandler, metricsHandler http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/metrics" {
			apiHandler.ServeHTTP(w, r)
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusMethodNotAllowed)
			fmt.Fprintf(w, `{"error":{"code":"method_not_allowed","message":"%s is not allowed on /metrics; allowed: GET, HEAD"}}`+"\n", r.Method)
			return
		}
		metricsHandler.ServeHTTP(w, r)
	})
}

// withPages serves the pages' static files (/ui/static/, shared by /ui/
// and /portal/), the operator dashboard (/ui, signed in with an operator
// key), /portal and everything under it with the portal (no API key: a
// portal session cookie), and the rest with next.
func withPages(assets, ui, portal, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, web.StaticPrefix) {
			assets.ServeHTTP(w, r)
			return
		}
		if web.IsDashboardPath(r.URL.Path) {
			ui.ServeHTTP(w, r)
			return
		}
		if web.IsPortalPath(r.URL.Path) {
			portal.ServeHTTP(w, r)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// settleAPIKey returns the hash of the key /v1 calls must present: the
// configured key, or the one made on first start (printed once, then only
// its hash is kept).
func (a *App) settleAPIKey(ctx context.Context, out io.Writer) ([32]byte, error) {
	if a.Config.APIKey != "" {
		return sha256.Sum256([]byte(a.Config.APIKey)), nil
	}
	var raw [24]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return [32]byte{}, fmt.Errorf("make API key: %w", err)
	}
	key := "hk_" + base64.RawURLEncoding.EncodeToString(raw[:])
	mine := sha256.Sum256([]byte(key))
	stored, err := a.Store.SettingPutIfAbsent(ctx, &store.SettingPutIfAbsentParams{Key: apiKeySetting, Value: hex.EncodeToString(mine[:])})
	if err != nil {
		return [32]byte{}, fmt.Errorf("store API key hash: %w", err)
	}
	var hash [32]byte
	b, err := hex.DecodeString(stored)
	if err != nil || len(b) != len(hash) {
		return [32]byte{}, fmt.Errorf("stored API key hash is corrupt (setting %s)", apiKeySetting)
	}
	copy(hash[:], b)
	if hash == mine {
		fmt.Fprintf(out, "Herald made an API key on first start. It is shown only now; keep it:\n\n    %s\n\nUse it as: Authorization: Bearer %s\n\n", key, key)
	} else {
		a.log.Info("using the API key made on first start (set --api-key or HERALD_API_KEY to choose one)")
	}
	return hash, nil
}

// Close releases the store, and stops tracing (flushing what is left).
func (a *App) Close() error {
	a.flushTraces()
	return a.Store.Close()
}

// flushTraces exports the spans still buffered and stops tracing, within
// a few seconds: a collector that is down does not hold a node's exit.
func (a *App) flushTraces() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := a.Trace.Shutdown(ctx); err != nil {
		a.log.Warn("flush traces", logkey.Error, err)
	}
}

// Serve runs the API on ln (or on Config.Addr when ln is nil), the
// dispatcher, the purger and the depth sampler until ctx ends, then stops
// taking requests, drains the dispatcher, stops the purger and the
// sampler, and returns.
func (a *App) Serve(ctx context.Context, ln net.Listener) error {
	if ln == nil {
		var err error
		ln, err = net.Listen("tcp", a.Config.Addr)
		if err != nil {
			return fmt.Errorf("listen on %s: %w", a.Config.Addr, err)
		}
	}
	srv := a.newServer(a.Handler)
	side, err := a.startSides(false)
	defer a.stopSide(side)
	if err != nil {
		return err
	}
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	dispatched := make(chan error, 1)
	go func() { dispatched <- a.Dispatcher.Run(runCtx) }()
	purged := a.runPurger(runCtx)
	sampled := a.runSampler(runCtx)
	mailed := a.runMailer(runCtx)
	served := make(chan error, 1)
	go func() { served <- a.serveOn(srv, ln) }()
	if a.cert == nil && a.Config.PublicURL == "" && !edge.IsLoopback(ln.Addr().String()) {
		a.log.Warn("serving plain HTTP beyond loopback without --public-url: browsers' sessions travel unencrypted, "+
			"and behind a TLS-terminating proxy the pages refuse every form; give --tls-cert and --tls-key, "+
			"or put Herald behind a proxy and set --public-url (and --trusted-proxies)", logkey.Addr, ln.Addr().String())
	}
	a.log.Info("herald serving", logkey.Addr, ln.Addr().String(), "config", a.Config)

	select {
	case <-ctx.Done():
	case err = <-served:
		err = fmt.Errorf("serve API: %w", err)
	}
	shutCtx, cancel := context.WithTimeout(context.Background(), a.Config.ShutdownTimeout+5*time.Second)
	defer cancel()
	if serr := srv.Shutdown(shutCtx); serr != nil && !errors.Is(serr, http.ErrServerClosed) {
		a.log.Warn("stop API", logkey.Error, serr)
	}
	stop() // the API may have failed on its own: stop the dispatcher too
	if derr := <-dispatched; derr != nil {
		err = errors.Join(err, derr)
	}
	<-purged
	<-sampled
	<-mailed
	a.flushTraces()
	a.log.Info("herald stopped")
	return err
}

// Work runs only the dispatcher, the purger and the depth sampler until
// ctx ends (herald worker), and, when Config.MetricsAddr is set, serves GET /metrics there
// until the dispatcher has drained.
func (a *App) Work(ctx context.Context) error {
	side, err := a.startSides(true)
	defer a.stopSide(side)
	if err != nil {
		return err
	}
	a.log.Info("herald worker running", "config", a.Config)
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	purged := a.runPurger(runCtx)
	sampled := a.runSampler(runCtx)
	mailed := a.runMailer(runCtx)
	err = a.Dispatcher.Run(runCtx)
	stop()
	<-purged
	<-sampled
	<-mailed
	a.flushTraces()
	a.log.Info("herald worker stopped")
	return err
}

// serveOn serves srv on ln until it is shut down: HTTPS with HTTP/2 when
// the node has a TLS pair, plain HTTP otherwise.
func (a *App) serveOn(srv *http.Server, ln net.Listener) error {
	if a.cert == nil {
		return srv.Serve(ln)
	}
	return srv.ServeTLS(ln, "", "") // srv.TLSConfig serves the pair (newServer)
}

// newServer is an HTTP server of handler with the limits every listener
// of Herald's has (config.ReadHeaderTimeout and the others beside it,
// Config.ReadTimeout), logging its errors as warnings, with the node's TLS
// pair when it has one. It sets no write timeout: see
// config.ReadHeaderTimeout's block for why.
func (a *App) newServer(handler http.Handler) *http.Server {
	header := a.readHeaderTimeout
	if header == 0 {
		header = config.ReadHeaderTimeout
	}
	srv := &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: header,
		ReadTimeout:       a.Config.ReadTimeout,
		IdleTimeout:       config.IdleTimeout,
		MaxHeaderBytes:    config.MaxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(a.log.Handler(), slog.LevelWarn),
	}
	if a.cert != nil {
		srv.TLSConfig = a.cert.TLSConfig()
	}
	return srv
}

// startSides starts the servers beside the API that the configuration
// asks for: profiles on PprofAddr, and, with metrics (the worker, which
// has no API to carry /metrics), metrics on MetricsAddr. It returns those
// started, also on error, for stopSide.
func (a *App) startSides(metrics bool) ([]*http.Server, error) {
	var side []*http.Server
	if metrics && a.Config.MetricsAddr != "" {
		mux := http.NewServeMux()
		mux.Handle("GET /metrics", a.Metrics.Handler())
		// A worker has no API, so its probes (a container's health check,
		// Kubernetes' liveness and readiness) ask here: /healthz answers
		// while the process runs, /readyz while the database answers too.
		mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
			writeStatus(w, http.StatusOK, "ok")
		})
		mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
			ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
			defer cancel()
			if err := a.Store.Ping(ctx); err != nil {
				a.log.Warn("readiness check failed: database does not answer", logkey.Error, err)
				writeStatus(w, http.StatusServiceUnavailable, "the database does not answer")
				return
			}
			writeStatus(w, http.StatusOK, "ok")
		})
		srv, err := a.serveSide("metrics", a.Config.MetricsAddr, mux)
		if err != nil {
			return side, err
		}
		side = append(side, srv)
	}
	if a.Config.PprofAddr != "" {
		srv, err := a.serveSide("pprof", a.Config.PprofAddr, pprofMux())
		if err != nil {
			return side, err
		}
		side = append(side, srv)
	}
	return side, nil
}

// writeStatus answers a worker's probe with {"status": status}.
func writeStatus(w http.ResponseWriter, code int, status string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(wire.Status{Status: status})
}

// serveSide serves handler on addr, beside the API, until stopSide; what
// names it in errors and logs.
func (a *App) serveSide(what, addr string, handler http.Handler) (*http.Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen for %s on %s: %w", what, addr, err)
	}
	srv := a.newServer(handler)
	go func() {
		if err := a.serveOn(srv, ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			a.log.Warn("serve "+what, logkey.Error, err)
		}
	}()
	a.log.Info("herald serving "+what, logkey.Addr, ln.Addr().String())
	return srv, nil
}

// stopSide shuts the side servers down. Scrapes are quick, so one in
// progress gets a moment to finish; a profile being taken is cut short.
func (a *App) stopSide(side []*http.Server) {
	if len(side) == 0 {
		return
	}
	shutCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, srv := range side {
		if err := srv.Shutdown(shutCtx); err != nil {
			a.log.Warn("stop side server", logkey.Addr, srv.Addr, logkey.Error, err)
			_ = srv.Close()
		}
	}
}

// pprofMux serves Go's runtime profiles under /debug/pprof/, but not
// cmdline: the command line carries --api-key, --encryption-key and any
// other secret given as a flag.
func pprofMux() *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /debug/pprof/cmdline", http.NotFound)
	mux.HandleFunc("GET /debug/pprof/", pprof.Index)
	mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
	return mux
}

// requestRate is the API's form of a request limit Validate has read
// (config.ParseRequestRate); one it could not read is no limit, as
// Validate refused it before.
func requestRate(s string) ratelimit.Rate {
	r, err := config.ParseRequestRate(s)
	if err != nil {
		return ratelimit.Rate{}
	}
	return ratelimit.Rate{PerSecond: r.PerSecond, Burst: r.Burst}
}
