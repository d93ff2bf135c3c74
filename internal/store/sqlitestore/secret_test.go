package sqlitestore_test

import (
	"context"
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
		path := sqlitetest.Path(t)
		open := func(ctx context.Context, opts ...store.OpenOption) (*sqlitestore.Store, error) {
			return sqlitestore.Open(ctx, path, slog.New(slog.DiscardHandler), opts...)
		}
		return storetest.NewSecretsDB(open, func(t *testing.T) []byte { return rawFile(t, path) })
	})
}

// rawFile checkpoints the WAL into the file at path (the stores stay
// open, as a copy taken of a running Herald would find them), then reads
// the file and whatever the WAL and a rollback journal still hold.
func rawFile(t *testing.T, path string) []byte {
	t.Helper()
	db, err := sql.Open("sqlite", path+"?_pragma=busy_timeout(10000)")
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
	for _, p := range []string{path, path + "-wal", path + "-journal"} {
		b, err := os.ReadFile(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		require.NoError(t, err)
		out = append(out, b...)
	}
	return out
}

// TestPayloads holds the SQLite backend to the cases of compressed
// payloads, each on a file of its own.
func TestPayloads(t *testing.T) {
	t.Parallel()
	storetest.RunPayloads(t, func(t *testing.T) storetest.PayloadsDB {
		path := sqlitetest.Path(t)
		open := func(ctx context.Context, opts ...store.OpenOption) (*sqlitestore.Store, error) {
			return sqlitestore.Open(ctx, path, slog.New(slog.DiscardHandler), opts...)
		}
		return storetest.NewPayloadsDB(open, func(t *testing.T, id string) []byte {
			db, err := sql.Open("sqlite", path+"?_pragma=busy_timeout(10000)")
			require.NoError(t, err)
			defer db.Close()
			var b []byte
			require.NoError(t, db.QueryRowContext(t.Context(), "SELECT payload FROM events WHERE id = ?", id).Scan(&b))
			return b
		})
	})
}
