package storetest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhooks/herald"
	"github.com/heraldhooks/herald/internal/keyring"
	"github.com/heraldhooks/herald/internal/store"
	"github.com/heraldhooks/herald/verify"
)

// SecretsDB is one database that the secrets cases open several times,
// each time with a key ring of their own, as a restart with another
// --encryption-key would, and whose raw contents they search.
type SecretsDB interface {
	// Open opens the database with c sealing endpoint secrets (nil: no
	// key) and migrates it. The store is closed when t ends.
	Open(t *testing.T, c store.SecretCipher) store.Store
	// Raw is everything a copy of the database would hold: the SQLite
	// file and its WAL after a checkpoint, or a pg_dump of the schema.
	Raw(t *testing.T) []byte
}

// RunSecrets runs the cases of endpoint secrets sealed at rest against a
// backend. fresh must give a new, empty database each time.
func RunSecrets(t *testing.T, fresh func(t *testing.T) SecretsDB) {
	for _, tc := range []struct {
		name string
		fn   func(t *testing.T, db SecretsDB)
	}{
		{"SecretSurvivesCreateReadRotateClaim", testSecretSurvives},
		{"RingRotatedTwiceThenReencrypted", testRingRotatedTwice},
		{"PlainSecretsAreSealedOnceAKeyIsThere", testPlainSecretsSealed},
		{"ReencryptWhileRotating", testReencryptWhileRotating},
		{"WithoutTheKeyNothingOpens", testWithoutTheKey},
		{"ClientKeySealedResealedCleared", testClientKeySealed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, fresh(t))
		})
	}
}

// OpenSecrets opens a store through open with c sealing endpoint secrets
// (nil: no key), migrates it, and closes it when t ends.
func OpenSecrets[S store.Store](t *testing.T, c store.SecretCipher, open func(ctx context.Context, opts ...store.OpenOption) (S, error)) S {
	t.Helper()
	var opts []store.OpenOption
	if c != nil {
		opts = append(opts, store.WithSecrets(c))
	}
	s, err := open(t.Context(), opts...)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	require.NoError(t, s.Migrate(t.Context()))
	return s
}

// NewSecretsDB is the SecretsDB of a backend's database that open opens
// (OpenSecrets) and raw reads.
func NewSecretsDB[S store.Store](open func(ctx context.Context, opts ...store.OpenOption) (S, error), raw func(t *testing.T) []byte) SecretsDB {
	return secretsDB[S]{open: open, raw: raw}
}

type secretsDB[S store.Store] struct {
	open func(ctx context.Context, opts ...store.OpenOption) (S, error)
	raw  func(t *testing.T) []byte
}

func (d secretsDB[S]) Open(t *testing.T, c store.SecretCipher) store.Store {
	return OpenSecrets(t, c, d.open)
}
func (d secretsDB[S]) Raw(t *testing.T) []byte { return d.raw(t) }

// The plain secrets of an endpoint written before secrets were sealed
// (migration 0004), for RequireOldSecretsResealed.
const (
	OldSecret         = "whsec_b2xkIHNlY3JldCBmcm9tIGJlZm9yZQ=="
	OldPreviousSecret = "whsec_b2xkZXIgc3RpbGw="
)

// RequireOldSecretsResealed requires that endpoint id, written with
// OldSecret and OldPreviousSecret before migration 0004 and now in s
// (opened with a key and migrated), reads as it was, that the plain-only
// pass seals it (raw reads its stored secret and previous secret and
// whether they are sealed), and that it still reads as it was.
func RequireOldSecretsResealed(t *testing.T, s store.Store, id string, raw func() (secret, previous string, sealed bool)) {
	t.Helper()
	ctx := t.Context()
	requireSecrets := func() {
		t.Helper()
		ep, err := s.EndpointGet(ctx, id)
		require.NoError(t, err)
		require.Equal(t, OldSecret, ep.Secret)
		require.Equal(t, OldPreviousSecret, ep.PreviousSecret)
	}
	requireSecrets()
	res, err := s.EndpointSecretsReseal(ctx, &store.EndpointSecretsResealParams{PlainOnly: true})
	require.NoError(t, err)
	require.Equal(t, 1, res.Resealed)
	stored, storedPrevious, sealed := raw()
	require.True(t, sealed)
	require.True(t, strings.HasPrefix(stored, "enc:v1:test:"), stored)
	require.True(t, strings.HasPrefix(storedPrevious, "enc:v1:test:"), storedPrevious)
	requireSecrets()
}

