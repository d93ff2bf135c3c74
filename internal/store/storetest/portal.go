package storetest

import (
	"crypto/sha256"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhooks/herald/internal/store"
)

func portalCases() []testCase {
	return []testCase{
		{"LinkOpensOnceIntoASession", testPortalExchangeOnce},
		{"LinkExpiresOnTheClock", testPortalLinkExpires},
		{"SessionExpiresOnTheClock", testPortalSessionExpires},
		{"RevokeEndsEveryLinkAndSessionOfTheConsumer", testPortalRevoke},
		{"EndOneSession", testPortalEnd},
		{"ConcurrentOpensGiveOneSession", testPortalConcurrentExchange},
		{"NewLinkDeletesTheConsumersEndedRows", testPortalCreateSweeps},
	}
}

// hashOf is the SHA-256 of a token.
func hashOf(token string) [32]byte { return sha256.Sum256([]byte(token)) }

// createPortalLink makes a link of consumer opened by token, created at now.
func createPortalLink(t *testing.T, s store.Store, consumer, token string, ttl time.Duration, now time.Time) *store.PortalSession {
	t.Helper()
	ps, err := s.PortalSessionCreate(t.Context(), &store.PortalSessionCreateParams{
		ConsumerID: consumer, LinkHash: hashOf(token), LinkTTL: ttl, Now: now,
	})
	require.NoError(t, err)
	return ps
}

func exchange(t *testing.T, s store.Store, link, session string, now time.Time) (*store.PortalSession, error) {
	t.Helper()
	return s.PortalSessionExchange(t.Context(), &store.PortalSessionExchangeParams{
		LinkHash: hashOf(link), SessionHash: hashOf(session), SessionTTL: 12 * time.Hour, Now: now,
	})
}

func getSession(t *testing.T, s store.Store, session string, now time.Time) (*store.PortalSession, error) {
	t.Helper()
	return s.PortalSessionGet(t.Context(), &store.PortalSessionGetParams{SessionHash: hashOf(session), Now: now})
}

func testPortalExchangeOnce(t *testing.T, s store.Store) {
	link := createPortalLink(t, s, "cust_42", "link-1", 15*time.Minute, at(0))
	require.Regexp(t, `^ps_[0-9a-z]{26}$`, link.ID)
	require.Equal(t, "cust_42", link.ConsumerID)
	requireTime(t, at(15*time.Minute), link.LinkExpiresAt)
	requireTime(t, at(0), link.CreatedAt)
	require.Nil(t, link.ExchangedAt)
	require.Nil(t, link.ExpiresAt)

	_, err := getSession(t, s, "session-1", at(time.Minute))
	expectNotFound(t, err)

	ps, err := exchange(t, s, "link-1", "session-1", at(time.Minute))
	require.NoError(t, err)
	require.Equal(t, link.ID, ps.ID)
	require.Equal(t, "cust_42", ps.ConsumerID)
	require.NotNil(t, ps.ExchangedAt)
	requireTime(t, at(time.Minute), *ps.ExchangedAt)
	requireTime(t, at(time.Minute+12*time.Hour), *ps.ExpiresAt)

	got, err := getSession(t, s, "session-1", at(2*time.Minute))
	require.NoError(t, err)
	require.Equal(t, ps, got)

	_, err = exchange(t, s, "link-1", "session-2", at(2*time.Minute))
	require.ErrorIs(t, err, store.ErrPortalLinkUsed)
	_, err = getSession(t, s, "session-2", at(2*time.Minute))
	expectNotFound(t, err)

	_, err = exchange(t, s, "no-such-link", "session-3", at(2*time.Minute))
	expectNotFound(t, err)
	// The link's hash does not find the session.
	_, err = getSession(t, s, "link-1", at(2*time.Minute))
	expectNotFound(t, err)
}

func testPortalLinkExpires(t *testing.T, s store.Store) {
	createPortalLink(t, s, "cust_42", "link-1", time.Minute, at(0))
	_, err := exchange(t, s, "link-1", "session-1", at(time.Minute))
	require.ErrorIs(t, err, store.ErrPortalLinkExpired)
	_, err = getSession(t, s, "session-1", at(time.Minute))
	expectNotFound(t, err)

	createPortalLink(t, s, "cust_42", "link-2", time.Minute, at(0))
	_, err = exchange(t, s, "link-2", "session-2", at(time.Minute-time.Millisecond))
	require.NoError(t, err)
}

