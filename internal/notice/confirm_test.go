package notice_test

import (
	"net/url"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhooks/herald/internal/auth"
	"github.com/heraldhooks/herald/internal/notice"
	"github.com/heraldhooks/herald/internal/store"
)

// linkRE finds the confirmation link in a mail.
var linkRE = regexp.MustCompile(`https?://\S+/portal/confirm\?\S+`)

// issue records a confirmation token for consumer's pending address, as
// the API does, and returns it.
func (e *env) issue(consumer, email string) (string, *store.NoticeAddress) {
	e.t.Helper()
	token, err := auth.NewPortalToken()
	require.NoError(e.t, err)
	cn, ok, err := e.store.NoticeAddressIssue(e.t.Context(), &store.NoticeAddressIssueParams{
		ConsumerID: consumer, Email: email, TokenHash: auth.Hash(token), TTL: 48 * time.Hour, Every: 5 * time.Minute, Now: e.clock.Now(),
	})
	require.NoError(e.t, err)
	require.True(e.t, ok)
	return token, cn
}

// TestConfirmation: the confirmation mail goes to the pending address
// with a link to this server's confirmation page holding a token that
// confirms it; notices wait for that, and flow once it is done.
func TestConfirmation(t *testing.T) {
	t.Parallel()

	t.Run("MailHoldsAWorkingLink", func(t *testing.T) {
		t.Parallel()
		e := setup(t)
		var counted []result
		c := notice.NewConfirmer(e.sender, "https://hooks.example.com/", func(kind, r string) { counted = append(counted, result{kind, r}) })
		e.pending("cust 42", "ops@example.com")
		token, cn := e.issue("cust 42", "ops@example.com")
		require.NoError(t, c.MailConfirmation(t.Context(), notice.Confirmation{
			ConsumerID: "cust 42", Email: "ops@example.com", Token: token, ExpiresAt: cn.ConfirmationExpiresAt,
		}))
		require.Equal(t, []result{{notice.KindConfirmation, notice.ResultSent}}, counted)

		got := e.smtp.Wait(t, 1, 10*time.Second)[0]
		require.Equal(t, []string{"ops@example.com"}, got.To)
		require.Equal(t, "Herald: confirm this address for notices about consumer cust 42", got.Subject)
		for _, want := range []string{"ops@example.com", "consumer cust 42", "2026-05-03 12:00:00 UTC",
			"POST /v1/consumers/cust%2042/notifications/confirm", "If you did not expect this mail"} {
			require.Contains(t, got.Body, want)
		}
		link := linkRE.FindString(got.Body)
		require.NotEmpty(t, link, got.Body)
		u, err := url.Parse(link)
		require.NoError(t, err)
		require.Equal(t, "hooks.example.com", u.Host)
		require.Equal(t, notice.ConfirmPath, u.Path)
		require.Equal(t, "cust 42", u.Query().Get("consumer"))
		require.Equal(t, token, u.Query().Get("token"))

		// The link's token confirms the address, once.
		confirmed, err := e.store.NoticeAddressConfirm(t.Context(), &store.NoticeAddressConfirmParams{
			ConsumerID: "cust 42", TokenHash: auth.Hash(u.Query().Get("token")), Now: e.clock.Now(),
		})
		require.NoError(t, err)
		require.True(t, confirmed.Confirmed())
	})

	t.Run("RefusedMailIsAnError", func(t *testing.T) {
		t.Parallel()
		e := setup(t)
		var counted []result
		c := notice.NewConfirmer(e.sender, "https://hooks.example.com", func(kind, r string) { counted = append(counted, result{kind, r}) })
		e.smtp.FailNext(1)
		err := c.MailConfirmation(t.Context(), notice.Confirmation{ConsumerID: "c", Email: "ops@example.com", Token: "t", ExpiresAt: start})
		require.Error(t, err)
		require.Equal(t, []result{{notice.KindConfirmation, notice.ResultFailed}}, counted)
		require.Empty(t, e.smtp.Mails())
	})

	t.Run("NoticesWaitForTheConfirmation", func(t *testing.T) {
		t.Parallel()
		e := setup(t)
		m, results := e.mailer()
		ep := e.endpoint("cust_42", "https://hooks.example.com/orders")
		e.pending("cust_42", "stranger@example.com")
		m.Notify(failing(ep))
		require.Equal(t, result{notice.KindFailing, notice.ResultUnconfirmed}, next(t, results))
		token, _ := e.issue("cust_42", "stranger@example.com")
		m.Notify(dead(ep))
		require.Equal(t, result{notice.KindDead, notice.ResultUnconfirmed}, next(t, results), "a token mailed is no confirmation")
		require.Empty(t, e.smtp.Mails())

		_, err := e.store.NoticeAddressConfirm(t.Context(), &store.NoticeAddressConfirmParams{
			ConsumerID: "cust_42", TokenHash: auth.Hash(token), Now: e.clock.Now(),
		})
		require.NoError(t, err)
		m.Notify(dead(ep))
		require.Equal(t, result{notice.KindDead, notice.ResultSent}, next(t, results))
		got := e.smtp.Wait(t, 1, 10*time.Second)[0]
		require.Equal(t, []string{"stranger@example.com"}, got.To)

		// A new address is pending again: nothing goes to it.
		e.clock.Advance(2 * time.Hour)
		e.pending("cust_42", "other@example.com")
		m.Notify(dead(ep))
		require.Equal(t, result{notice.KindDead, notice.ResultUnconfirmed}, next(t, results))
		require.Len(t, e.smtp.Mails(), 1)
	})
}

