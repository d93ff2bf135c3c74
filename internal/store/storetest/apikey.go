package storetest

import (
	"crypto/sha256"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhooks/herald"
	"github.com/heraldhooks/herald/internal/store"
)

func apiKeyCases() []testCase {
	return []testCase{
		{"CreateGetAndFindByHash", testAPIKeyCreateGet},
		{"IDAndHashAreUnique", testAPIKeyUnique},
		{"ListNewestFirstOfOneConsumerOrAll", testAPIKeyList},
		{"RevokedKeyIsFoundNoMore", testAPIKeyRevoke},
		{"TouchOnlyMovesForward", testAPIKeyTouch},
	}
}

// newAPIKey is a key of scope for consumer (empty for operator keys),
// whose secret is the text secret.
func newAPIKey(name string, scope herald.Scope, consumer, secret string) *herald.APIKey {
	return &herald.APIKey{
		Name:       name,
		Scope:      scope,
		ConsumerID: consumer,
		Hash:       sha256.Sum256([]byte(secret)),
		Prefix:     secret[:min(len(secret), 12)],
	}
}

// createAPIKey creates k at now.
func createAPIKey(t *testing.T, s store.Store, k *herald.APIKey, now time.Time) *herald.APIKey {
	t.Helper()
	got, err := s.APIKeyCreate(t.Context(), &store.APIKeyCreateParams{Key: k, Now: now})
	require.NoError(t, err)
	return got
}

func testAPIKeyCreateGet(t *testing.T, s store.Store) {
	op := createAPIKey(t, s, newAPIKey("deploys", herald.ScopeOperator, "", "hk_operator_secret_1"), at(0))
	require.Regexp(t, `^key_[0-9a-z]{26}$`, op.ID)
	require.Equal(t, "deploys", op.Name)
	require.Equal(t, herald.ScopeOperator, op.Scope)
	require.Empty(t, op.ConsumerID)
	require.Equal(t, sha256.Sum256([]byte("hk_operator_secret_1")), op.Hash)
	require.Equal(t, "hk_operator_", op.Prefix)
	requireTime(t, at(0), op.CreatedAt)
	require.Nil(t, op.LastUsedAt)

	cons := createAPIKey(t, s, newAPIKey("cust_42 integration", herald.ScopeConsumer, "cust_42", "hk_consumer_secret_2"), at(time.Second))
	got, err := s.APIKeyGet(t.Context(), cons.ID)
	require.NoError(t, err)
	require.Equal(t, cons, got)
	require.Equal(t, herald.ScopeConsumer, got.Scope)
	require.Equal(t, "cust_42", got.ConsumerID)

	byHash, err := s.APIKeyGetByHash(t.Context(), &store.APIKeyGetByHashParams{Hash: sha256.Sum256([]byte("hk_consumer_secret_2"))})
	require.NoError(t, err)
	require.Equal(t, cons, byHash)
	byHash, err = s.APIKeyGetByHash(t.Context(), &store.APIKeyGetByHashParams{Hash: sha256.Sum256([]byte("hk_operator_secret_1"))})
	require.NoError(t, err)
	require.Equal(t, op.ID, byHash.ID)

	_, err = s.APIKeyGetByHash(t.Context(), &store.APIKeyGetByHashParams{Hash: sha256.Sum256([]byte("hk_never_made"))})
	expectNotFound(t, err)
	_, err = s.APIKeyGet(t.Context(), "key_missing")
	expectNotFound(t, err)

	given := newAPIKey("chosen id", herald.ScopeOperator, "", "hk_operator_secret_3")
	given.ID = "key_chosen"
	require.Equal(t, "key_chosen", createAPIKey(t, s, given, at(0)).ID)
}

func testAPIKeyUnique(t *testing.T, s store.Store) {
	first := createAPIKey(t, s, newAPIKey("a", herald.ScopeConsumer, "c1", "hk_same_secret"), at(0))
	_, err := s.APIKeyCreate(t.Context(), &store.APIKeyCreateParams{
		Key: newAPIKey("b", herald.ScopeConsumer, "c2", "hk_same_secret"), Now: at(time.Second),
	})
	expectConflict(t, err)
	again := newAPIKey("c", herald.ScopeOperator, "", "hk_other_secret")
	again.ID = first.ID
	_, err = s.APIKeyCreate(t.Context(), &store.APIKeyCreateParams{Key: again, Now: at(time.Second)})
	expectConflict(t, err)

	// Neither failed call changed the first key or left a row behind.
	got, err := s.APIKeyGetByHash(t.Context(), &store.APIKeyGetByHashParams{Hash: first.Hash})
	require.NoError(t, err)
	require.Equal(t, first, got)
	_, err = s.APIKeyGetByHash(t.Context(), &store.APIKeyGetByHashParams{Hash: sha256.Sum256([]byte("hk_other_secret"))})
	expectNotFound(t, err)
	page, err := s.APIKeyList(t.Context(), &store.APIKeyListParams{})
	require.NoError(t, err)
	require.Len(t, page.Items, 1)
}

