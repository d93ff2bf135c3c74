package storetest

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"math/big"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhooks/herald"
	"github.com/heraldhooks/herald/internal/store"
)

// CA is a certificate authority a test makes, to sign the client
// certificates of endpoints and to be the one a receiver that requires
// them trusts (mutual TLS).
type CA struct {
	Cert *x509.Certificate
	// Pool holds Cert: a receiver's tls.Config.ClientCAs.
	Pool *x509.CertPool
	key  *ecdsa.PrivateKey
	next atomic.Int64
}

// NewCA makes a CA valid from a day before now to a year after.
func NewCA(tb testing.TB) *CA {
	tb.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(tb, err)
	now := time.Now()
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "Herald test CA"},
		NotBefore: now.Add(-24 * time.Hour), NotAfter: now.Add(365 * 24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(tb, err)
	cert, err := x509.ParseCertificate(der)
	require.NoError(tb, err)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	ca := &CA{Cert: cert, Pool: pool, key: key}
	ca.next.Store(1)
	return ca
}

// Client signs a client certificate with subject CN=cn, O=Herald tests,
// valid until notAfter, and gives it and its private key (PKCS #8) in PEM.
func (ca *CA) Client(tb testing.TB, cn string, notAfter time.Time) (certPEM, keyPEM string) {
	tb.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(tb, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(ca.next.Add(1)),
		Subject:   pkix.Name{CommonName: cn, Organization: []string{"Herald tests"}},
		NotBefore: ca.Cert.NotBefore, NotAfter: notAfter,
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.key)
	require.NoError(tb, err)
	pkcs8, err := x509.MarshalPKCS8PrivateKey(key)
	require.NoError(tb, err)
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})),
		string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: pkcs8}))
}

// RequireClientKeyAbsent requires that raw (a database's bytes) holds
// none of a PEM private key: not the PEM, nor any line of its base64, nor
// the base64 whole, nor the key's DER bytes.
func RequireClientKeyAbsent(tb testing.TB, raw []byte, keyPEM string) {
	tb.Helper()
	require.NotEmpty(tb, raw)
	block, _ := pem.Decode([]byte(keyPEM))
	require.NotNil(tb, block)
	require.False(tb, bytes.Contains(raw, []byte(keyPEM)), "the database holds a client key's PEM")
	require.False(tb, bytes.Contains(raw, block.Bytes), "the database holds a client key's bytes")
	require.False(tb, bytes.Contains(raw, []byte(base64.StdEncoding.EncodeToString(block.Bytes))), "the database holds a client key's base64")
	for _, line := range strings.Split(keyPEM, "\n") {
		if len(line) >= 16 && !strings.HasPrefix(line, "-----") {
			require.False(tb, bytes.Contains(raw, []byte(line)), "the database holds a line of a client key")
		}
	}
}

// requireClientCert requires that endpoint id reads back, by get, list and
// a claim, with cert and key.
func requireClientCert(t *testing.T, s store.Store, now time.Time, id, cert, key string) {
	t.Helper()
	got, err := s.EndpointGet(t.Context(), id)
	require.NoError(t, err)
	require.Equal(t, cert, got.ClientCertificate)
	require.Equal(t, key, got.ClientKey)
	page, err := s.EndpointList(t.Context(), &store.EndpointListParams{Limit: store.MaxListLimit})
	require.NoError(t, err)
	found := false
	for _, ep := range page.Items {
		if ep.ID == id {
			found = true
			require.Equal(t, cert, ep.ClientCertificate, "list")
			require.Equal(t, key, ep.ClientKey, "list")
		}
	}
	require.True(t, found)
	c := claimOne(t, s, now, ingestFor(t, s, now, got))
	require.Equal(t, cert, c.Endpoint.ClientCertificate, "claim")
	require.Equal(t, key, c.Endpoint.ClientKey, "claim")
	finish(t, s, now, c, herald.StatusDelivered)
}

// testClientKeySealed: an endpoint's client certificate and key are kept
// through create, get, list, update and claim; the key is sealed under the
// ring (counted with the secrets by key), moved to the new key by
// re-encryption, sealed by the plain-only pass when written without a key,
// and cleared with the certificate; no copy of the database holds it.
func testClientKeySealed(t *testing.T, db SecretsDB) {
	ca := NewCA(t)
	certA, keyA := ca.Client(t, "a", time.Now().Add(time.Hour))
	certB, keyB := ca.Client(t, "b", time.Now().Add(time.Hour))
	k1, k2 := newTestKey(t, "k1"), newTestKey(t, "k2")

	// Written without a key, as a database from before encryption.
	plain := db.Open(t, nil)
	old := newEndpoint("c0")
	old.ClientCertificate, old.ClientKey = certB, keyB
	old = createEndpoint(t, plain, old, at(0))
	require.Equal(t, keyB, old.ClientKey)

	s1 := db.Open(t, ringOf(t, k1))
	ep := newEndpoint("c1")
	ep.ClientCertificate, ep.ClientKey = certA, keyA
	created := createEndpoint(t, s1, ep, at(0))
	require.Equal(t, certA, created.ClientCertificate)
	require.Equal(t, keyA, created.ClientKey, "create answers the plain key")
	requireClientCert(t, s1, at(time.Second), created.ID, certA, keyA)
	resealed, _ := reseal(t, s1, 10, true)
	require.Equal(t, 1, resealed, "the plain-only pass seals the endpoint written without a key")
	require.Equal(t, map[string]int64{"k1": 4}, keyCounts(t, s1), "two secrets and two client keys")
	requireClientCert(t, s1, at(2*time.Second), old.ID, certB, keyB)

	upd := *created
	upd.Description = "changed"
	got, err := s1.EndpointUpdate(t.Context(), &store.EndpointUpdateParams{Endpoint: &upd, Now: at(time.Minute)})
	require.NoError(t, err)
	require.Equal(t, keyA, got.ClientKey, "an update keeps the key")

	// A new key, then re-encryption: the client keys move to it.
	s2 := db.Open(t, ringOf(t, k2, k1))
	requireClientCert(t, s2, at(2*time.Minute), created.ID, certA, keyA)
	resealed, changed := reseal(t, s2, 1, false)
	require.Equal(t, 2, resealed)
	require.Zero(t, changed)
	require.Equal(t, map[string]int64{"k2": 4}, keyCounts(t, s2))
	only := db.Open(t, ringOf(t, k2))
	requireClientCert(t, only, at(3*time.Minute), created.ID, certA, keyA)
	requireClientCert(t, only, at(3*time.Minute), old.ID, certB, keyB)

	// Cleared: no certificate, no key.
	upd = *got
	upd.ClientCertificate, upd.ClientKey = "", ""
	got, err = only.EndpointUpdate(t.Context(), &store.EndpointUpdateParams{Endpoint: &upd, Now: at(4 * time.Minute)})
	require.NoError(t, err)
	require.Empty(t, got.ClientCertificate)
	require.Empty(t, got.ClientKey)
	got, err = only.EndpointGet(t.Context(), created.ID)
	require.NoError(t, err)
	require.Empty(t, got.ClientCertificate)
	require.Empty(t, got.ClientKey)
	require.Equal(t, map[string]int64{"k2": 3}, keyCounts(t, only))

	raw := db.Raw(t)
	require.True(t, bytes.Contains(raw, []byte(strings.Split(certB, "\n")[1])), "the certificate is public, kept as it is")
	RequireClientKeyAbsent(t, raw, keyB)
}