// TestConfirmationQueue: the API queues a confirmation mail on the
// mailer (QueueConfirmation) and answers at once; the mailer sends it,
// tries again after a refusal, withdraws its token when the retries run
// out, and sends nothing for an address changed meanwhile.
func TestConfirmationQueue(t *testing.T) {
	t.Parallel()
	confirming := func(e *env) func(*notice.Config) {
		return func(c *notice.Config) {
			c.Confirmer = notice.NewConfirmer(e.sender, "https://hooks.example.com", nil)
			c.Retries = []time.Duration{time.Minute}
		}
	}
	queued := func(e *env, consumer, email string) notice.Confirmation {
		e.pending(consumer, email)
		token, cn := e.issue(consumer, email)
		return notice.Confirmation{ConsumerID: consumer, Email: email, Token: token, TokenHash: auth.Hash(token), ExpiresAt: cn.ConfirmationExpiresAt}
	}
	sent := result{notice.KindConfirmation, notice.ResultSent}
	failed := result{notice.KindConfirmation, notice.ResultFailed}

	t.Run("QueuedWithoutWaitingForTheMailServer", func(t *testing.T) {
		t.Parallel()
		e := setup(t)
		m, results := e.mailer(confirming(e))
		release := e.smtp.Hold(t)
		cf := queued(e, "cust_42", "ops@example.com")
		done := make(chan bool, 1)
		go func() { done <- m.QueueConfirmation(cf) }()
		select {
		case ok := <-done:
			require.True(t, ok)
		case <-time.After(10 * time.Second):
			t.Fatal("QueueConfirmation waited for the mail server")
		}
		require.Empty(t, e.smtp.Mails(), "held by the server")
		release()
		require.Equal(t, sent, next(t, results))
		require.Contains(t, e.smtp.Wait(t, 1, 10*time.Second)[0].Body, cf.Token)
	})

	t.Run("RefusedMailIsTriedAgain", func(t *testing.T) {
		t.Parallel()
		e := setup(t)
		m, results := e.mailer(confirming(e))
		cf := queued(e, "cust_42", "ops@example.com")
		e.smtp.FailNext(1)
		require.True(t, m.QueueConfirmation(cf))
		require.Equal(t, failed, next(t, results))
		require.Empty(t, e.smtp.Mails())
		e.clock.Advance(time.Minute)
		require.Equal(t, sent, next(t, results))
		require.Contains(t, e.smtp.Wait(t, 1, 10*time.Second)[0].Body, cf.Token)
	})

	t.Run("OutOfRetriesTheTokenIsWithdrawn", func(t *testing.T) {
		t.Parallel()
		e := setup(t)
		m, results := e.mailer(confirming(e))
		cf := queued(e, "cust_42", "ops@example.com")
		e.smtp.FailNext(2)
		require.True(t, m.QueueConfirmation(cf))
		require.Equal(t, failed, next(t, results))
		e.clock.Advance(time.Minute)
		require.Equal(t, failed, next(t, results))
		require.Equal(t, result{notice.KindConfirmation, notice.ResultDropped}, next(t, results))
		cn, err := e.store.NoticeAddressGet(t.Context(), "cust_42")
		require.NoError(t, err)
		require.Equal(t, "ops@example.com", cn.Email)
		require.True(t, cn.ConfirmationSentAt.IsZero(), "no token stands, so a new one may be mailed at once")
	})

	t.Run("ChangedAddressIsNotMailed", func(t *testing.T) {
		t.Parallel()
		e := setup(t)
		m, results := e.mailer(confirming(e))
		old := queued(e, "cust_42", "old@example.com")
		e.pending("cust_42", "new@example.com")
		require.True(t, m.QueueConfirmation(old))
		newer := queued(e, "cust_43", "ops@example.com")
		require.True(t, m.QueueConfirmation(newer))
		require.Equal(t, sent, next(t, results), "the queue went on to the next")
		got := e.smtp.Wait(t, 1, 10*time.Second)
		require.Len(t, got, 1)
		require.Equal(t, []string{"ops@example.com"}, got[0].To)
	})

	t.Run("WithoutAConfirmerNothingIsQueued", func(t *testing.T) {
		t.Parallel()
		e := setup(t)
		m, _ := e.mailer()
		require.False(t, m.QueueConfirmation(queued(e, "cust_42", "ops@example.com")))
	})
}