func testAPIKeyList(t *testing.T, s store.Store) {
	var all, ofC1 []string
	for i := range 7 {
		consumer := "c1"
		scope := herald.ScopeConsumer
		switch i % 3 {
		case 1:
			consumer = "c2"
		case 2:
			consumer, scope = "", herald.ScopeOperator
		}
		k := createAPIKey(t, s, newAPIKey(fmt.Sprintf("key %d", i), scope, consumer, fmt.Sprintf("hk_list_secret_%d", i)), at(time.Duration(i)*time.Second))
		all = append(all, k.ID)
		if consumer == "c1" {
			ofC1 = append(ofC1, k.ID)
		}
	}
	list := func(consumer string, limit int) []string {
		return collect(t, limit, func(k *herald.APIKey) string { return k.ID }, func(cursor string) (*store.Page[*herald.APIKey], error) {
			return s.APIKeyList(t.Context(), &store.APIKeyListParams{ConsumerID: consumer, Cursor: cursor, Limit: limit})
		})
	}
	require.Equal(t, reversed(all), list("", 2), "newest first, every key")
	page, err := s.APIKeyList(t.Context(), &store.APIKeyListParams{})
	require.NoError(t, err)
	require.Empty(t, page.NextCursor, "the default limit holds them all")
	require.Len(t, page.Items, len(all))
	require.Equal(t, reversed(ofC1), list("c1", 2), "one consumer's keys")
	require.Empty(t, list("c3", 2))

	page, err = s.APIKeyList(t.Context(), &store.APIKeyListParams{ConsumerID: "c1", Limit: 10})
	require.NoError(t, err)
	for _, k := range page.Items {
		require.Equal(t, "c1", k.ConsumerID)
		require.Equal(t, herald.ScopeConsumer, k.Scope)
		require.NotEmpty(t, k.Prefix)
		require.NotEqual(t, [32]byte{}, k.Hash)
	}
}

func testAPIKeyRevoke(t *testing.T, s store.Store) {
	kept := createAPIKey(t, s, newAPIKey("kept", herald.ScopeConsumer, "c1", "hk_kept_secret"), at(0))
	gone := createAPIKey(t, s, newAPIKey("gone", herald.ScopeConsumer, "c1", "hk_gone_secret"), at(time.Second))
	require.NoError(t, s.APIKeyRevoke(t.Context(), &store.APIKeyRevokeParams{ID: gone.ID, Now: at(2 * time.Second)}))

	_, err := s.APIKeyGetByHash(t.Context(), &store.APIKeyGetByHashParams{Hash: gone.Hash})
	expectNotFound(t, err)
	_, err = s.APIKeyGet(t.Context(), gone.ID)
	expectNotFound(t, err)
	page, err := s.APIKeyList(t.Context(), &store.APIKeyListParams{})
	require.NoError(t, err)
	require.Len(t, page.Items, 1)
	require.Equal(t, kept.ID, page.Items[0].ID)

	expectNotFound(t, s.APIKeyRevoke(t.Context(), &store.APIKeyRevokeParams{ID: gone.ID, Now: at(3 * time.Second)}))
	expectNotFound(t, s.APIKeyRevoke(t.Context(), &store.APIKeyRevokeParams{ID: "key_missing", Now: at(3 * time.Second)}))
	// A touch arriving after the revocation brings nothing back.
	require.NoError(t, s.APIKeyTouch(t.Context(), &store.APIKeyTouchParams{ID: gone.ID, Now: at(4 * time.Second)}))
	_, err = s.APIKeyGetByHash(t.Context(), &store.APIKeyGetByHashParams{Hash: gone.Hash})
	expectNotFound(t, err)

	got, err := s.APIKeyGetByHash(t.Context(), &store.APIKeyGetByHashParams{Hash: kept.Hash})
	require.NoError(t, err)
	require.Equal(t, kept, got)
}

func testAPIKeyTouch(t *testing.T, s store.Store) {
	k := createAPIKey(t, s, newAPIKey("used", herald.ScopeOperator, "", "hk_touch_secret"), at(0))
	other := createAPIKey(t, s, newAPIKey("unused", herald.ScopeOperator, "", "hk_touch_other"), at(0))
	touch := func(d time.Duration) {
		t.Helper()
		require.NoError(t, s.APIKeyTouch(t.Context(), &store.APIKeyTouchParams{ID: k.ID, Now: at(d)}))
	}
	lastUsed := func(id string) *time.Time {
		t.Helper()
		got, err := s.APIKeyGet(t.Context(), id)
		require.NoError(t, err)
		return got.LastUsedAt
	}
	touch(2 * time.Minute)
	requireTimePtr(t, at(2*time.Minute), lastUsed(k.ID))
	touch(time.Minute) // a node that wrote late
	requireTimePtr(t, at(2*time.Minute), lastUsed(k.ID), "never back")
	touch(3 * time.Minute)
	requireTimePtr(t, at(3*time.Minute), lastUsed(k.ID))
	require.Nil(t, lastUsed(other.ID), "only the key touched")

	byHash, err := s.APIKeyGetByHash(t.Context(), &store.APIKeyGetByHashParams{Hash: k.Hash})
	require.NoError(t, err)
	requireTimePtr(t, at(3*time.Minute), byHash.LastUsedAt)
	require.NoError(t, s.APIKeyTouch(t.Context(), &store.APIKeyTouchParams{ID: "key_missing", Now: at(time.Hour)}))
}
