package cli_test

import (
	"context"
	"encoding/base64"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhooks/herald"
	"github.com/heraldhooks/herald/internal/app"
	"github.com/heraldhooks/herald/internal/cli"
	"github.com/heraldhooks/herald/internal/keyring"
	"github.com/heraldhooks/herald/internal/store"
	"github.com/heraldhooks/herald/internal/syncbuf"
	"github.com/heraldhooks/herald/internal/testdb"
)

// TestSQLiteWithoutAKeyMakesAKeyFile: with no --encryption-key, a SQLite
// database gets a key file beside it (mode 0600), made once and said so in
// one log line; later starts use it and say which file they use.
func TestSQLiteWithoutAKeyMakesAKeyFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := filepath.Join(dir, "herald.db")
	keyFile := db + ".key"

	// A worker starts on the new database and makes the key file.
	errb := runWorkerUntil(t, "sqlite://"+db, "herald worker running")
	made := regexp.MustCompile(`level=WARN msg="made the key that encrypts endpoint secrets: back it up with the database, but keep it apart from copies of the database[^"]*" key_file=(\S+)`)
	m := made.FindStringSubmatch(errb)
	require.NotNil(t, m, "no log line names the key file: %s", errb)
	require.Equal(t, keyFile, m[1])
	require.Equal(t, 1, strings.Count(errb, "made the key"), "one line")
	st, err := os.Stat(keyFile)
	require.NoError(t, err)
	require.Equal(t, fs.FileMode(0o600), st.Mode().Perm())
	before, err := os.ReadFile(keyFile)
	require.NoError(t, err)
	ring, err := keyring.ReadFile(keyFile)
	require.NoError(t, err)
	require.Equal(t, []string{keyring.FileID}, ring.IDs())

	// Later starts (migrate too) use it and never replace it.
	_, errOut, err := run(t, nil, "migrate", "--db", "sqlite://"+db)
	require.NoError(t, err)
	require.NotContains(t, errOut, "made the key")
	require.Contains(t, errOut, `msg="endpoint secrets are encrypted with the key file beside the database" key_file=`+keyFile)
	after, err := os.ReadFile(keyFile)
	require.NoError(t, err)
	require.Equal(t, before, after)
	require.NotContains(t, errOut, strings.TrimSpace(lastLine(string(before))), "the key is never logged")
}

// TestSQLiteKeyFileLostRefusesToStart: a database whose secrets are sealed
// does not get a new key when its key file is gone: nothing would open
// them. Herald says what is missing.
func TestSQLiteKeyFileLostRefusesToStart(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "herald.db")
	_, _, err := run(t, nil, "migrate", "--db", "sqlite://"+db)
	require.NoError(t, err)
	createEndpoint(t, "sqlite://"+db, "whsec_dGhpcyBpcyB0aGUgc2VjcmV0IGtleSAxMjM0")
	require.NoError(t, os.Remove(db+".key"))

	_, _, err = run(t, nil, "migrate", "--db", "sqlite://"+db)
	require.ErrorContains(t, err, "encrypted under key k1, but its key file "+db+".key is missing")
	_, err = os.Stat(db + ".key")
	require.ErrorIs(t, err, fs.ErrNotExist, "no new key was made")
}

// TestPostgresWithoutAKeyRefusesToStart: serve and worker on PostgreSQL
// need --encryption-key, and say how to make one; migrate applies the
// schema without it.
func TestPostgresWithoutAKeyRefusesToStart(t *testing.T) {
	t.Parallel()
	db := testdb.PostgresURL(t)
	for _, args := range [][]string{
		{"serve", "--db", db, "--addr", "127.0.0.1:0"},
		{"worker", "--db", db},
	} {
		_, _, err := run(t, nil, args...)
		require.ErrorIs(t, err, app.ErrNoEncryptionKey, args[0])
		require.ErrorContains(t, err, "herald secrets keygen")
		require.ErrorContains(t, err, "HERALD_ENCRYPTION_KEY")
	}
	out, _, err := run(t, nil, "migrate", "--db", db)
	require.NoError(t, err)
	require.Contains(t, out, "up to date")
}