// Ring is a key ring of one fresh key, for a backend's opener: the
// conformance suite runs with endpoint secrets sealed, as Herald does.
func Ring(tb testing.TB) *keyring.Ring {
	tb.Helper()
	entry, err := keyring.Generate("test")
	require.NoError(tb, err)
	r, err := keyring.Parse(entry)
	require.NoError(tb, err)
	return r
}

// testKey is a fresh ring entry "id:<base64>" and its bytes.
type testKey struct {
	entry string
	raw   []byte
}

func newTestKey(t *testing.T, id string) testKey {
	t.Helper()
	entry, err := keyring.Generate(id)
	require.NoError(t, err)
	_, b64, _ := strings.Cut(entry, ":")
	raw, err := base64.StdEncoding.DecodeString(b64)
	require.NoError(t, err)
	return testKey{entry: entry, raw: raw}
}

// ringOf parses a ring of keys, the first sealing.
func ringOf(t *testing.T, keys ...testKey) *keyring.Ring {
	t.Helper()
	entries := make([]string, len(keys))
	for i, k := range keys {
		entries[i] = k.entry
	}
	r, err := keyring.Parse(strings.Join(entries, ","))
	require.NoError(t, err)
	return r
}

// randomSecret is a Standard Webhooks secret no other test shares.
func randomSecret() string {
	var b [24]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	return verify.SecretPrefix + base64.StdEncoding.EncodeToString(b[:])
}

// secretEndpoint creates an endpoint of consumer with a random secret.
func secretEndpoint(t *testing.T, s store.Store, consumer string, now time.Time) *herald.Endpoint {
	t.Helper()
	ep := newEndpoint(consumer)
	ep.Secret = randomSecret()
	got := createEndpoint(t, s, ep, now)
	require.Equal(t, ep.Secret, got.Secret, "create answers the plain secret")
	return got
}

// rotate gives ep a new random secret at now, the old one kept for 24 h.
func rotate(t *testing.T, s store.Store, ep *herald.Endpoint, now time.Time) *herald.Endpoint {
	t.Helper()
	secret := randomSecret()
	got, err := s.EndpointRotateSecret(t.Context(), &store.EndpointRotateSecretParams{
		ID: ep.ID, NewSecret: secret, PreviousValidFor: 24 * time.Hour, Now: now,
	})
	require.NoError(t, err)
	require.Equal(t, secret, got.Secret)
	require.Equal(t, ep.Secret, got.PreviousSecret)
	return got
}

// requireSecrets requires that every endpoint in want reads back, by get,
// by list and (when claim) by a claim, with its secrets as want has them.
func requireSecrets(t *testing.T, s store.Store, now time.Time, claimToo bool, want ...*herald.Endpoint) {
	t.Helper()
	listed := map[string]*herald.Endpoint{}
	page, err := s.EndpointList(t.Context(), &store.EndpointListParams{Limit: store.MaxListLimit})
	require.NoError(t, err)
	for _, ep := range page.Items {
		listed[ep.ID] = ep
	}
	for _, w := range want {
		got, err := s.EndpointGet(t.Context(), w.ID)
		require.NoError(t, err)
		require.Equal(t, w.Secret, got.Secret, "get %s", w.ID)
		require.Equal(t, w.PreviousSecret, got.PreviousSecret, "get %s", w.ID)
		require.Contains(t, listed, w.ID)
		require.Equal(t, w.Secret, listed[w.ID].Secret, "list %s", w.ID)
		require.Equal(t, w.PreviousSecret, listed[w.ID].PreviousSecret, "list %s", w.ID)
		if !claimToo {
			continue
		}
		id := ingestFor(t, s, now, w)
		c := claimOne(t, s, now, id)
		require.Equal(t, w.Secret, c.Endpoint.Secret, "claim %s", w.ID)
		require.Equal(t, w.PreviousSecret, c.Endpoint.PreviousSecret, "claim %s", w.ID)
		requireSigns(t, &c.Endpoint, w, c.Event.ID, now)
		finish(t, s, now, c, herald.StatusDelivered)
	}
}

