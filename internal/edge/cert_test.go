package edge_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"log/slog"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhooks/herald/internal/clock"
	"github.com/heraldhooks/herald/internal/edge"
	"github.com/heraldhooks/herald/internal/syncbuf"
)

// writePair writes a self-signed certificate for 127.0.0.1 with serial
// and its key to certFile and keyFile.
func writePair(t *testing.T, certFile, keyFile string, serial int64) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial),
		Subject:      pkix.Name{CommonName: "herald test"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	kb, err := x509.MarshalECPrivateKey(key)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600))
	require.NoError(t, os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600))
}

func serialOf(t *testing.T, c *edge.Certificate) int64 {
	t.Helper()
	got, err := c.GetCertificate(&tls.ClientHelloInfo{})
	require.NoError(t, err)
	leaf, err := x509.ParseCertificate(got.Certificate[0])
	require.NoError(t, err)
	return leaf.SerialNumber.Int64()
}

// TestCertificateRenewedInPlace: a pair rewritten where it lies is served
// at the first handshake CertCheckEvery after the last look, not before;
// a rewrite that does not load keeps the pair before it, logged, until the
// files change again.
func TestCertificateRenewedInPlace(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	writePair(t, certFile, keyFile, 1)
	c0 := clock.NewTest(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	var logs syncbuf.Buffer
	cert, err := edge.LoadCertificate(edge.CertificateConfig{CertFile: certFile, KeyFile: keyFile, Clock: c0,
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	require.NoError(t, err)
	require.EqualValues(t, 1, serialOf(t, cert))

	writePair(t, certFile, keyFile, 2)
	c0.Advance(edge.CertCheckEvery - time.Second)
	require.EqualValues(t, 1, serialOf(t, cert), "not looked at again yet")
	c0.Advance(time.Second)
	require.EqualValues(t, 2, serialOf(t, cert), "the renewed pair, without a restart")
	require.Contains(t, logs.String(), "loaded the renewed TLS certificate")

	require.NoError(t, os.WriteFile(keyFile, []byte("not a key"), 0o600))
	c0.Advance(edge.CertCheckEvery)
	require.EqualValues(t, 2, serialOf(t, cert), "a pair that does not load leaves the one before")
	require.Contains(t, logs.String(), "do not load; serving the one loaded before")

	require.NoError(t, os.Remove(certFile))
	c0.Advance(edge.CertCheckEvery)
	require.EqualValues(t, 2, serialOf(t, cert), "nor do missing files")

	writePair(t, certFile, keyFile, 3)
	c0.Advance(edge.CertCheckEvery)
	require.EqualValues(t, 3, serialOf(t, cert), "fixed files are loaded")

	cfg := cert.TLSConfig()
	require.Equal(t, []string{"h2", "http/1.1"}, cfg.NextProtos)
	require.EqualValues(t, tls.VersionTLS12, cfg.MinVersion)
}

func TestLoadCertificateFailsClearly(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	_, err := edge.LoadCertificate(edge.CertificateConfig{CertFile: certFile, KeyFile: keyFile})
	require.ErrorContains(t, err, "tls-cert: ")
	require.ErrorContains(t, err, "cert.pem")
	writePair(t, certFile, keyFile, 1)
	other := filepath.Join(dir, "other-key.pem")
	writePair(t, filepath.Join(dir, "other.pem"), other, 2)
	_, err = edge.LoadCertificate(edge.CertificateConfig{CertFile: certFile, KeyFile: other})
	require.ErrorContains(t, err, "tls-cert and tls-key: load ")
	require.ErrorContains(t, err, "private key does not match public key")
}
