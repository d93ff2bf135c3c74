package cli_test

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestRetentionReachesTheConfig: serve and worker take --retention and its
// twin HERALD_RETENTION into the configuration they validate, and the flag
// wins over the twin.
func TestRetentionReachesTheConfig(t *testing.T) {
	t.Parallel()
	for _, command := range []string{"serve", "worker"} {
		t.Run(command, func(t *testing.T) {
			t.Parallel()
			db := "sqlite://" + filepath.Join(t.TempDir(), "r.db")
			_, _, err := run(t, nil, command, "--db", db, "--retention", "-1h")
			require.ErrorContains(t, err, "retention: -1h0m0s is negative")

			_, _, err = run(t, map[string]string{"HERALD_RETENTION": "-2h"}, command, "--db", db)
			require.ErrorContains(t, err, "retention: -2h0m0s is negative")

			_, _, err = run(t, map[string]string{"HERALD_RETENTION": "a month"}, command, "--db", db)
			require.ErrorContains(t, err, "HERALD_RETENTION")

			// A bad log format stops the command before it runs; the
			// retention given by the flag is the one validated.
			_, _, err = run(t, map[string]string{"HERALD_RETENTION": "-2h"}, command, "--db", db,
				"--retention", "0", "--log-format", "xml")
			require.ErrorContains(t, err, "log-format:")
			require.NotContains(t, err.Error(), "retention")
		})
	}
}
