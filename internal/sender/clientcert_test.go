package sender

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"log"
	"math/big"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// testCA is a certificate authority the test makes, and the client
// certificates it signs.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pool *x509.CertPool
}

func newTestCA(t *testing.T) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"},
		NotBefore: testTime.Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	cert, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &testCA{cert: cert, key: key, pool: pool}
}

// client signs a client certificate for cn valid until notAfter, in PEM.
func (ca *testCA) client(t *testing.T, cn string, notAfter time.Time) (certPEM, keyPEM string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn, Organization: []string{"Acme"}},
		NotBefore: testTime.Add(-time.Hour), NotAfter: notAfter,
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	require.NoError(t, err)
	pkcs8, err := x509.MarshalPKCS8PrivateKey(key)
	require.NoError(t, err)
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})),
		string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: pkcs8}))
}

func TestClientCertificate(t *testing.T) {
	t.Parallel()
	ca := newTestCA(t)
	// A receiver that requires a client certificate signed by ca.
	subjects := make(chan string, 8)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		subjects <- r.TLS.PeerCertificates[0].Subject.CommonName
	}))
	srv.TLS = &tls.Config{ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: ca.pool, MinVersion: tls.VersionTLS12}
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshake is expected
	srv.StartTLS()
	t.Cleanup(srv.Close)
	pool := x509.NewCertPool()
	pool.AddCert(srv.Certificate())
	s := setup(t)
	s.transport.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	certA, keyA := ca.client(t, "endpoint-a", time.Now().Add(time.Hour))
	certB, keyB := ca.client(t, "endpoint-b", time.Now().Add(time.Hour))

	t.Run("DeliveredWithIt", func(t *testing.T) {
		req := request(srv.URL)
		req.ClientCert = &ClientCert{EndpointID: "ep_a", CertPEM: certA, KeyPEM: keyA}
		res := s.Send(context.Background(), req)
		require.Equal(t, Success, res.Class, res.Error)
		require.Equal(t, "endpoint-a", <-subjects)
	})
	t.Run("RefusedWithout", func(t *testing.T) {
		res := s.Send(context.Background(), request(srv.URL))
		require.Equal(t, Retryable, res.Class)
		require.Equal(t, 0, res.StatusCode)
	})
	t.Run("EachEndpointItsOwn", func(t *testing.T) {
		req := request(srv.URL)
		req.ClientCert = &ClientCert{EndpointID: "ep_b", CertPEM: certB, KeyPEM: keyB}
		require.Equal(t, Success, s.Send(context.Background(), req).Class)
		require.Equal(t, "endpoint-b", <-subjects)
		// A changed certificate replaces the endpoint's pool.
		req.ClientCert = &ClientCert{EndpointID: "ep_b", CertPEM: certA, KeyPEM: keyA}
		require.Equal(t, Success, s.Send(context.Background(), req).Class)
		require.Equal(t, "endpoint-a", <-subjects)
	})
	t.Run("PoolsAreBounded", func(t *testing.T) {
		b := setup(t)
		b.transport.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
		b.certs.max = 2
		for _, id := range []string{"ep_1", "ep_2", "ep_3", "ep_4"} {
			req := request(srv.URL)
			req.ClientCert = &ClientCert{EndpointID: id, CertPEM: certA, KeyPEM: keyA}
			require.Equal(t, Success, b.Send(context.Background(), req).Class)
			<-subjects
			require.LessOrEqual(t, len(b.certs.m), 2)
		}
		require.Contains(t, b.certs.m, "ep_4", "the newest kept")
	})
	t.Run("AKeyThatDoesNotLoadIsAClientError", func(t *testing.T) {
		req := request(srv.URL)
		req.ClientCert = &ClientCert{EndpointID: "ep_c", CertPEM: certA, KeyPEM: keyB}
		res := s.Send(context.Background(), req)
		require.Equal(t, ClientError, res.Class)
		require.Contains(t, res.Error, "client certificate of endpoint ep_c")
	})
}

func TestCheckClientCertificate(t *testing.T) {
	t.Parallel()
	ca := newTestCA(t)
	now := time.Now()
	cert, key := ca.client(t, "herald", now.Add(time.Hour))
	_, otherKey := ca.client(t, "other", now.Add(time.Hour))
	oldCert, oldKey := ca.client(t, "old", now.Add(-time.Minute))

	info, err := CheckClientCertificate(cert, key, now)
	require.NoError(t, err)
	require.Equal(t, "CN=herald,O=Acme", info.Subject)
	require.WithinDuration(t, now.Add(time.Hour), info.NotAfter, time.Second)

	for name, tc := range map[string]struct{ cert, key, want string }{
		"NoKey":    {cert, "", "needs its client_key"},
		"NoCert":   {"", key, "needs its client_certificate"},
		"Mismatch": {cert, otherKey, "client_key"},
		"Expired":  {oldCert, oldKey, "expired"},
		"BadPEM":   {"not a certificate", key, "no PEM"},
		"BadKey":   {cert, "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n", "client_key"},
	} {
		_, err := CheckClientCertificate(tc.cert, tc.key, now)
		require.ErrorContains(t, err, tc.want, name)
		require.NotContains(t, err.Error(), "PRIVATE KEY-----\nM", name)
	}
}