// requireSigns signs a body as the sender does, with the secrets the claim
// gave (current, and previous while it lasts), and checks each signature
// with the secret the receiver holds: the one given at create or rotate.
func requireSigns(t *testing.T, claimed, want *herald.Endpoint, webhookID string, now time.Time) {
	t.Helper()
	body := []byte(`{"order_id":"o_1"}`)
	pairs := [][2]string{{claimed.Secret, want.Secret}}
	if want.PreviousSecret != "" {
		pairs = append(pairs, [2]string{claimed.PreviousSecret, want.PreviousSecret})
	}
	for _, p := range pairs {
		sig, err := verify.SignStandard(p[0], webhookID, now.Unix(), body)
		require.NoError(t, err)
		h := http.Header{}
		h.Set("webhook-id", webhookID)
		h.Set("webhook-timestamp", strconv.FormatInt(now.Unix(), 10))
		h.Set("webhook-signature", sig)
		require.NoError(t, verify.VerifyStandard(p[1], h, body, now, time.Minute), "signature of endpoint %s", want.ID)
	}
}

// requireNothingRevealed searches a database's raw contents for every
// secret (whole, its base64 key, and the key's bytes) and every key of the
// ring (bytes and base64): a copy of the database alone reveals none.
func requireNothingRevealed(t *testing.T, raw []byte, secrets []string, keys ...testKey) {
	t.Helper()
	require.NotEmpty(t, raw)
	for _, s := range secrets {
		require.False(t, bytes.Contains(raw, []byte(s)), "the database holds a secret in plain")
		b64 := strings.TrimPrefix(s, verify.SecretPrefix)
		require.False(t, bytes.Contains(raw, []byte(b64)), "the database holds a secret's base64 key")
		key, err := base64.StdEncoding.DecodeString(b64)
		require.NoError(t, err)
		require.False(t, bytes.Contains(raw, key), "the database holds a secret's key bytes")
	}
	for _, k := range keys {
		require.False(t, bytes.Contains(raw, k.raw), "the database holds an encryption key")
		require.False(t, bytes.Contains(raw, []byte(k.entry)), "the database holds an encryption key")
	}
}

// secretsOf lists the secrets (current and previous) of eps.
func secretsOf(eps ...*herald.Endpoint) []string {
	var out []string
	for _, ep := range eps {
		for _, s := range []string{ep.Secret, ep.PreviousSecret} {
			if s != "" {
				out = append(out, s)
			}
		}
	}
	return out
}

// keyCounts is EndpointSecretKeys as key id → values, every sample opened.
func keyCounts(t *testing.T, s store.Store) map[string]int64 {
	t.Helper()
	uses, err := s.EndpointSecretKeys(t.Context())
	require.NoError(t, err)
	out := map[string]int64{}
	for _, u := range uses {
		require.NoError(t, u.SampleErr, "key %q", u.KeyID)
		require.NotEmpty(t, u.SampleEndpointID)
		out[u.KeyID] = u.Values
	}
	return out
}

