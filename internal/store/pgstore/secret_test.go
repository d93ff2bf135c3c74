package pgstore

import (
	"bytes"
	"context"
	"net/url"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/heraldhooks/herald/internal/store"
	"github.com/heraldhooks/herald/internal/store/storetest"
	"github.com/heraldhooks/herald/internal/testdb"
)

// TestSecrets holds the PostgreSQL backend to the cases of secrets sealed
// at rest, each in a schema of its own.
func TestSecrets(t *testing.T) {
	t.Parallel()
	storetest.RunSecrets(t, func(t *testing.T) storetest.SecretsDB {
		url := migrated.URL(t)
		return storetest.NewSecretsDB(opener(url), func(t *testing.T) []byte { return dumpSchema(t, url) })
	})
}

// opener opens the schema of url with the options given.
func opener(url string) func(ctx context.Context, opts ...store.OpenOption) (*Store, error) {
	return func(ctx context.Context, opts ...store.OpenOption) (*Store, error) {
		return Open(ctx, url, nil, opts...)
	}
}

// dumpSchema is a pg_dump of the schema of dbURL: what a backup of the
// database holds.
func dumpSchema(t *testing.T, dbURL string) []byte {
	t.Helper()
	u, err := url.Parse(dbURL)
	require.NoError(t, err)
	q := u.Query()
	schema := q.Get("search_path")
	require.NotEmpty(t, schema)
	q.Del("search_path")
	u.RawQuery = q.Encode()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, pgDump(t), "--dbname", u.String(), "--schema", schema, "--no-owner")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "pg_dump: %s", stderr.String())
	require.Contains(t, string(out), "endpoints", "the dump holds the endpoints table")
	return out
}

// pgDump finds pg_dump (testdb.PostgresDumpPath).
func pgDump(t *testing.T) string {
	t.Helper()
	p, err := testdb.PostgresDumpPath()
	require.NoError(t, err)
	return p
}

// TestPlainSecretsUseTheirIndex: the pass that seals plain secrets, run at
// every start, reads the partial index of plain rows, so it costs nothing
// once none are left, however many endpoints there are.
func TestPlainSecretsUseTheirIndex(t *testing.T) {
	t.Parallel()
	s := openFresh(t)
	conn, err := s.pool.Acquire(t.Context())
	require.NoError(t, err)
	defer conn.Release()
	tx, err := conn.Begin(t.Context())
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(context.Background()) }()
	_, err = tx.Exec(t.Context(), "SET LOCAL enable_seqscan = off")
	require.NoError(t, err)
	rows, err := tx.Query(t.Context(), "EXPLAIN "+resealPlainSQL, "", 100)
	require.NoError(t, err)
	plan, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.Contains(t, strings.Join(plan, "\n"), "endpoints_plain_secrets")
}

// TestMigrateSecretEncryption: an endpoint written before migration 0004
// keeps its plain secret, marked plain; it reads as it is, and once a key
// is given the plain-only pass seals it.
func TestMigrateSecretEncryption(t *testing.T) {
	t.Parallel()
	url := testdb.PostgresURL(t)
	old, err := Open(t.Context(), url, nil)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, old.Close()) })
	ctx := t.Context()
	migrateBelow(t, old, 4)
	_, err = old.pool.Exec(ctx, `
		INSERT INTO endpoints (id, consumer_id, url, description, event_types, secret, previous_secret,
			previous_secret_expires_at, enabled, timeout_ns, retry_client_errors, max_in_flight,
			signature_scheme, created_at, updated_at)
		VALUES ('ep_old', 'c1', 'https://example.com/hook', '', '{*}', $1, $2, $3, true,
			10000000000, false, 0, 'standard', $3, $3)`, storetest.OldSecret, storetest.OldPreviousSecret, t0)
	require.NoError(t, err)

	s := storetest.OpenSecrets(t, storetest.Ring(t), opener(url))
	storetest.RequireOldSecretsResealed(t, s, "ep_old", func() (stored, previous string, sealed bool) {
		require.NoError(t, s.pool.QueryRow(ctx, "SELECT secret, previous_secret, secrets_encrypted FROM endpoints WHERE id = 'ep_old'").
			Scan(&stored, &previous, &sealed))
		return stored, previous, sealed
	})
}

// TestPayloads holds the PostgreSQL backend to the cases of compressed
// payloads, each in a schema of its own.
func TestPayloads(t *testing.T) {
	t.Parallel()
	storetest.RunPayloads(t, func(t *testing.T) storetest.PayloadsDB {
		url := migrated.URL(t)
		return storetest.NewPayloadsDB(opener(url), func(t *testing.T, id string) []byte {
			conn, err := pgx.Connect(t.Context(), url)
			require.NoError(t, err)
			defer conn.Close(context.Background())
			var b []byte
			require.NoError(t, conn.QueryRow(t.Context(), "SELECT payload FROM events WHERE id = $1", id).Scan(&b))
			return b
		})
	})
}
