package cli_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhooks/herald/internal/store/storetest"
)

// TestEndpointClientCertificateFlags: --client-cert and --client-key set an
// endpoint's client certificate from PEM files on create and update (its
// subject and expiry shown, the key nowhere), one without the other is
// refused before any call, a key that is not the certificate's is refused
// by the API, and --clear-client-cert removes it.
func TestEndpointClientCertificateFlags(t *testing.T) {
	t.Parallel()
	e := setupAPI(t)
	ca := storetest.NewCA(t)
	notAfter := time.Now().Add(48 * time.Hour).UTC().Truncate(time.Second)
	cert, key := ca.Client(t, "acme", notAfter)
	_, otherKey := ca.Client(t, "other", notAfter)
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(content), 0o600))
		return p
	}
	certFile, keyFile, otherFile := write("cert.pem", cert), write("key.pem", key), write("other.pem", otherKey)

	out := e.run("endpoints", "create", "--url", "https://example.com/hooks", "--consumer", "c1",
		"--client-cert", certFile, "--client-key", keyFile)
	id := field(t, out, "id")
	require.Contains(t, field(t, out, "client certificate"), "CN=acme,O=Herald tests, expires ")
	require.NotContains(t, out, "PRIVATE KEY")
	ep, err := e.store.EndpointGet(t.Context(), id)
	require.NoError(t, err)
	require.Equal(t, key, ep.ClientKey)

	require.ErrorContains(t, e.fail("endpoints", "update", id, "--client-cert", certFile), "give both")
	err = e.fail("endpoints", "update", id, "--client-cert", certFile, "--client-key", otherFile)
	require.ErrorContains(t, err, "invalid_client_certificate")

	out = e.run("endpoints", "update", id, "--clear-client-cert")
	require.Equal(t, "none", field(t, out, "client certificate"))
	ep, err = e.store.EndpointGet(t.Context(), id)
	require.NoError(t, err)
	require.Empty(t, ep.ClientKey)
}
