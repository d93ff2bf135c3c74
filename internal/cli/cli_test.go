package cli_test

import (
	"bytes"
	"context"
	"net"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/heraldhooks/herald/internal/cli"
)

func run(t *testing.T, env map[string]string, args ...string) (string, string, error) {
	t.Helper()
	var out, errb bytes.Buffer
	cmd := cli.New(cli.IO{Out: &out, Err: &errb, Getenv: func(k string) string { return env[k] }})
	cmd.SetArgs(args)
	err := cmd.ExecuteContext(context.Background())
	return out.String(), errb.String(), err
}

func TestEnvName(t *testing.T) {
	t.Parallel()
	require.Equal(t, "HERALD_ALLOW_PRIVATE_NETWORKS", cli.EnvName("allow-private-networks"))
	require.Equal(t, "HERALD_DB", cli.EnvName("db"))
}

func TestMigrate(t *testing.T) {
	t.Parallel()
	t.Run("FlagNamesTheDatabase", func(t *testing.T) {
		t.Parallel()
		db := "sqlite://" + filepath.Join(t.TempDir(), "a.db")
		out, _, err := run(t, nil, "migrate", "--db", db)
		require.NoError(t, err)
		require.Contains(t, out, "up to date")
		// Twice is harmless.
		_, _, err = run(t, nil, "migrate", "--db", db)
		require.NoError(t, err)
	})
	t.Run("EnvTwinNamesTheDatabase", func(t *testing.T) {
		t.Parallel()
		db := "sqlite://" + filepath.Join(t.TempDir(), "b.db")
		out, _, err := run(t, map[string]string{"HERALD_DB": db}, "migrate")
		require.NoError(t, err)
		require.Contains(t, out, filepath.Base(filepath.Dir(db[len("sqlite://"):])))
	})
	t.Run("FlagWinsOverEnvTwin", func(t *testing.T) {
		t.Parallel()
		db := "sqlite://" + filepath.Join(t.TempDir(), "c.db")
		_, _, err := run(t, map[string]string{"HERALD_DB": "mysql://nope"}, "migrate", "--db", db)
		require.NoError(t, err)
	})
	t.Run("BadDatabaseIsAClearError", func(t *testing.T) {
		t.Parallel()
		_, _, err := run(t, nil, "migrate", "--db", "mysql://u:pw@h/x")
		require.ErrorContains(t, err, "unknown scheme")
		require.NotContains(t, err.Error(), "pw@")
	})
}

func TestServeRejectsBadConfigAtOnce(t *testing.T) {
	t.Parallel()
	t.Run("BadEnvValueNamesTheVariable", func(t *testing.T) {
		t.Parallel()
		_, _, err := run(t, map[string]string{"HERALD_CONCURRENCY": "lots"}, "serve")
		require.ErrorContains(t, err, "HERALD_CONCURRENCY")
	})
	t.Run("EveryProblemListed", func(t *testing.T) {
		t.Parallel()
		_, _, err := run(t, nil, "serve", "--addr", "nowhere", "--log-format", "xml", "--concurrency", "0",
			"--db", "sqlite://"+filepath.Join(t.TempDir(), "d.db"))
		require.ErrorContains(t, err, "addr:")
		require.ErrorContains(t, err, "log-format:")
		require.ErrorContains(t, err, "concurrency:")
	})
	t.Run("BadSMTPURLNamedAndItsPasswordHidden", func(t *testing.T) {
		t.Parallel()
		for _, command := range []string{"serve", "worker"} {
			_, _, err := run(t, map[string]string{"HERALD_SMTP_URL": "smtp://u:hunter2@mail.example.com"}, command,
				"--db", "sqlite://"+filepath.Join(t.TempDir(), "d.db"))
			require.ErrorContains(t, err, "smtp-url: no sender", command)
			require.NotContains(t, err.Error(), "hunter2")
			_, _, err = run(t, nil, command, "--smtp-url", "smtp://mail.example.com?from=h@example.com&tls=off",
				"--db", "sqlite://"+filepath.Join(t.TempDir(), "d.db"))
			require.ErrorContains(t, err, `smtp-url: unknown setting "tls"`, command)
		}
	})
}