// reseal runs EndpointSecretsReseal in batches of batch until the last,
// and returns how many endpoints it wrote and found changed.
func reseal(t *testing.T, s store.Store, batch int, plainOnly bool) (resealed, changed int) {
	t.Helper()
	after := ""
	for range 10000 {
		res, err := s.EndpointSecretsReseal(t.Context(), &store.EndpointSecretsResealParams{
			After: after, Limit: batch, PlainOnly: plainOnly,
		})
		require.NoError(t, err)
		require.LessOrEqual(t, res.Resealed+res.Changed, batch)
		resealed += res.Resealed
		changed += res.Changed
		if res.Next == "" {
			return resealed, changed
		}
		require.Greater(t, res.Next, after)
		after = res.Next
	}
	require.FailNow(t, "re-encryption never ended")
	return 0, 0
}

// testSecretSurvives: under a key, a secret reads back plain through
// create, get, list, update, enable/disable, rotate and claim; signatures
// made with it verify with the secret the receiver holds; and none of it
// is in the database's raw contents.
func testSecretSurvives(t *testing.T, db SecretsDB) {
	k1 := newTestKey(t, "k1")
	s := db.Open(t, ringOf(t, k1))
	a := secretEndpoint(t, s, "c1", at(0))
	b := secretEndpoint(t, s, "c2", at(0))
	withPrevious := newEndpoint("c3")
	withPrevious.Secret, withPrevious.PreviousSecret = randomSecret(), randomSecret()
	expires := at(time.Hour)
	withPrevious.PreviousSecretExpiresAt = &expires
	c := createEndpoint(t, s, withPrevious, at(0))
	require.Equal(t, withPrevious.PreviousSecret, c.PreviousSecret)
	requireSecrets(t, s, at(time.Second), true, a, b, c)

	upd := *a
	upd.Description = "changed"
	got, err := s.EndpointUpdate(t.Context(), &store.EndpointUpdateParams{Endpoint: &upd, Now: at(time.Minute)})
	require.NoError(t, err)
	require.Equal(t, a.Secret, got.Secret)
	got = disableEndpoint(t, s, b.ID, at(time.Minute))
	require.Equal(t, b.Secret, got.Secret)
	got, err = s.EndpointSetEnabled(t.Context(), &store.EndpointSetEnabledParams{ID: b.ID, Enabled: true, Now: at(time.Minute)})
	require.NoError(t, err)
	require.Equal(t, b.Secret, got.Secret)

	a2 := rotate(t, s, a, at(2*time.Minute))
	requireSecrets(t, s, at(3*time.Minute), true, a2, b, c)
	a3 := rotate(t, s, a2, at(4*time.Minute))
	requireSecrets(t, s, at(5*time.Minute), true, a3, b, c)

	require.Equal(t, map[string]int64{"k1": 5}, keyCounts(t, s))
	requireNothingRevealed(t, db.Raw(t), secretsOf(a, a2, a3, b, c), k1)
}

