package storetest

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/heraldhooks/herald"
	"github.com/heraldhooks/herald/internal/store"
)

func noticeCases() []testCase {
	return []testCase{
		{"AddressSetReadAndCleared", testNoticeAddress},
		{"NewAddressIsPendingUntilConfirmed", testNoticeConfirm},
		{"ConfirmationTokenWrongExpiredOrUsed", testNoticeConfirmRefused},
		{"ConfirmationIssuedOncePerInterval", testNoticeIssueInterval},
		{"ConcurrentIssuesOneWins", testNoticeIssueConcurrent},
		{"OperatorConfirmedAddress", testNoticeSetConfirmed},
		{"ReservedOncePerInterval", testNoticeReserveInterval},
		{"ReleaseUndoesOnlyItsOwnReservation", testNoticeRelease},
		{"ConcurrentReservationsOneWins", testNoticeReserveConcurrent},
		{"CompleteHandsOverItsNotificationsAfterCommit", testNoticeCompleteNotify},
	}
}

func setAddress(t *testing.T, s store.Store, consumer, email string, now time.Time) *store.NoticeAddress {
	t.Helper()
	got, err := s.NoticeAddressSet(t.Context(), &store.NoticeAddressSetParams{ConsumerID: consumer, Email: email, Now: now})
	require.NoError(t, err)
	return got
}

func getAddress(t *testing.T, s store.Store, consumer string) *store.NoticeAddress {
	t.Helper()
	got, err := s.NoticeAddressGet(t.Context(), consumer)
	require.NoError(t, err)
	return got
}

