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
		return secretsSchema{url: migrated.URL(t)}
	})
}

// secretsSchema is one schema, opened as often as a case likes.
type secretsSchema struct{ url string }

func (d secretsSchema) Open(t *testing.T, c store.SecretCipher) store.Store {
	t.Helper()
	var opts []store.OpenOption
	if c != nil {
		opts = append(opts, store.WithSecrets(c))
	}
	s, err := Open(t.Context(), d.url, nil, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	require.NoError(t, s.Migrate(t.Context()))
	return s
}

// Raw is a pg_dump of the schema: what a backup of the database holds.
func (d secretsSchema) Raw(t *testing.T) []byte {
	t.Helper()
	u, err := url.Parse(d.url)
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
	const secret, previous = "whsec_b2xkIHNlY3JldCBmcm9tIGJlZm9yZQ==", "whsec_b2xkZXIgc3RpbGw="
	_, err = old.pool.Exec(ctx, `
		INSERT INTO endpoints (id, consumer_id, url, description, event_types, secret, previous_secret,
			previous_secret_expires_at, enabled, timeout_ns, retry_client_errors, max_in_flight,
			signature_scheme, created_at, updated_at)
		VALUES ('ep_old', 'c1', 'https://example.com/hook', '', '{*}', $1, $2, $3, true,
			10000000000, false, 0, 'standard', $3, $3)`, secret, previous, t0)
	require.NoError(t, err)

	s, err := Open(ctx, url, nil, store.WithSecrets(storetest.Ring(t)))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	require.NoError(t, s.Migrate(ctx))
	ep, err := s.EndpointGet(ctx, "ep_old")
	require.NoError(t, err)
	require.Equal(t, secret, ep.Secret)
	require.Equal(t, previous, ep.PreviousSecret)

	res, err := s.EndpointSecretsReseal(ctx, &store.EndpointSecretsResealParams{PlainOnly: true})
	require.NoError(t, err)
	require.Equal(t, 1, res.Resealed)
	var stored, storedPrevious string
	var sealed bool
	require.NoError(t, s.pool.QueryRow(ctx, "SELECT secret, previous_secret, secrets_encrypted FROM endpoints WHERE id = 'ep_old'").
		Scan(&stored, &storedPrevious, &sealed))
	require.True(t, sealed)
	require.True(t, strings.HasPrefix(stored, "enc:v1:test:"), stored)
	require.True(t, strings.HasPrefix(storedPrevious, "enc:v1:test:"), storedPrevious)
	ep, err = s.EndpointGet(ctx, "ep_old")
	require.NoError(t, err)
	require.Equal(t, secret, ep.Secret)
	require.Equal(t, previous, ep.PreviousSecret)
}
