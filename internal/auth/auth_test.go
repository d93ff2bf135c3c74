package auth_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhooks/herald"
	"github.com/heraldhooks/herald/internal/auth"
	"github.com/heraldhooks/herald/internal/clock"
	"github.com/heraldhooks/herald/internal/store"
	"github.com/heraldhooks/herald/internal/store/sqlitestore"
	"github.com/heraldhooks/herald/internal/store/sqlitestore/sqlitetest"
)

var start = time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)

const operatorKey = "hk_configured_operator_key"

// setup opens a fresh SQLite store and an Authenticator over it, whose
// configured operator key is operatorKey.
func setup(t *testing.T, wrap func(store.APIKeyStore) store.APIKeyStore) (*auth.Authenticator, store.Store, *clock.Test) {
	t.Helper()
	st, err := sqlitestore.Open(t.Context(), sqlitetest.Path(t), nil)
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	require.NoError(t, st.Migrate(t.Context()))
	clk := clock.NewTest(start)
	var keys store.APIKeyStore = st
	if wrap != nil {
		keys = wrap(st)
	}
	return auth.New(auth.Config{Keys: keys, OperatorKeyHash: sha256.Sum256([]byte(operatorKey)), Clock: clk}), st, clk
}

// makeKey stores a new key of scope for consumer and returns it with its
// secret.
func makeKey(t *testing.T, st store.Store, scope herald.Scope, consumer string) (*herald.APIKey, string) {
	t.Helper()
	secret, err := auth.NewKey()
	require.NoError(t, err)
	k, err := st.APIKeyCreate(t.Context(), &store.APIKeyCreateParams{Key: &herald.APIKey{
		Name: "test", Scope: scope, ConsumerID: consumer, Hash: auth.Hash(secret), Prefix: auth.Prefix(secret),
	}, Now: start})
	require.NoError(t, err)
	return k, secret
}

func TestNewKey(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	for range 100 {
		k, err := auth.NewKey()
		require.NoError(t, err)
		require.Regexp(t, `^hk_[A-Za-z0-9_-]{43}$`, k, "32 random bytes")
		require.False(t, seen[k])
		seen[k] = true
		require.Equal(t, k[:12], auth.Prefix(k))
		require.Equal(t, sha256.Sum256([]byte(k)), auth.Hash(k))
	}
	require.Equal(t, "hk_", auth.Prefix("hk_"))
}

func TestPrincipalReaches(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		p        auth.Principal
		consumer string
		want     bool
	}{
		{"OperatorReachesAny", auth.Operator(""), "cust_1", true},
		{"OperatorReachesDefault", auth.Operator("key_1"), herald.DefaultConsumerID, true},
		{"ConsumerReachesItsOwn", auth.Consumer("cust_1", "key_2"), "cust_1", true},
		{"ConsumerNotAnother", auth.Consumer("cust_1", "key_2"), "cust_2", false},
		{"ConsumerNotAPrefix", auth.Consumer("cust_1", "key_2"), "cust_10", false},
		{"ConsumerNotEmpty", auth.Consumer("cust_1", "key_2"), "", false},
		{"EmptyConsumerReachesNothing", auth.Consumer("", "key_3"), "", false},
		{"ZeroPrincipalReachesNothing", auth.Principal{}, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tc.want, tc.p.Reaches(tc.consumer))
		})
	}
	p, ok := auth.FromContext(auth.WithPrincipal(context.Background(), auth.Consumer("c", "key_1")))
	require.True(t, ok)
	require.Equal(t, auth.Consumer("c", "key_1"), p)
	_, ok = auth.FromContext(context.Background())
	require.False(t, ok)
}