func testNoticeAddress(t *testing.T, s store.Store) {
	// A consumer never set has no address, and is no error.
	got := getAddress(t, s, "c")
	require.Equal(t, &store.NoticeAddress{ConsumerID: "c"}, got)

	set := setAddress(t, s, "c", "ops@example.com", at(0))
	require.Equal(t, "ops@example.com", set.Email)
	requireTime(t, at(0), set.UpdatedAt)
	require.False(t, set.Confirmed(), "a new address is pending")
	require.True(t, set.ConfirmedAt.IsZero())
	require.True(t, set.ConfirmationSentAt.IsZero())
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

// issue issues a confirmation token for email, valid 48 hours, at most
// one per 5 minutes.
func issue(t *testing.T, s store.Store, consumer, email, token string, now time.Time) (*store.NoticeAddress, bool) {
	t.Helper()
	got, ok, err := s.NoticeAddressIssue(t.Context(), &store.NoticeAddressIssueParams{
		ConsumerID: consumer, Email: email, TokenHash: sha256.Sum256([]byte(token)),
		TTL: 48 * time.Hour, Every: 5 * time.Minute, Now: now,
	})
	require.NoError(t, err)
	return got, ok
}

func confirm(t *testing.T, s store.Store, consumer, token string, now time.Time) (*store.NoticeAddress, error) {
	t.Helper()
	return s.NoticeAddressConfirm(t.Context(), &store.NoticeAddressConfirmParams{
		ConsumerID: consumer, TokenHash: sha256.Sum256([]byte(token)), Now: now,
	})
}

func testNoticeConfirm(t *testing.T, s store.Store) {
	setAddress(t, s, "c", "ops@example.com", at(0))
	got, ok := issue(t, s, "c", "ops@example.com", "tok-1", at(time.Second))
	require.True(t, ok)
	require.False(t, got.Confirmed())
	requireTime(t, at(time.Second), got.ConfirmationSentAt)
	requireTime(t, at(time.Second+48*time.Hour), got.ConfirmationExpiresAt)
	requireTime(t, at(time.Second), getAddress(t, s, "c").ConfirmationSentAt)

	got, err := confirm(t, s, "c", "tok-1", at(time.Hour))
	require.NoError(t, err)
	require.True(t, got.Confirmed())
	require.Equal(t, "ops@example.com", got.Email)
	requireTime(t, at(time.Hour), got.ConfirmedAt)
	requireTime(t, at(0), got.UpdatedAt, "confirming is no change of address")
	require.True(t, getAddress(t, s, "c").Confirmed())

	// Setting the same address again keeps it confirmed, and unchanged.
	got = setAddress(t, s, "c", "ops@example.com", at(2*time.Hour))
	require.True(t, got.Confirmed())
	requireTime(t, at(0), got.UpdatedAt)
	requireTime(t, at(time.Hour), got.ConfirmedAt)
	// A confirmed address takes no new token.
	_, ok = issue(t, s, "c", "ops@example.com", "tok-2", at(3*time.Hour))
	require.False(t, ok)

	// A new address is pending again, its old token gone; clearing
	// leaves nothing confirmed.
	got = setAddress(t, s, "c", "new@example.com", at(4*time.Hour))
	require.False(t, got.Confirmed())
	require.True(t, got.ConfirmedAt.IsZero())
	require.True(t, got.ConfirmationSentAt.IsZero())
	require.True(t, got.ConfirmationExpiresAt.IsZero())
	_, err = confirm(t, s, "c", "tok-1", at(4*time.Hour))
	require.ErrorIs(t, err, store.ErrNotFound, "the old address's token confirms nothing new")
	// A token for another address than the stored one is not issued.
	_, ok = issue(t, s, "c", "ops@example.com", "tok-3", at(5*time.Hour))
	require.False(t, ok)
	got = setAddress(t, s, "c", "", at(6*time.Hour))
	require.False(t, got.Confirmed())
	require.True(t, got.ConfirmedAt.IsZero())
	_, ok = issue(t, s, "c", "", "tok-4", at(7*time.Hour))
	require.False(t, ok, "no address, no token")
}

func testNoticeConfirmRefused(t *testing.T, s store.Store) {
	setAddress(t, s, "c", "ops@example.com", at(0))
	setAddress(t, s, "d", "d@example.com", at(0))
	_, ok := issue(t, s, "c", "ops@example.com", "tok-c", at(0))
	require.True(t, ok)
	_, ok = issue(t, s, "d", "d@example.com", "tok-d", at(0))
	require.True(t, ok)

	// A wrong token, and another consumer's, confirm nothing.
	_, err := confirm(t, s, "c", "tok-wrong", at(time.Minute))
	require.ErrorIs(t, err, store.ErrNotFound)
	_, err = confirm(t, s, "c", "tok-d", at(time.Minute))
	require.ErrorIs(t, err, store.ErrNotFound)
	require.False(t, getAddress(t, s, "c").Confirmed())
	require.False(t, getAddress(t, s, "d").Confirmed())

	// Past its expiry, a token is refused; a new one (the resend) works,
	// and the one it replaced is gone.
	_, err = confirm(t, s, "c", "tok-c", at(48*time.Hour))
	require.ErrorIs(t, err, store.ErrConfirmationExpired)
	require.False(t, getAddress(t, s, "c").Confirmed())
	_, ok = issue(t, s, "c", "ops@example.com", "tok-c2", at(49*time.Hour))
	require.True(t, ok)
	_, err = confirm(t, s, "c", "tok-c", at(49*time.Hour))
	require.ErrorIs(t, err, store.ErrNotFound, "a replaced token")
	_, err = confirm(t, s, "c", "tok-c2", at(49*time.Hour+time.Minute))
	require.NoError(t, err)

	// Used once, the token answers used.
	_, err = confirm(t, s, "c", "tok-c2", at(50*time.Hour))
	require.ErrorIs(t, err, store.ErrConfirmationUsed)
	require.False(t, getAddress(t, s, "d").Confirmed(), "another consumer's address is untouched")

	// A token whose mail was not sent is withdrawn: it confirms nothing,
	// and a resend may follow at once.
	_, ok = issue(t, s, "d", "d@example.com", "tok-d2", at(time.Hour))
	require.True(t, ok)
	require.NoError(t, s.NoticeAddressUnissue(t.Context(), &store.NoticeAddressUnissueParams{
		ConsumerID: "d", TokenHash: sha256.Sum256([]byte("tok-d2")),
	}))
	got := getAddress(t, s, "d")
	require.True(t, got.ConfirmationSentAt.IsZero())
	_, err = confirm(t, s, "d", "tok-d2", at(time.Hour))
	require.ErrorIs(t, err, store.ErrNotFound)
	_, ok = issue(t, s, "d", "d@example.com", "tok-d3", at(time.Hour+time.Second))
	require.True(t, ok)
	// Withdrawing a token that was replaced changes nothing.
	require.NoError(t, s.NoticeAddressUnissue(t.Context(), &store.NoticeAddressUnissueParams{
		ConsumerID: "d", TokenHash: sha256.Sum256([]byte("tok-d2")),
	}))
	_, err = confirm(t, s, "d", "tok-d3", at(time.Hour+time.Minute))
	require.NoError(t, err)
}

func testNoticeIssueInterval(t *testing.T, s store.Store) {
	setAddress(t, s, "c", "ops@example.com", at(0))
	_, ok := issue(t, s, "c", "ops@example.com", "tok-1", at(0))
	require.True(t, ok)
	got, ok := issue(t, s, "c", "ops@example.com", "tok-2", at(5*time.Minute-time.Second))
	require.False(t, ok, "a resend within the interval")
	requireTime(t, at(0), got.ConfirmationSentAt, "the settings come back as they are")
	_, err := confirm(t, s, "c", "tok-2", at(5*time.Minute))
	require.ErrorIs(t, err, store.ErrNotFound, "a token refused is not stored")
	_, ok = issue(t, s, "c", "ops@example.com", "tok-3", at(5*time.Minute))
	require.True(t, ok)
	// Another consumer has its own interval; a consumer never set has
	// no address to confirm.
	setAddress(t, s, "d", "d@example.com", at(0))
	_, ok = issue(t, s, "d", "d@example.com", "tok-d", at(time.Second))
	require.True(t, ok)
	got, ok = issue(t, s, "e", "e@example.com", "tok-e", at(time.Second))
	require.False(t, ok)
	require.Empty(t, got.Email)
}

func testNoticeIssueConcurrent(t *testing.T, s store.Store) {
	setAddress(t, s, "c", "ops@example.com", at(0))
	const n = 8
	var wg sync.WaitGroup
	oks := make(chan string, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			token := fmt.Sprintf("tok-%d", i)
			_, ok, err := s.NoticeAddressIssue(t.Context(), &store.NoticeAddressIssueParams{
				ConsumerID: "c", Email: "ops@example.com", TokenHash: sha256.Sum256([]byte(token)),
				TTL: time.Hour, Every: 5 * time.Minute, Now: at(time.Second),
			})
			assert.NoError(t, err)
			if ok {
				oks <- token
			}
		}()
	}
	wg.Wait()
	close(oks)
	var won []string
	for tok := range oks {
		won = append(won, tok)
	}
	require.Len(t, won, 1, "one token is issued")
	_, err := confirm(t, s, "c", won[0], at(time.Minute))
	require.NoError(t, err)
}

