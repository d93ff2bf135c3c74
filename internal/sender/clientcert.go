package sender

import (
	"crypto/tls"
	"fmt"
	"net/http"
	"sync"
)

// ClientCert is an endpoint's client certificate, presented to a receiver
// that asks for one (mutual TLS).
type ClientCert struct {
	// EndpointID keys the connection pool kept for the certificate.
	EndpointID string
	// CertPEM is the certificate chain and KeyPEM its private key, in PEM.
	CertPEM, KeyPEM string
}

// certClient is the pool of one endpoint with a client certificate: a
// clone of the shared transport that presents it. Connections made with a
// certificate are never shared with other endpoints, and endpoints without
// one keep using the shared transport at no cost.
type certClient struct {
	certPEM, keyPEM string
	transport       *http.Transport
	client          *http.Client
}

// maxCertClients bounds the pools kept for endpoints with a client
// certificate: past it, one is dropped (its idle connections closed) to
// make room, so endpoints deleted or long idle do not hold memory for the
// life of the process. An endpoint whose pool was dropped gets a new one
// at its next attempt.
const maxCertClients = 4096

// certClients holds the pools of endpoints with a client certificate, by
// endpoint id. A changed certificate or key replaces the endpoint's pool
// (its idle connections are closed).
type certClients struct {
	mu sync.Mutex
	m  map[string]*certClient
	// max bounds len(m); 0 is maxCertClients.
	max int
}

// clientFor gives the client that presents cc, made (and its key parsed)
// only when the endpoint's certificate is new or has changed.
func (s *Sender) clientFor(cc *ClientCert) (*http.Client, error) {
	s.certs.mu.Lock()
	defer s.certs.mu.Unlock()
	if c, ok := s.certs.m[cc.EndpointID]; ok && c.certPEM == cc.CertPEM && c.keyPEM == cc.KeyPEM {
		return c.client, nil
	}
	cert, err := tls.X509KeyPair([]byte(cc.CertPEM), []byte(cc.KeyPEM))
	if err != nil {
		// The error of X509KeyPair names the PEM blocks, never the key.
		return nil, fmt.Errorf("client certificate of endpoint %s: %w", cc.EndpointID, err)
	}
	t := s.transport.Clone()
	// Presented whatever CAs the receiver names as acceptable: its list
	// may name an intermediate the chain does not, and a receiver that
	// refuses the certificate answers as clearly as one that got none.
	if t.TLSClientConfig == nil {
		t.TLSClientConfig = &tls.Config{}
	}
	t.TLSClientConfig.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &cert, nil }
	c := &certClient{certPEM: cc.CertPEM, keyPEM: cc.KeyPEM, transport: t,
		client: &http.Client{Transport: t, CheckRedirect: s.client.CheckRedirect}}
	if old, ok := s.certs.m[cc.EndpointID]; ok {
		old.transport.CloseIdleConnections()
		delete(s.certs.m, cc.EndpointID)
	}
	if s.certs.m == nil {
		s.certs.m = make(map[string]*certClient)
	}
	limit := s.certs.max
	if limit <= 0 {
		limit = maxCertClients
	}
	for id, c := range s.certs.m {
		if len(s.certs.m) < limit {
			break
		}
		// Any one: map order is as good as a least-recently-used list
		// here, and costs nothing on the way to a send.
		c.transport.CloseIdleConnections()
		delete(s.certs.m, id)
	}
	s.certs.m[cc.EndpointID] = c
	return c.client, nil
}

// closeIdle closes the idle connections of every certificate's pool.
func (c *certClients) closeIdle() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, cc := range c.m {
		cc.transport.CloseIdleConnections()
	}
}