func testPortalSessionExpires(t *testing.T, s store.Store) {
	createPortalLink(t, s, "cust_42", "link-1", time.Minute, at(0))
	_, err := exchange(t, s, "link-1", "session-1", at(0))
	require.NoError(t, err)
	_, err = getSession(t, s, "session-1", at(12*time.Hour-time.Millisecond))
	require.NoError(t, err)
	_, err = getSession(t, s, "session-1", at(12*time.Hour))
	expectNotFound(t, err)
}

func testPortalRevoke(t *testing.T, s store.Store) {
	createPortalLink(t, s, "cust_42", "link-1", time.Hour, at(0))
	createPortalLink(t, s, "cust_42", "link-2", time.Hour, at(0))
	createPortalLink(t, s, "cust_7", "link-3", time.Hour, at(0))
	_, err := exchange(t, s, "link-1", "session-1", at(0))
	require.NoError(t, err)
	_, err = exchange(t, s, "link-3", "session-3", at(0))
	require.NoError(t, err)

	n, err := s.PortalSessionRevokeConsumer(t.Context(), &store.PortalSessionRevokeConsumerParams{ConsumerID: "cust_42"})
	require.NoError(t, err)
	require.Equal(t, 2, n)

	_, err = getSession(t, s, "session-1", at(time.Minute))
	expectNotFound(t, err)
	_, err = exchange(t, s, "link-2", "session-2", at(time.Minute))
	expectNotFound(t, err)
	other, err := getSession(t, s, "session-3", at(time.Minute))
	require.NoError(t, err)
	require.Equal(t, "cust_7", other.ConsumerID)

	n, err = s.PortalSessionRevokeConsumer(t.Context(), &store.PortalSessionRevokeConsumerParams{ConsumerID: "cust_42"})
	require.NoError(t, err)
	require.Zero(t, n)
}

func testPortalEnd(t *testing.T, s store.Store) {
	createPortalLink(t, s, "cust_42", "link-1", time.Hour, at(0))
	createPortalLink(t, s, "cust_42", "link-2", time.Hour, at(0))
	ps, err := exchange(t, s, "link-1", "session-1", at(0))
	require.NoError(t, err)
	_, err = exchange(t, s, "link-2", "session-2", at(0))
	require.NoError(t, err)

	require.NoError(t, s.PortalSessionEnd(t.Context(), &store.PortalSessionEndParams{ID: ps.ID}))
	_, err = getSession(t, s, "session-1", at(time.Minute))
	expectNotFound(t, err)
	_, err = getSession(t, s, "session-2", at(time.Minute))
	require.NoError(t, err)
	expectNotFound(t, s.PortalSessionEnd(t.Context(), &store.PortalSessionEndParams{ID: ps.ID}))
}

func testPortalConcurrentExchange(t *testing.T, s store.Store) {
	createPortalLink(t, s, "cust_42", "link-1", time.Hour, at(0))
	const racers = 8
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		won  []string
		errs []error
	)
	for i := range racers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			session := "session-" + string(rune('a'+i))
			_, err := s.PortalSessionExchange(t.Context(), &store.PortalSessionExchangeParams{
				LinkHash: hashOf("link-1"), SessionHash: hashOf(session), SessionTTL: time.Hour, Now: at(time.Second),
			})
			mu.Lock()
			defer mu.Unlock()
			if err == nil {
				won = append(won, session)
			} else {
				errs = append(errs, err)
			}
		}()
	}
	wg.Wait()
	require.Len(t, won, 1)
	require.Len(t, errs, racers-1)
	for _, err := range errs {
		require.True(t, errors.Is(err, store.ErrPortalLinkUsed), "%v", err)
	}
	_, err := getSession(t, s, won[0], at(time.Minute))
	require.NoError(t, err)
}

func testPortalCreateSweeps(t *testing.T, s store.Store) {
	unopened := createPortalLink(t, s, "cust_42", "link-1", time.Minute, at(0))
	createPortalLink(t, s, "cust_42", "link-2", time.Hour, at(0))
	opened, err := exchange(t, s, "link-2", "session-2", at(0))
	require.NoError(t, err)
	live := createPortalLink(t, s, "cust_42", "link-3", 24*time.Hour, at(0))
	other := createPortalLink(t, s, "cust_7", "link-4", time.Minute, at(0))

	createPortalLink(t, s, "cust_42", "link-5", time.Minute, at(12*time.Hour))
	end := func(id string) error {
		return s.PortalSessionEnd(t.Context(), &store.PortalSessionEndParams{ID: id})
	}
	expectNotFound(t, end(unopened.ID))
	expectNotFound(t, end(opened.ID))
	require.NoError(t, end(live.ID), "a link still open stays")
	require.NoError(t, end(other.ID), "another consumer's rows stay")
}