// TestPlainSecretsAreEncryptedAtStart: a database written before
// encryption has its secrets sealed once a key is there (migrate here;
// serve and worker alike), and they read as before.
func TestPlainSecretsAreEncryptedAtStart(t *testing.T) {
	t.Parallel()
	backends(t, func(t *testing.T, db string) {
		ctx := context.Background()
		st, err := app.OpenStore(ctx, db, nil) // no key: secrets kept plain
		require.NoError(t, err)
		require.NoError(t, st.Migrate(ctx))
		var ids []string
		for i := range 3 {
			ep, err := st.EndpointCreate(ctx, &store.EndpointCreateParams{Endpoint: &herald.Endpoint{
				ConsumerID: "c1", URL: "https://example.com/" + string(rune('a'+i)), EventTypes: []string{"*"},
				Enabled: true, Secret: "whsec_cGxhaW4gc2VjcmV0IGZyb20gYmVmb3Jl", SignatureScheme: herald.SchemeStandard,
			}})
			require.NoError(t, err)
			ids = append(ids, ep.ID)
		}
		require.NoError(t, st.Close())

		key := newKey(t, "k1")
		_, errOut, err := run(t, nil, "migrate", "--db", db, "--encryption-key", key)
		require.NoError(t, err)
		require.Contains(t, errOut, `msg="encrypted the endpoint secrets stored unencrypted" count=3 key_id=k1`)
		_, errOut, err = run(t, nil, "migrate", "--db", db, "--encryption-key", key)
		require.NoError(t, err)
		require.NotContains(t, errOut, "encrypted the endpoint secrets", "once is enough")

		uses := secretKeys(t, db, key)
		require.Len(t, uses, 1)
		require.Equal(t, "k1", uses[0].KeyID)
		require.EqualValues(t, 3, uses[0].Values)
		requireReads(t, db, key, ids, "whsec_cGxhaW4gc2VjcmV0IGZyb20gYmVmb3Jl")
	})
}

// TestKeygen prints keys as --encryption-key takes them.
func TestKeygen(t *testing.T) {
	t.Parallel()
	out, _, err := run(t, nil, "secrets", "keygen")
	require.NoError(t, err)
	require.Regexp(t, `^k1:[A-Za-z0-9+/]{43}=\n$`, out)
	again, _, err := run(t, nil, "secrets", "keygen")
	require.NoError(t, err)
	require.NotEqual(t, out, again)
	raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(out)[3:])
	require.NoError(t, err)
	require.Len(t, raw, 32)

	out, _, err = run(t, nil, "secrets", "keygen", "--key-id", "2026-06")
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(out, "2026-06:"), out)
	_, err = keyring.Parse(strings.TrimSpace(out))
	require.NoError(t, err)

	_, _, err = run(t, nil, "secrets", "keygen", "--key-id", "k:1")
	require.ErrorContains(t, err, "key-id:")
}

// TestReencrypt: after the ring k1 -> k2,k1, reencrypt moves every secret
// to k2 with progress lines and a final count, and k1 can then go; with a
// key missing from the ring it stops and names it.
func TestReencrypt(t *testing.T) {
	t.Parallel()
	backends(t, func(t *testing.T, db string) {
		k1, k2 := newKey(t, "k1"), newKey(t, "k2")
		_, _, err := run(t, nil, "migrate", "--db", db, "--encryption-key", k1)
		require.NoError(t, err)
		var ids []string
		for range 7 {
			ids = append(ids, createEndpointWith(t, db, k1, "whsec_cm90YXRlIG1lIHBsZWFzZSwgMTIzNDU2Nzg5"))
		}

		_, _, err = run(t, nil, "secrets", "reencrypt", "--db", db, "--encryption-key", k2)
		require.ErrorContains(t, err, `key "k1", which the key ring (k2) does not hold`)

		out, _, err := run(t, map[string]string{"HERALD_ENCRYPTION_KEY": k2 + "," + k1}, "secrets", "reencrypt", "--db", db, "--batch", "3")
		require.NoError(t, err)
		require.Contains(t, out, "re-encrypting endpoint secrets under key k2, 3 endpoints a batch\n")
		require.Contains(t, out, "re-encrypted 7 endpoints; 7 secret values are under key k2\n")
		require.Contains(t, out, "no secret is under k1 any more: it can be dropped from --encryption-key\n")
		require.NotContains(t, out, k1[3:])
		require.NotContains(t, out, k2[3:])

		out, _, err = run(t, nil, "secrets", "reencrypt", "--db", db, "--encryption-key", k2)
		require.NoError(t, err)
		require.Contains(t, out, "re-encrypted 0 endpoints; 7 secret values are under key k2\n")
		requireReads(t, db, k2, ids, "whsec_cm90YXRlIG1lIHBsZWFzZSwgMTIzNDU2Nzg5")

		_, _, err = run(t, nil, "secrets", "reencrypt", "--db", db, "--encryption-key", k2, "--batch", "0")
		require.ErrorContains(t, err, "batch: 0 is not between 1 and 1000")
	})
}

