package sqlitestore_test

import (
	"database/sql"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhooks/herald/internal/store"
	"github.com/heraldhooks/herald/internal/store/sqlitestore"
	"github.com/heraldhooks/herald/internal/store/sqlitestore/sqlitetest"
	"github.com/heraldhooks/herald/internal/store/storetest"
)

// TestSecrets holds the SQLite backend to the cases of secrets sealed at
// rest, each on a file of its own.
func TestSecrets(t *testing.T) {
	t.Parallel()
	storetest.RunSecrets(t, func(t *testing.T) storetest.SecretsDB {
		return secretsFile{path: sqlitetest.Path(t)}
	})
}

// secretsFile is one SQLite file, opened as often as a case likes.
type secretsFile struct{ path string }

func (f secretsFile) Open(t *testing.T, c store.SecretCipher) store.Store {
	t.Helper()
	var opts []store.OpenOption
	if c != nil {
		opts = append(opts, store.WithSecrets(c))
	}
	s, err := sqlitestore.Open(t.Context(), f.path, slog.New(slog.DiscardHandler), opts...)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	require.NoError(t, s.Migrate(t.Context()))
	return s
}

// Raw checkpoints the WAL into the file (the stores stay open, as a copy
// taken of a running Herald would find them), then reads the file and
// whatever the WAL and a rollback journal still hold.
func (f secretsFile) Raw(t *testing.T) []byte {
	t.Helper()
	db, err := sql.Open("sqlite", f.path+"?_pragma=busy_timeout(10000)")
	require.NoError(t, err)
	// A checkpoint the store runs meanwhile makes this one give up at once
	// (busy, without waiting): try again until one runs to the end.
	require.Eventually(t, func() bool {
		var busy, logFrames, checkpointed int
		require.NoError(t, db.QueryRow("PRAGMA wal_checkpoint(TRUNCATE)").Scan(&busy, &logFrames, &checkpointed))
		return busy == 0
	}, 10*time.Second, 10*time.Millisecond, "the checkpoint runs to the end")
	require.NoError(t, db.Close())
	var out []byte
	for _, p := range []string{f.path, f.path + "-wal", f.path + "-journal"} {
		b, err := os.ReadFile(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		require.NoError(t, err)
		out = append(out, b...)
	}
	return out
}
