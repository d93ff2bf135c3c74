package api_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhooks/herald/internal/store/storetest"
)

// clientCertOut is the client certificate of an endpoint's answer, and
// whether the answer names a client_key at all.
type clientCertOut struct {
	ClientCertificate          *string    `json:"client_certificate"`
	ClientCertificateExpiresAt *time.Time `json:"client_certificate_expires_at"`
	ClientKey                  *string    `json:"client_key"`
}

func TestEndpointClientCertificate(t *testing.T) {
	t.Parallel()
	ca := storetest.NewCA(t)
	notAfter := start.Add(90 * 24 * time.Hour).Truncate(time.Second)
	cert, key := ca.Client(t, "herald", notAfter)
	cert2, key2 := ca.Client(t, "herald-2", notAfter.Add(time.Hour))
	_, otherKey := ca.Client(t, "other", notAfter)
	expired, expiredKey := ca.Client(t, "old", start.Add(-time.Hour))

	t.Run("SetShownWithoutItsKeyReplacedCleared", func(t *testing.T) {
		t.Parallel()
		e := setup(t)
		var out clientCertOut
		e.do("POST", "/v1/endpoints", map[string]any{"url": "https://example.com/hooks",
			"client_certificate": cert, "client_key": key}).must(http.StatusCreated, &out)
		require.Equal(t, cert, *out.ClientCertificate)
		require.Equal(t, notAfter, out.ClientCertificateExpiresAt.UTC())
		require.Nil(t, out.ClientKey, "the key is never shown")
		id := e.createEndpoint(map[string]any{"url": "https://example.com/b"}).ID
		e.do("GET", "/v1/endpoints/"+id, nil).must(http.StatusOK, &out)
		require.Nil(t, out.ClientCertificate, "none: null")
		require.Nil(t, out.ClientCertificateExpiresAt)

		e.do("PATCH", "/v1/endpoints/"+id, map[string]any{"client_certificate": cert, "client_key": key}).must(http.StatusOK, &out)
		require.Equal(t, cert, *out.ClientCertificate)
		e.do("PATCH", "/v1/endpoints/"+id, map[string]any{"description": "kept"}).must(http.StatusOK, &out)
		require.Equal(t, cert, *out.ClientCertificate, "a PATCH without it keeps it")
		ep, err := e.store.EndpointGet(t.Context(), id)
		require.NoError(t, err)
		require.Equal(t, key, ep.ClientKey)

		e.do("PATCH", "/v1/endpoints/"+id, map[string]any{"client_certificate": cert2, "client_key": key2}).must(http.StatusOK, &out)
		require.Equal(t, cert2, *out.ClientCertificate)
		e.do("PATCH", "/v1/endpoints/"+id, map[string]any{"client_certificate": nil}).must(http.StatusOK, &out)
		require.Nil(t, out.ClientCertificate)
		ep, err = e.store.EndpointGet(t.Context(), id)
		require.NoError(t, err)
		require.Empty(t, ep.ClientCertificate)
		require.Empty(t, ep.ClientKey, "null clears the key too")
	})

	t.Run("Refused", func(t *testing.T) {
		t.Parallel()
		e := setup(t)
		id := e.createEndpoint(map[string]any{"url": "https://example.com/b"}).ID
		for name, tc := range map[string]struct {
			body map[string]any
			want string
		}{
			"CertWithoutKey": {map[string]any{"client_certificate": cert}, "client_key"},
			"KeyWithoutCert": {map[string]any{"client_key": key}, "client_certificate"},
			"KeyNotTheCerts": {map[string]any{"client_certificate": cert, "client_key": otherKey}, "client_key"},
			"Expired":        {map[string]any{"client_certificate": expired, "client_key": expiredKey}, "expired"},
			"BadPEM":         {map[string]any{"client_certificate": "MIIB", "client_key": key}, "PEM"},
			"BadKeyPEM":      {map[string]any{"client_certificate": cert, "client_key": "not a key"}, "client_key"},
			"SetAndCleared":  {map[string]any{"client_certificate": cert, "client_key": nil}, "together"},
		} {
			body := map[string]any{"url": "https://example.com/hooks"}
			for k, v := range tc.body {
				body[k] = v
			}
			msg := e.do("POST", "/v1/endpoints", body).apiErr(http.StatusBadRequest, "invalid_client_certificate")
			require.Contains(t, msg, tc.want, name)
			require.NotContains(t, msg, "PRIVATE KEY", name)
			msg = e.do("PATCH", "/v1/endpoints/"+id, tc.body).apiErr(http.StatusBadRequest, "invalid_client_certificate")
			require.Contains(t, msg, tc.want, name)
		}
	})
}
