package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhooks/herald/internal/store"
)

func operatorSessionCases() []testCase {
	return []testCase{
		{"CreateGetEnd", testOperatorSessionCreateGetEnd},
		{"ExpiresOnTheClock", testOperatorSessionExpires},
		{"CreateDeletesEndedSessions", testOperatorSessionSweeps},
	}
}

func createOperatorSession(t *testing.T, s store.Store, token, key string, ttl time.Duration, now time.Time) *store.OperatorSession {
	t.Helper()
	os, err := s.OperatorSessionCreate(context.Background(), &store.OperatorSessionCreateParams{
		SessionHash: hashOf(token), KeyHash: hashOf(key), TTL: ttl, Now: now,
	})
	require.NoError(t, err)
	return os
}

func getOperatorSession(s store.Store, token string, now time.Time) (*store.OperatorSession, error) {
	return s.OperatorSessionGet(context.Background(), &store.OperatorSessionGetParams{SessionHash: hashOf(token), Now: now})
}

func testOperatorSessionCreateGetEnd(t *testing.T, s store.Store) {
	made := createOperatorSession(t, s, "session-1", "key-1", time.Hour, at(0))
	require.Regexp(t, `^os_`, made.ID)
	require.Equal(t, hashOf("key-1"), made.KeyHash)
	require.True(t, made.ExpiresAt.Equal(at(time.Hour)), "expires %v", made.ExpiresAt)
	other := createOperatorSession(t, s, "session-2", "key-2", time.Hour, at(0))

	got, err := getOperatorSession(s, "session-1", at(time.Minute))
	require.NoError(t, err)
	require.Equal(t, made.ID, got.ID)
	require.Equal(t, hashOf("key-1"), got.KeyHash)
	require.True(t, got.CreatedAt.Equal(at(0)))

	_, err = getOperatorSession(s, "no-such-session", at(time.Minute))
	expectNotFound(t, err)

	require.NoError(t, s.OperatorSessionEnd(context.Background(), &store.OperatorSessionEndParams{ID: made.ID}))
	_, err = getOperatorSession(s, "session-1", at(time.Minute))
	expectNotFound(t, err)
	err = s.OperatorSessionEnd(context.Background(), &store.OperatorSessionEndParams{ID: made.ID})
	expectNotFound(t, err)

	// Ending one leaves the others.
	got, err = getOperatorSession(s, "session-2", at(time.Minute))
	require.NoError(t, err)
	require.Equal(t, other.ID, got.ID)
}

func testOperatorSessionExpires(t *testing.T, s store.Store) {
	createOperatorSession(t, s, "session-1", "key-1", time.Hour, at(0))
	_, err := getOperatorSession(s, "session-1", at(time.Hour-time.Millisecond))
	require.NoError(t, err)
	_, err = getOperatorSession(s, "session-1", at(time.Hour))
	expectNotFound(t, err)
}

func testOperatorSessionSweeps(t *testing.T, s store.Store) {
	old := createOperatorSession(t, s, "session-1", "key-1", time.Minute, at(0))
	createOperatorSession(t, s, "session-2", "key-1", time.Hour, at(2*time.Minute))
	// The ended session's row is gone: ending it finds nothing.
	err := s.OperatorSessionEnd(context.Background(), &store.OperatorSessionEndParams{ID: old.ID})
	expectNotFound(t, err)
	_, err = getOperatorSession(s, "session-2", at(3*time.Minute))
	require.NoError(t, err)
}
