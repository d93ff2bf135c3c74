package storetest

import (
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhooks/herald"
	"github.com/heraldhooks/herald/internal/store"
)

func noticeCases() []testCase {
	return []testCase{
		{"AddressSetReadAndCleared", testNoticeAddress},
		{"ReservedOncePerInterval", testNoticeReserveInterval},
		{"ReleaseUndoesOnlyItsOwnReservation", testNoticeRelease},
		{"ConcurrentReservationsOneWins", testNoticeReserveConcurrent},
		{"CompleteHandsOverItsNotificationsAfterCommit", testNoticeCompleteNotify},
	}
}

func setAddress(t *testing.T, s store.Store, consumer, email string, now time.Time) *store.ConsumerNotifications {
	t.Helper()
	got, err := s.ConsumerNotificationsSet(t.Context(), &store.ConsumerNotificationsSetParams{ConsumerID: consumer, Email: email, Now: now})
	require.NoError(t, err)
	return got
}

func getAddress(t *testing.T, s store.Store, consumer string) *store.ConsumerNotifications {
	t.Helper()
	got, err := s.ConsumerNotificationsGet(t.Context(), consumer)
	require.NoError(t, err)
	return got
}

func testNoticeAddress(t *testing.T, s store.Store) {
	// A consumer never set has no address, and is no error.
	got := getAddress(t, s, "c")
	require.Equal(t, &store.ConsumerNotifications{ConsumerID: "c"}, got)

	set := setAddress(t, s, "c", "ops@example.com", at(0))
	require.Equal(t, "ops@example.com", set.Email)
	requireTime(t, at(0), set.UpdatedAt)
	got = getAddress(t, s, "c")
	require.Equal(t, "c", got.ConsumerID)
	require.Equal(t, "ops@example.com", got.Email)
	requireTime(t, at(0), got.UpdatedAt)

	// Another consumer's is its own.
	setAddress(t, s, "d", "d@example.com", at(time.Second))
	require.Equal(t, "ops@example.com", getAddress(t, s, "c").Email)
	require.Equal(t, "d@example.com", getAddress(t, s, "d").Email)

	// Replaced, then cleared: no address, and when it was cleared.
	setAddress(t, s, "c", "other@example.com", at(time.Minute))
	require.Equal(t, "other@example.com", getAddress(t, s, "c").Email)
	setAddress(t, s, "c", "", at(2*time.Minute))
	got = getAddress(t, s, "c")
	require.Empty(t, got.Email)
	requireTime(t, at(2*time.Minute), got.UpdatedAt)
	require.Equal(t, "d@example.com", getAddress(t, s, "d").Email)
}

func reserve(t *testing.T, s store.Store, endpointID string, now time.Time) (store.NoticeReservation, bool) {
	t.Helper()
	r, ok, err := s.NoticeReserve(t.Context(), &store.NoticeReserveParams{EndpointID: endpointID, Interval: time.Hour, Now: now})
	require.NoError(t, err)
	return r, ok
}

func testNoticeReserveInterval(t *testing.T, s store.Store) {
	r, ok := reserve(t, s, "ep_1", at(0))
	require.True(t, ok, "the first notice of an endpoint")
	require.Equal(t, "ep_1", r.EndpointID)
	requireTime(t, at(0), r.SentAt)
	require.True(t, r.Previous.IsZero(), "no notice before: %v", r.Previous)

	_, ok = reserve(t, s, "ep_1", at(time.Minute))
	require.False(t, ok, "a minute later")
	_, ok = reserve(t, s, "ep_1", at(time.Hour-time.Millisecond))
	require.False(t, ok, "just under the hour")
	// Another endpoint has its own hour.
	_, ok = reserve(t, s, "ep_2", at(time.Minute))
	require.True(t, ok, "another endpoint")

	r, ok = reserve(t, s, "ep_1", at(time.Hour))
	require.True(t, ok, "an hour after the last")
	requireTime(t, at(time.Hour), r.SentAt)
	requireTime(t, at(0), r.Previous)
	// The refused asks moved nothing: the hour counts from the last grant.
	_, ok = reserve(t, s, "ep_1", at(2*time.Hour-time.Millisecond))
	require.False(t, ok)
	_, ok = reserve(t, s, "ep_1", at(2*time.Hour))
	require.True(t, ok)
}