// testRingRotatedTwice: the ring goes k1 → k2,k1 → k3,k2,k1 with secrets
// written and rotated under each; every secret reads throughout; a ring
// without k1 names the key it lacks; re-encryption moves every value to k3,
// and k1 and k2 can then be dropped.
func testRingRotatedTwice(t *testing.T, db SecretsDB) {
	k1, k2, k3 := newTestKey(t, "k1"), newTestKey(t, "k2"), newTestKey(t, "k3")

	s1 := db.Open(t, ringOf(t, k1))
	a := rotate(t, s1, secretEndpoint(t, s1, "c1", at(0)), at(time.Minute)) // both under k1
	b := secretEndpoint(t, s1, "c2", at(0))
	requireSecrets(t, s1, at(2*time.Minute), true, a, b)
	require.Equal(t, map[string]int64{"k1": 3}, keyCounts(t, s1))

	s2 := db.Open(t, ringOf(t, k2, k1))
	requireSecrets(t, s2, at(3*time.Minute), true, a, b)
	c := secretEndpoint(t, s2, "c3", at(3*time.Minute)) // under k2
	b = rotate(t, s2, b, at(4*time.Minute))             // k2, previous under k1
	requireSecrets(t, s2, at(5*time.Minute), true, a, b, c)
	require.Equal(t, map[string]int64{"k1": 3, "k2": 2}, keyCounts(t, s2))

	// A node given only the newest key cannot read what k1 sealed, and
	// says which key it lacks.
	short := db.Open(t, ringOf(t, k2))
	_, err := short.EndpointGet(t.Context(), a.ID)
	var unknown *keyring.UnknownKeyError
	require.ErrorAs(t, err, &unknown)
	require.Equal(t, "k1", unknown.KeyID)
	require.ErrorContains(t, err, a.ID)
	uses, err := short.EndpointSecretKeys(t.Context())
	require.NoError(t, err)
	for _, u := range uses {
		if u.KeyID == "k1" {
			require.ErrorAs(t, u.SampleErr, &unknown)
		} else {
			require.NoError(t, u.SampleErr)
		}
	}

	s3 := db.Open(t, ringOf(t, k3, k2, k1))
	requireSecrets(t, s3, at(6*time.Minute), true, a, b, c)
	d := secretEndpoint(t, s3, "c4", at(6*time.Minute)) // under k3
	a = rotate(t, s3, a, at(7*time.Minute))             // k3, previous under k1
	requireSecrets(t, s3, at(8*time.Minute), true, a, b, c, d)
	require.Equal(t, map[string]int64{"k1": 2, "k2": 2, "k3": 2}, keyCounts(t, s3))

	resealed, changed := reseal(t, s3, 2, false)
	require.Equal(t, 3, resealed, "a (previous under k1), b and c; d was under k3 already")
	require.Zero(t, changed)
	require.Equal(t, map[string]int64{"k3": 6}, keyCounts(t, s3))
	resealed, _ = reseal(t, s3, 2, false)
	require.Zero(t, resealed, "a second pass finds nothing to do")

	// The older keys can go.
	only := db.Open(t, ringOf(t, k3))
	requireSecrets(t, only, at(9*time.Minute), true, a, b, c, d)
	require.Equal(t, map[string]int64{"k3": 6}, keyCounts(t, only))
	e := rotate(t, only, d, at(10*time.Minute))
	requireSecrets(t, only, at(11*time.Minute), true, a, b, c, e)
	requireNothingRevealed(t, db.Raw(t), secretsOf(a, b, c, d, e), k1, k2, k3)
}

// testPlainSecretsSealed: secrets written without a key (a database from
// before encryption) read as they are once a key is given; the plain-only
// pass seals them all, in batches, once (a second pass does nothing, and
// it leaves values under older keys alone); nothing plain is left in the
// database.
func testPlainSecretsSealed(t *testing.T, db SecretsDB) {
	plain := db.Open(t, nil)
	var eps []*herald.Endpoint
	for i := range 5 {
		eps = append(eps, secretEndpoint(t, plain, "c"+strconv.Itoa(i), at(0)))
	}
	eps[0] = rotate(t, plain, eps[0], at(time.Minute))
	gone := secretEndpoint(t, plain, "gone", at(0))
	require.NoError(t, plain.EndpointDelete(t.Context(), &store.EndpointDeleteParams{ID: gone.ID, Now: at(time.Minute)}))
	require.Equal(t, map[string]int64{"": 6}, keyCounts(t, plain))
	_, err := plain.EndpointSecretsReseal(t.Context(), &store.EndpointSecretsResealParams{PlainOnly: true})
	require.ErrorIs(t, err, store.ErrNoKey)

	k1, k2 := newTestKey(t, "k1"), newTestKey(t, "k2")
	s := db.Open(t, ringOf(t, k1))
	requireSecrets(t, s, at(2*time.Minute), false, eps...)
	resealed, changed := reseal(t, s, 2, true)
	require.GreaterOrEqual(t, resealed, 5, "every endpoint with a plain secret (a deleted one may count too)")
	require.Zero(t, changed)
	require.Equal(t, map[string]int64{"k1": 6}, keyCounts(t, s))
	resealed, _ = reseal(t, s, 2, true)
	require.Zero(t, resealed, "sealing plain secrets is done once")
	requireSecrets(t, s, at(3*time.Minute), true, eps...)

	// The plain-only pass leaves sealed values alone, whatever their key.
	s2 := db.Open(t, ringOf(t, k2, k1))
	resealed, _ = reseal(t, s2, 2, true)
	require.Zero(t, resealed)
	require.Equal(t, map[string]int64{"k1": 6}, keyCounts(t, s2))

	requireNothingRevealed(t, db.Raw(t), secretsOf(append(eps, gone)...), k1, k2)
}