func testNoticeSetConfirmed(t *testing.T, s store.Store) {
	got, err := s.NoticeAddressSet(t.Context(), &store.NoticeAddressSetParams{
		ConsumerID: "c", Email: "ops@example.com", Confirmed: true, Now: at(0),
	})
	require.NoError(t, err)
	require.True(t, got.Confirmed())
	requireTime(t, at(0), got.ConfirmedAt)
	require.True(t, getAddress(t, s, "c").Confirmed())

	// A pending address set again as confirmed becomes confirmed; one
	// set again without it stays as it was.
	setAddress(t, s, "d", "d@example.com", at(0))
	got = setAddress(t, s, "d", "d@example.com", at(time.Minute))
	require.False(t, got.Confirmed())
	got, err = s.NoticeAddressSet(t.Context(), &store.NoticeAddressSetParams{
		ConsumerID: "d", Email: "d@example.com", Confirmed: true, Now: at(2 * time.Minute),
	})
	require.NoError(t, err)
	require.True(t, got.Confirmed())
	requireTime(t, at(2*time.Minute), got.ConfirmedAt)
	requireTime(t, at(0), got.UpdatedAt)
	got = setAddress(t, s, "d", "d@example.com", at(3*time.Minute))
	require.True(t, got.Confirmed())

	// Confirmed: true with no address confirms nothing.
	got, err = s.NoticeAddressSet(t.Context(), &store.NoticeAddressSetParams{
		ConsumerID: "c", Email: "", Confirmed: true, Now: at(time.Hour),
	})
	require.NoError(t, err)
	require.False(t, got.Confirmed())
	require.True(t, got.ConfirmedAt.IsZero())
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
	require.NoError(t, s.NoticeRelease(t.Context(), &store.NoticeReleaseParams{Reservation: r}))
	r, ok = reserve(t, s, "ep_1", at(time.Minute))
	require.True(t, ok, "released: the mail was not sent")
	require.True(t, r.Previous.IsZero())

	// A later one released goes back to the one before it.
	r2, ok := reserve(t, s, "ep_1", at(time.Minute+time.Hour))
	require.True(t, ok)
	requireTime(t, at(time.Minute), r2.Previous)
	require.NoError(t, s.NoticeRelease(t.Context(), &store.NoticeReleaseParams{Reservation: r2}))
	_, ok = reserve(t, s, "ep_1", at(time.Minute+time.Hour-time.Second))
	require.False(t, ok, "back to the notice at 1m: the hour from it still counts")
	r3, ok := reserve(t, s, "ep_1", at(time.Minute+time.Hour+time.Second))
	require.True(t, ok)

	// A stale release (its reservation replaced) changes nothing.
	require.NoError(t, s.NoticeRelease(t.Context(), &store.NoticeReleaseParams{Reservation: r2}))
	require.NoError(t, s.NoticeRelease(t.Context(), &store.NoticeReleaseParams{Reservation: r}))
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