// TestLeaseMarginReachesTheConfig: serve and worker take --lease-margin
// and its twin HERALD_LEASE_MARGIN into the configuration they validate,
// and the flag wins over the twin.
func TestLeaseMarginReachesTheConfig(t *testing.T) {
	t.Parallel()
	for _, command := range []string{"serve", "worker"} {
		t.Run(command, func(t *testing.T) {
			t.Parallel()
			db := "sqlite://" + filepath.Join(t.TempDir(), "l.db")
			_, _, err := run(t, nil, command, "--db", db, "--lease-margin", "500ms")
			require.ErrorContains(t, err, "lease-margin: 500ms is not between 1s and 10m")

			_, _, err = run(t, map[string]string{"HERALD_LEASE_MARGIN": "20m"}, command, "--db", db)
			require.ErrorContains(t, err, "lease-margin: 20m0s is not between 1s and 10m")

			_, _, err = run(t, map[string]string{"HERALD_LEASE_MARGIN": "soon"}, command, "--db", db)
			require.ErrorContains(t, err, "HERALD_LEASE_MARGIN")

			// A bad log format stops the command before it runs; the margin
			// given by the flag is the one validated.
			_, _, err = run(t, map[string]string{"HERALD_LEASE_MARGIN": "20m"}, command, "--db", db,
				"--lease-margin", "2s", "--log-format", "xml")
			require.ErrorContains(t, err, "log-format:")
			require.NotContains(t, err.Error(), "lease-margin")
		})
	}
}

// TestReadTimeoutReachesTheConfig: serve and worker (whose /metrics and
// profiles listen too) take --read-timeout and its twin
// HERALD_READ_TIMEOUT into the configuration they validate, and the flag
// wins over the twin.
func TestReadTimeoutReachesTheConfig(t *testing.T) {
	t.Parallel()
	for _, command := range []string{"serve", "worker"} {
		t.Run(command, func(t *testing.T) {
			t.Parallel()
			db := "sqlite://" + filepath.Join(t.TempDir(), "r.db")
			_, _, err := run(t, nil, command, "--db", db, "--read-timeout", "500ms")
			require.ErrorContains(t, err, "read-timeout: 500ms is not between 1s and 1h")

			_, _, err = run(t, map[string]string{"HERALD_READ_TIMEOUT": "2h"}, command, "--db", db)
			require.ErrorContains(t, err, "read-timeout: 2h0m0s is not between 1s and 1h")

			_, _, err = run(t, map[string]string{"HERALD_READ_TIMEOUT": "soon"}, command, "--db", db)
			require.ErrorContains(t, err, "HERALD_READ_TIMEOUT")

			_, _, err = run(t, map[string]string{"HERALD_READ_TIMEOUT": "2h"}, command, "--db", db,
				"--read-timeout", "30s", "--log-format", "xml")
			require.ErrorContains(t, err, "log-format:")
			require.NotContains(t, err.Error(), "read-timeout")
		})
	}
}

// TestNodeWaitsForItsDatabase: serve and worker wait --db-wait (or its
// twin) for a PostgreSQL that does not answer yet, trying again and
// saying so, and then give up; --db-wait 0 tries once.
func TestNodeWaitsForItsDatabase(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	db := "postgres://postgres@" + ln.Addr().String() + "/test?sslmode=disable"
	require.NoError(t, ln.Close()) // nothing listens there now
	key := newKey(t, "k1")
	for _, command := range []string{"serve", "worker"} {
		t.Run(command, func(t *testing.T) {
			t.Parallel()
			_, errOut, err := run(t, nil, command, "--db", db, "--encryption-key", key, "--db-wait", "300ms")
			require.ErrorContains(t, err, "gave up after")
			require.Contains(t, errOut, "PostgreSQL is not accepting connections yet; trying again")

			_, errOut, err = run(t, map[string]string{"HERALD_DB_WAIT": "0s"}, command, "--db", db, "--encryption-key", key)
			require.Error(t, err)
			require.NotContains(t, err.Error(), "gave up after")
			require.NotContains(t, errOut, "trying again")

			_, _, err = run(t, nil, command, "--db", db, "--encryption-key", key, "--db-wait", "-1s")
			require.ErrorContains(t, err, "db-wait: -1s is negative")
		})
	}
}