func testNoticeRelease(t *testing.T, s store.Store) {
	// A first notice released: as if there had been none.
	r, ok := reserve(t, s, "ep_1", at(0))
	require.True(t, ok)
	require.NoError(t, s.NoticeRelease(t.Context(), r))
	r, ok = reserve(t, s, "ep_1", at(time.Minute))
	require.True(t, ok, "released: the mail was not sent")
	require.True(t, r.Previous.IsZero())

	// A later one released goes back to the one before it.
	r2, ok := reserve(t, s, "ep_1", at(time.Minute+time.Hour))
	require.True(t, ok)
	requireTime(t, at(time.Minute), r2.Previous)
	require.NoError(t, s.NoticeRelease(t.Context(), r2))
	_, ok = reserve(t, s, "ep_1", at(time.Minute+time.Hour-time.Second))
	require.False(t, ok, "back to the notice at 1m: the hour from it still counts")
	r3, ok := reserve(t, s, "ep_1", at(time.Minute+time.Hour+time.Second))
	require.True(t, ok)

	// A stale release (its reservation replaced) changes nothing.
	require.NoError(t, s.NoticeRelease(t.Context(), r2))
	require.NoError(t, s.NoticeRelease(t.Context(), r))
	_, ok = reserve(t, s, "ep_1", r3.SentAt.Add(time.Minute))
	require.False(t, ok, "r3 still holds")
}

func testNoticeReserveConcurrent(t *testing.T, s store.Store) {
	const n = 8
	var (
		wg  sync.WaitGroup
		mu  sync.Mutex
		won int
	)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, ok, err := s.NoticeReserve(t.Context(), &store.NoticeReserveParams{
				EndpointID: "ep_1", Interval: time.Hour, Now: at(time.Duration(i) * time.Millisecond),
			})
			if err != nil {
				t.Error(err)
				return
			}
			if ok {
				mu.Lock()
				won++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	require.Equal(t, 1, won, "nodes asking at once: exactly one sends")
}

func testNoticeCompleteNotify(t *testing.T, s store.Store) {
	// No endpoint subscribes to herald.*: the notifications are still
	// handed over, for mail.
	ep := createEndpoint(t, s, quietEndpoint("c"), at(0))
	id := ingestFor(t, s, at(0), ep)
	c := claimOne(t, s, at(time.Second), id)
	o := outcome(c, herald.StatusDead, at(time.Second))
	o.Attempt.StatusCode = 410
	o.Attempt.Error = "HTTP 410"
	o.DeadReason = herald.DeadGone
	o.DisableEndpoint = "gone"
	var got []herald.Notification
	applied, err := s.DeliveryCompleteMany(t.Context(), &store.DeliveryCompleteManyParams{
		Outcomes: []store.DeliveryOutcome{o}, Now: at(2 * time.Second),
		Notify: func(n herald.Notification) { got = append(got, n) },
	})
	require.NoError(t, err)
	require.Equal(t, []bool{true}, applied)
	types := make([]string, len(got))
	for i, n := range got {
		types[i] = n.EventType
		require.Equal(t, "c", n.ConsumerID)
	}
	require.ElementsMatch(t, []string{herald.NotifyDeliveryDead, herald.NotifyEndpointDisabled}, types)
	for _, n := range got {
		if n.EventType == herald.NotifyEndpointDisabled {
			var p herald.EndpointDisabledPayload
			require.NoError(t, json.Unmarshal(n.Payload, &p))
			require.Equal(t, ep.ID, p.EndpointID)
			require.Equal(t, ep.URL, p.URL)
			require.Equal(t, "gone", p.Reason)
			requireTime(t, at(2*time.Second), p.DisabledAt)
		}
	}

	// A stale outcome emits nothing, and hands nothing over.
	got = nil
	_, err = s.DeliveryCompleteMany(t.Context(), &store.DeliveryCompleteManyParams{
		Outcomes: []store.DeliveryOutcome{o}, Now: at(3 * time.Second),
		Notify: func(n herald.Notification) { got = append(got, n) },
	})
	require.NoError(t, err)
	require.Empty(t, got)
}
