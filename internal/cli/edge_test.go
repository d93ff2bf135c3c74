package cli_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestServeRefusesABadEdgeAtOnce: half a TLS pair, a pair that does not
// load, a trusted proxy that is no address and a profile listener off
// loopback in plain HTTP are each a clear error at start, from a flag or
// its environment twin.
func TestServeRefusesABadEdgeAtOnce(t *testing.T) {
	t.Parallel()
	db := func() string { return "sqlite://" + filepath.Join(t.TempDir(), "d.db") }
	for _, command := range []string{"serve", "worker"} {
		_, _, err := run(t, nil, command, "--db", db(), "--tls-cert", "cert.pem")
		require.ErrorContains(t, err, "tls-cert and tls-key: give both", command)
		_, _, err = run(t, map[string]string{"HERALD_TLS_KEY": "key.pem"}, command, "--db", db())
		require.ErrorContains(t, err, "tls-cert and tls-key: give both", command)

		dir := t.TempDir()
		cert, key := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
		require.NoError(t, os.WriteFile(cert, []byte("not a certificate"), 0o600))
		require.NoError(t, os.WriteFile(key, []byte("not a key"), 0o600))
		_, _, err = run(t, map[string]string{"HERALD_TLS_CERT": cert, "HERALD_TLS_KEY": key}, command, "--db", db())
		require.ErrorContains(t, err, "tls-cert and tls-key: load "+cert+" and "+key, command)
		_, _, err = run(t, nil, command, "--db", db(), "--tls-cert", filepath.Join(dir, "missing.pem"), "--tls-key", key)
		require.ErrorContains(t, err, "tls-cert: ", command)
		require.ErrorContains(t, err, "missing.pem", command)

		_, _, err = run(t, nil, command, "--db", db(), "--pprof-addr", "0.0.0.0:6060")
		require.ErrorContains(t, err, `pprof-addr: "0.0.0.0:6060" is not a loopback address; without --tls-cert and --tls-key`, command)
	}
	_, _, err := run(t, nil, "worker", "--db", db(), "--metrics-addr", ":9090")
	require.ErrorContains(t, err, `metrics-addr: ":9090" is not a loopback address`)
	_, _, err = run(t, map[string]string{"HERALD_TRUSTED_PROXIES": "10.0.0.0/8,proxy.internal"}, "serve", "--db", db())
	require.ErrorContains(t, err, `trusted-proxies: "proxy.internal" is not a CIDR`)
	_, _, err = run(t, nil, "serve", "--db", db(), "--public-url", "https://herald.example.com/?x=1")
	require.ErrorContains(t, err, "public-url: ")
	require.ErrorContains(t, err, "without user, query or fragment")
}