func TestAuthenticate(t *testing.T) {
	t.Parallel()

	t.Run("ConfiguredOperatorKey", func(t *testing.T) {
		t.Parallel()
		a, _, _ := setup(t, nil)
		p, err := a.Authenticate(t.Context(), operatorKey)
		require.NoError(t, err)
		require.Equal(t, auth.Operator(""), p)
		require.True(t, p.IsOperator())
	})

	t.Run("StoredKeys", func(t *testing.T) {
		t.Parallel()
		a, st, _ := setup(t, nil)
		op, opSecret := makeKey(t, st, herald.ScopeOperator, "")
		cons, consSecret := makeKey(t, st, herald.ScopeConsumer, "cust_42")
		p, err := a.Authenticate(t.Context(), opSecret)
		require.NoError(t, err)
		require.Equal(t, auth.Operator(op.ID), p)
		p, err = a.Authenticate(t.Context(), consSecret)
		require.NoError(t, err)
		require.Equal(t, auth.Consumer("cust_42", cons.ID), p)
		require.False(t, p.IsOperator())
	})

	t.Run("UnknownAndRevokedKeysAreInvalid", func(t *testing.T) {
		t.Parallel()
		a, st, _ := setup(t, nil)
		k, secret := makeKey(t, st, herald.ScopeConsumer, "cust_42")
		for _, bad := range []string{"", "hk_", secret + "x", secret[:len(secret)-1], operatorKey + " "} {
			_, err := a.Authenticate(t.Context(), bad)
			require.ErrorIs(t, err, auth.ErrInvalidKey, "%q", bad)
		}
		_, err := a.Authenticate(t.Context(), secret)
		require.NoError(t, err)
		require.NoError(t, st.APIKeyRevoke(t.Context(), &store.APIKeyRevokeParams{ID: k.ID}))
		_, err = a.Authenticate(t.Context(), secret)
		require.ErrorIs(t, err, auth.ErrInvalidKey, "revoked: refused at the next call")
	})

	t.Run("NoOperatorKeyConfigured", func(t *testing.T) {
		t.Parallel()
		st, err := sqlitestore.Open(t.Context(), sqlitetest.Path(t), nil)
		require.NoError(t, err)
		t.Cleanup(func() { st.Close() })
		require.NoError(t, st.Migrate(t.Context()))
		a := auth.New(auth.Config{Keys: st})
		_, err = a.Authenticate(t.Context(), operatorKey)
		require.ErrorIs(t, err, auth.ErrInvalidKey)
	})

	t.Run("StoreFailureIsNoInvalidKey", func(t *testing.T) {
		t.Parallel()
		down := errors.New("database is down")
		a, _, _ := setup(t, func(k store.APIKeyStore) store.APIKeyStore {
			return &keysFake{APIKeyStore: k, getByHashErr: down}
		})
		_, err := a.Authenticate(t.Context(), "hk_whatever")
		require.ErrorIs(t, err, down)
		require.NotErrorIs(t, err, auth.ErrInvalidKey)
		p, err := a.Authenticate(t.Context(), operatorKey)
		require.NoError(t, err, "the configured key needs no database")
		require.True(t, p.IsOperator())
	})

	t.Run("LastUseWrittenAtMostOnceAMinute", func(t *testing.T) {
		t.Parallel()
		var touches atomic.Int32
		a, st, clk := setup(t, func(k store.APIKeyStore) store.APIKeyStore {
			return &keysFake{APIKeyStore: k, touches: &touches}
		})
		k, secret := makeKey(t, st, herald.ScopeConsumer, "c")
		other, otherSecret := makeKey(t, st, herald.ScopeConsumer, "c")
		lastUsed := func(id string) *time.Time {
			got, err := st.APIKeyGet(t.Context(), id)
			require.NoError(t, err)
			return got.LastUsedAt
		}
		for range 10 {
			_, err := a.Authenticate(t.Context(), secret)
			require.NoError(t, err)
			clk.Advance(5 * time.Second)
		}
		require.Equal(t, int32(1), touches.Load(), "ten calls in 50 s, one write")
		require.Equal(t, start, *lastUsed(k.ID))
		require.Nil(t, lastUsed(other.ID))
		clk.Advance(10 * time.Second) // a minute after the first call
		_, err := a.Authenticate(t.Context(), secret)
		require.NoError(t, err)
		_, err = a.Authenticate(t.Context(), otherSecret)
		require.NoError(t, err)
		require.Equal(t, int32(3), touches.Load())
		require.Equal(t, start.Add(time.Minute), *lastUsed(k.ID))
		require.Equal(t, start.Add(time.Minute), *lastUsed(other.ID))
	})

	t.Run("FailedLastUseWriteIsTriedAgain", func(t *testing.T) {
		t.Parallel()
		var touches atomic.Int32
		fake := &keysFake{touches: &touches, touchErr: errors.New("database is busy")}
		a, st, _ := setup(t, func(k store.APIKeyStore) store.APIKeyStore {
			fake.APIKeyStore = k
			return fake
		})
		k, secret := makeKey(t, st, herald.ScopeConsumer, "c")
		_, err := a.Authenticate(t.Context(), secret)
		require.NoError(t, err, "a failed write of the last use never fails the call")
		fake.touchErr = nil
		_, err = a.Authenticate(t.Context(), secret)
		require.NoError(t, err)
		require.Equal(t, int32(2), touches.Load())
		got, err := st.APIKeyGet(t.Context(), k.ID)
		require.NoError(t, err)
		require.Equal(t, start, *got.LastUsedAt)
	})
}

// keysFake stands between the Authenticator and a real store: it counts
// last-use writes and fails calls on demand.
type keysFake struct {
	store.APIKeyStore
	getByHashErr error
	touchErr     error
	touches      *atomic.Int32
}

func (f *keysFake) APIKeyGetByHash(ctx context.Context, p *store.APIKeyGetByHashParams) (*herald.APIKey, error) {
	if f.getByHashErr != nil {
		return nil, f.getByHashErr
	}
	return f.APIKeyStore.APIKeyGetByHash(ctx, p)
}

func (f *keysFake) APIKeyTouch(ctx context.Context, p *store.APIKeyTouchParams) error {
	if f.touches != nil {
		f.touches.Add(1)
	}
	if f.touchErr != nil {
		return f.touchErr
	}
	return f.APIKeyStore.APIKeyTouch(ctx, p)
}
