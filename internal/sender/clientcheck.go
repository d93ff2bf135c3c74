package sender

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"time"
)

// ClientCertInfo is what an endpoint's client certificate says of itself,
// for the pages and the API's answers.
type ClientCertInfo struct {
	// Subject is the leaf certificate's subject, as in "CN=herald,O=Acme".
	Subject string
	// NotAfter is when the leaf certificate expires.
	NotAfter time.Time
}

// DescribeClientCertificate reads the leaf (first) certificate of a PEM
// chain.
func DescribeClientCertificate(certPEM string) (ClientCertInfo, error) {
	rest := []byte(certPEM)
	for {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			return ClientCertInfo{}, errors.New("no PEM CERTIFICATE block")
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		leaf, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return ClientCertInfo{}, fmt.Errorf("the certificate does not parse: %w", err)
		}
		return ClientCertInfo{Subject: leaf.Subject.String(), NotAfter: leaf.NotAfter.UTC()}, nil
	}
}

// CheckClientCertificate checks an endpoint's client certificate and key
// as given (PEM): both present, each parsing, the key the certificate's,
// and the certificate valid at now. Its errors never quote the key.
func CheckClientCertificate(certPEM, keyPEM string, now time.Time) (ClientCertInfo, error) {
	if certPEM == "" {
		return ClientCertInfo{}, errors.New("a client_key needs its client_certificate")
	}
	if keyPEM == "" {
		return ClientCertInfo{}, errors.New("a client_certificate needs its client_key (PEM)")
	}
	info, err := DescribeClientCertificate(certPEM)
	if err != nil {
		return ClientCertInfo{}, fmt.Errorf("client_certificate: %w", err)
	}
	if block, _ := pem.Decode([]byte(keyPEM)); block == nil {
		return ClientCertInfo{}, errors.New("client_key: no PEM block")
	}
	if _, err := tls.X509KeyPair([]byte(certPEM), []byte(keyPEM)); err != nil {
		// X509KeyPair's errors name the blocks and say "does not match";
		// they never hold the key.
		return ClientCertInfo{}, fmt.Errorf("client_key: %w", err)
	}
	if !now.Before(info.NotAfter) {
		return ClientCertInfo{}, fmt.Errorf("client_certificate expired at %s", info.NotAfter.Format(time.RFC3339))
	}
	return info, nil
}
