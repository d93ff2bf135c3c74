package edge

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/heraldhooks/herald/internal/clock"
	"github.com/heraldhooks/herald/internal/logkey"
)

// CertCheckEvery is how often, at most, a Certificate looks at its files
// again: a renewed certificate is served within this long of being
// written, and a busy listener stats two files this often, not per
// handshake.
const CertCheckEvery = 5 * time.Second

// CertificateConfig names a certificate and its key (--tls-cert,
// --tls-key).
type CertificateConfig struct {
	CertFile, KeyFile string
	// Clock decides when the files are looked at again. Default: real.
	Clock clock.Clock
	// Logger hears of a reload and of a renewed pair that fails to load.
	Logger *slog.Logger
}

// Certificate serves a certificate and key from files that a certificate
// manager renews in place (certbot, cert-manager, a cron job): on a
// handshake at least CertCheckEvery after the last look, it stats both
// files and, when either's size or modification time has changed, loads
// the pair again. A pair that fails to load (a manager writing the
// certificate before the key, a bad file) is logged and the pair loaded
// before is kept: a listener keeps serving what worked rather than
// failing every handshake. It tries again once the files change again.
type Certificate struct {
	cfg CertificateConfig

	mu        sync.Mutex
	cert      *tls.Certificate
	stamp     fileStamp // of the files as last looked at
	nextCheck time.Time
}

// fileStamp is what tells that the files changed.
type fileStamp struct {
	certSize, keySize int64
	certMod, keyMod   time.Time
}

// LoadCertificate loads the pair once, for a start that fails at once on
// a missing or bad file, and returns the Certificate that keeps it fresh.
func LoadCertificate(cfg CertificateConfig) (*Certificate, error) {
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	c := &Certificate{cfg: cfg}
	stamp, err := c.look()
	if err != nil {
		return nil, err
	}
	cert, err := tls.LoadX509KeyPair(cfg.CertFile, cfg.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("tls-cert and tls-key: load %s and %s: %w", cfg.CertFile, cfg.KeyFile, err)
	}
	c.cert, c.stamp, c.nextCheck = &cert, stamp, cfg.Clock.Now().Add(CertCheckEvery)
	return c, nil
}

// look stats both files.
func (c *Certificate) look() (fileStamp, error) {
	ci, err := os.Stat(c.cfg.CertFile)
	if err != nil {
		return fileStamp{}, fmt.Errorf("tls-cert: %w", err)
	}
	ki, err := os.Stat(c.cfg.KeyFile)
	if err != nil {
		return fileStamp{}, fmt.Errorf("tls-key: %w", err)
	}
	return fileStamp{certSize: ci.Size(), keySize: ki.Size(), certMod: ci.ModTime(), keyMod: ki.ModTime()}, nil
}

// GetCertificate is tls.Config.GetCertificate: the pair, loaded again
// first when its files changed (see Certificate).
func (c *Certificate) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.cfg.Clock.Now()
	if now.Before(c.nextCheck) {
		return c.cert, nil
	}
	c.nextCheck = now.Add(CertCheckEvery)
	stamp, err := c.look()
	if err != nil {
		if c.stamp != (fileStamp{}) {
			c.cfg.Logger.Warn("cannot read the TLS certificate's files; serving the one loaded before", logkey.Error, err)
			c.stamp = fileStamp{} // warn once until the files are back
		}
		return c.cert, nil
	}
	if stamp == c.stamp {
		return c.cert, nil
	}
	c.stamp = stamp // a pair that fails is tried again only once it changes again
	cert, err := tls.LoadX509KeyPair(c.cfg.CertFile, c.cfg.KeyFile)
	if err != nil {
		c.cfg.Logger.Warn("the TLS certificate's files changed but do not load; serving the one loaded before",
			logkey.TLSCert, c.cfg.CertFile, logkey.TLSKey, c.cfg.KeyFile, logkey.Error, err)
		return c.cert, nil
	}
	c.cert = &cert
	attrs := []any{logkey.TLSCert, c.cfg.CertFile}
	if cert.Leaf != nil {
		attrs = append(attrs, "not_after", cert.Leaf.NotAfter.UTC())
	}
	c.cfg.Logger.Info("loaded the renewed TLS certificate", attrs...)
	return c.cert, nil
}

// TLSConfig is the TLS configuration of every listener that serves the
// pair: TLS 1.2 at least, HTTP/2 offered first (http.Server.ServeTLS
// answers it).
func (c *Certificate) TLSConfig() *tls.Config {
	return &tls.Config{
		MinVersion:     tls.VersionTLS12,
		GetCertificate: c.GetCertificate,
		NextProtos:     []string{"h2", "http/1.1"},
	}
}