// testReencryptWhileRotating: re-encryption runs while secrets rotate
// beside it; no rotation is lost (every endpoint reads its last secret),
// and once both are done, a last pass leaves every value under the newest
// key.
func testReencryptWhileRotating(t *testing.T, db SecretsDB) {
	k1, k2 := newTestKey(t, "k1"), newTestKey(t, "k2")
	s1 := db.Open(t, ringOf(t, k1))
	eps := make([]*herald.Endpoint, 40)
	for i := range eps {
		eps[i] = secretEndpoint(t, s1, "c"+strconv.Itoa(i%4), at(0))
	}

	rotator := db.Open(t, ringOf(t, k2, k1))
	sealer := db.Open(t, ringOf(t, k2, k1))
	// Both sides run on goroutines of their own, so they report errors
	// rather than stop the test.
	var wg sync.WaitGroup
	var rotateErr, resealErr error
	wg.Go(func() {
		for round := range 3 {
			for i, ep := range eps {
				if i%2 != round%2 {
					continue
				}
				got, err := rotator.EndpointRotateSecret(t.Context(), &store.EndpointRotateSecretParams{
					ID: ep.ID, NewSecret: randomSecret(), PreviousValidFor: 24 * time.Hour,
					Now: at(time.Duration(round+1) * time.Minute),
				})
				if err != nil {
					rotateErr = err
					return
				}
				eps[i] = got
			}
		}
	})
	wg.Go(func() {
		for range 3 {
			after := ""
			for {
				res, err := sealer.EndpointSecretsReseal(t.Context(), &store.EndpointSecretsResealParams{After: after, Limit: 3})
				if err != nil {
					resealErr = err
					return
				}
				if res.Next == "" {
					break
				}
				after = res.Next
			}
		}
	})
	wg.Wait()
	require.NoError(t, rotateErr)
	require.NoError(t, resealErr)
	reseal(t, sealer, 3, false)
	require.Equal(t, map[string]int64{"k2": 80}, keyCounts(t, sealer))
	requireSecrets(t, db.Open(t, ringOf(t, k2)), at(time.Hour), false, eps...)
}

// testWithoutTheKey: a store given no key cannot read, rotate or
// re-encrypt sealed secrets, and says a key is missing.
func testWithoutTheKey(t *testing.T, db SecretsDB) {
	k1 := newTestKey(t, "k1")
	s := db.Open(t, ringOf(t, k1))
	ep := secretEndpoint(t, s, "c1", at(0))

	none := db.Open(t, nil)
	_, err := none.EndpointGet(t.Context(), ep.ID)
	require.ErrorIs(t, err, store.ErrNoKey)
	_, err = none.EndpointList(t.Context(), &store.EndpointListParams{})
	require.ErrorIs(t, err, store.ErrNoKey)
	_, err = none.EndpointRotateSecret(t.Context(), &store.EndpointRotateSecretParams{ID: ep.ID, NewSecret: randomSecret(), Now: at(time.Minute)})
	require.ErrorIs(t, err, store.ErrNoKey)
	_, err = none.EndpointSecretsReseal(t.Context(), &store.EndpointSecretsResealParams{})
	require.ErrorIs(t, err, store.ErrNoKey)
	uses, err := none.EndpointSecretKeys(t.Context())
	require.NoError(t, err)
	require.Len(t, uses, 1)
	require.Equal(t, "k1", uses[0].KeyID)
	require.True(t, errors.Is(uses[0].SampleErr, store.ErrNoKey))

	// The failed rotation changed nothing.
	requireSecrets(t, s, at(time.Hour), true, ep)
}