// TestMaxEndpointsPerConsumerReachesTheConfig: serve takes
// --max-endpoints-per-consumer and its twin, and refuses a negative one.
func TestMaxEndpointsPerConsumerReachesTheConfig(t *testing.T) {
	t.Parallel()
	db := "sqlite://" + filepath.Join(t.TempDir(), "m.db")
	_, _, err := run(t, nil, "serve", "--db", db, "--max-endpoints-per-consumer", "-1")
	require.ErrorContains(t, err, "max-endpoints-per-consumer: -1 is not between 0 (no limit) and 1000000")
	_, _, err = run(t, map[string]string{"HERALD_MAX_ENDPOINTS_PER_CONSUMER": "2000000"}, "serve", "--db", db)
	require.ErrorContains(t, err, "max-endpoints-per-consumer: 2000000 is not between")
	_, _, err = run(t, map[string]string{"HERALD_MAX_ENDPOINTS_PER_CONSUMER": "many"}, "serve", "--db", db)
	require.ErrorContains(t, err, "HERALD_MAX_ENDPOINTS_PER_CONSUMER")
}

// TestMaxLeaseLossesReachesTheConfig: serve and worker take
// --max-lease-losses and its twin, and refuse one below 1 (a delivery
// would never be handed out) or one they cannot read.
func TestMaxLeaseLossesReachesTheConfig(t *testing.T) {
	t.Parallel()
	db := "sqlite://" + filepath.Join(t.TempDir(), "l.db")
	_, _, err := run(t, nil, "serve", "--db", db, "--max-lease-losses", "0")
	require.ErrorContains(t, err, "max-lease-losses: 0 is not between 1 and 1000")
	_, _, err = run(t, map[string]string{"HERALD_MAX_LEASE_LOSSES": "1001"}, "worker", "--db", db)
	require.ErrorContains(t, err, "max-lease-losses: 1001 is not between 1 and 1000")
	_, _, err = run(t, map[string]string{"HERALD_MAX_LEASE_LOSSES": "many"}, "serve", "--db", db)
	require.ErrorContains(t, err, "HERALD_MAX_LEASE_LOSSES")
}

// TestRateLimitFlagsReachTheConfig: serve takes --consumer-rate-limit and
// --operator-rate-limit and their twins, refuses one it cannot read, and
// --help says what they take.
func TestRateLimitFlagsReachTheConfig(t *testing.T) {
	t.Parallel()
	db := "sqlite://" + filepath.Join(t.TempDir(), "r.db")
	_, _, err := run(t, nil, "serve", "--db", db, "--consumer-rate-limit", "fast")
	require.ErrorContains(t, err, `consumer-rate-limit: "fast" is not a rate`)
	_, _, err = run(t, map[string]string{"HERALD_OPERATOR_RATE_LIMIT": "5/week"}, "serve", "--db", db)
	require.ErrorContains(t, err, `operator-rate-limit: "5/week": the unit must be s, m or h`)
	_, _, err = run(t, map[string]string{"HERALD_CONSUMER_RATE_LIMIT": "0/s"}, "serve", "--db", db)
	require.ErrorContains(t, err, "consumer-rate-limit:")
	out, _, err := run(t, nil, "serve", "--help")
	require.NoError(t, err)
	require.Contains(t, out, "--consumer-rate-limit string")
	require.Contains(t, out, `(default "50/s")`)
	require.Contains(t, out, "--operator-rate-limit string")
	require.Contains(t, out, `(default "off")`)
}