// backends runs fn on a fresh SQLite file and a fresh PostgreSQL schema.
func backends(t *testing.T, fn func(t *testing.T, db string)) {
	t.Run("SQLite", func(t *testing.T) {
		t.Parallel()
		fn(t, "sqlite://"+testdb.SQLitePath(t))
	})
	t.Run("PostgreSQL", func(t *testing.T) {
		t.Parallel()
		fn(t, testdb.PostgresURL(t))
	})
}

// newKey is a fresh ring entry id:<base64>.
func newKey(t *testing.T, id string) string {
	t.Helper()
	k, err := keyring.Generate(id)
	require.NoError(t, err)
	return k
}

// openWith opens db's store with the ring key (or its key file when "").
func openWith(t *testing.T, db, key string) store.Store {
	t.Helper()
	ctx := context.Background()
	ring, err := app.KeyRing(ctx, db, key, true, nil)
	require.NoError(t, err)
	st, err := app.OpenStore(ctx, db, nil, store.WithSecrets(ring))
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	require.NoError(t, st.Migrate(ctx))
	return st
}

// createEndpoint creates an endpoint with secret in db, sealed with its
// key file.
func createEndpoint(t *testing.T, db, secret string) string {
	t.Helper()
	return createEndpointWith(t, db, "", secret)
}

// createEndpointWith creates an endpoint with secret in db, sealed with key.
func createEndpointWith(t *testing.T, db, key, secret string) string {
	t.Helper()
	st := openWith(t, db, key)
	ep, err := st.EndpointCreate(context.Background(), &store.EndpointCreateParams{Endpoint: &herald.Endpoint{
		ConsumerID: "c1", URL: "https://example.com/hooks", EventTypes: []string{"*"}, Enabled: true,
		Secret: secret, SignatureScheme: herald.SchemeStandard,
	}})
	require.NoError(t, err)
	return ep.ID
}

// secretKeys counts db's secret values by key, read with the ring key.
func secretKeys(t *testing.T, db, key string) []store.SecretKeyUse {
	t.Helper()
	uses, err := openWith(t, db, key).EndpointSecretKeys(context.Background())
	require.NoError(t, err)
	return uses
}

// requireReads requires that every endpoint of ids reads secret with key.
func requireReads(t *testing.T, db, key string, ids []string, secret string) {
	t.Helper()
	st := openWith(t, db, key)
	for _, id := range ids {
		ep, err := st.EndpointGet(context.Background(), id)
		require.NoError(t, err)
		require.Equal(t, secret, ep.Secret)
	}
}

// runWorkerUntil runs `herald worker --db db` until its log says want,
// stops it, and returns the log.
func runWorkerUntil(t *testing.T, db, want string) string {
	t.Helper()
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	var out, errb syncbuf.Buffer
	done := make(chan error, 1)
	go func() {
		cmd := cli.New(cli.IO{Out: &out, Err: &errb, Getenv: func(string) string { return "" }})
		cmd.SetArgs([]string{"worker", "--db", db})
		done <- cmd.ExecuteContext(ctx)
	}()
	require.Eventually(t, func() bool { return strings.Contains(errb.String(), want) },
		30*time.Second, 10*time.Millisecond, "the worker never logged %q: %s", want, errb.String())
	stopAndWait(t, stop, done)
	return errb.String()
}

// lastLine is the last non-empty line of s.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}
