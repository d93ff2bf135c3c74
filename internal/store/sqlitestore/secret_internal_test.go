package sqlitestore

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/heraldhooks/herald/internal/store"
	"github.com/heraldhooks/herald/internal/store/storetest"
	"github.com/heraldhooks/herald/internal/testdb"
)

// TestSecretEncryptionMigrationKeepsExistingRows: an endpoint written
// before migration 0004 keeps its plain secret, marked plain; it reads as
// it is, and once a key is given the plain-only pass seals it.
func TestSecretEncryptionMigrationKeepsExistingRows(t *testing.T) {
	t.Parallel()
	path := testdb.SQLitePath(t)
	old, err := Open(t.Context(), path, nil)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, old.Close()) })
	ctx := t.Context()
	migrateBelow(t, old, 4)
	_, err = old.writer.ExecContext(ctx, `INSERT INTO endpoints (id, consumer_id, url, description, event_types,
			secret, previous_secret, previous_secret_expires_at, enabled, disabled_reason, timeout_ns, retry_schedule,
			retry_exponential, retry_client_errors, rate_limit, max_in_flight, signature_scheme, headers,
			created_at, updated_at)
		VALUES ('ep_1', 'c', 'https://x.example/', '', '["*"]', ?, ?, 0, 1, '', 0, 'null', 'null', 0, 'null', 0,
			'standard', 'null', 0, 0)`, storetest.OldSecret, storetest.OldPreviousSecret)
	require.NoError(t, err)

	s, err := Open(ctx, path, nil, store.WithSecrets(storetest.Ring(t)))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	require.NoError(t, s.Migrate(ctx))
	storetest.RequireOldSecretsResealed(t, s, "ep_1", func() (stored, previous string, sealed bool) {
		require.NoError(t, s.reader.QueryRowContext(ctx, `SELECT secret, previous_secret, secrets_encrypted FROM endpoints WHERE id = 'ep_1'`).
			Scan(&stored, &previous, &sealed))
		return stored, previous, sealed
	})
}
