package api_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhooks/herald"
	"github.com/heraldhooks/herald/internal/notice/smtptest"
	"github.com/heraldhooks/herald/internal/wire"
)

type noticeAddressOut struct {
	ConsumerID            string     `json:"consumer_id"`
	Email                 *string    `json:"email"`
	UpdatedAt             *time.Time `json:"updated_at"`
	Status                *string    `json:"status"`
	ConfirmedAt           *time.Time `json:"confirmed_at"`
	ConfirmationSentAt    *time.Time `json:"confirmation_sent_at"`
	ConfirmationExpiresAt *time.Time `json:"confirmation_expires_at"`
	MailEnabled           bool       `json:"mail_enabled"`
	Detail                string     `json:"detail"`
}

func TestNoticeAddress(t *testing.T) {
	t.Parallel()

	t.Run("SetReadAndClear", func(t *testing.T) {
		t.Parallel()
		e := setup(t)
		var got noticeAddressOut
		e.do("GET", "/v1/consumers/cust_42/notifications", nil).must(http.StatusOK, &got)
		require.Equal(t, noticeAddressOut{ConsumerID: "cust_42", Detail: "No address is set: no notices are mailed."}, got,
			"never set: email and updated_at null")
		r := e.do("GET", "/v1/consumers/cust_42/notifications", nil)
		require.JSONEq(t, `{"consumer_id":"cust_42","email":null,"updated_at":null,"status":null,"confirmed_at":null,
			"confirmation_sent_at":null,"confirmation_expires_at":null,"mail_enabled":false,
			"detail":"No address is set: no notices are mailed."}`, string(r.body))

		e.do("PUT", "/v1/consumers/cust_42/notifications", `{"email":"ops@example.com"}`).must(http.StatusOK, &got)
		require.Equal(t, "ops@example.com", *got.Email)
		require.True(t, got.UpdatedAt.Equal(e.clock.Now()), "updated_at %v", got.UpdatedAt)
		got = noticeAddressOut{}
		e.do("GET", "/v1/consumers/cust_42/notifications", nil).must(http.StatusOK, &got)
		require.Equal(t, "ops@example.com", *got.Email)

		for _, clear := range []string{`{"email":null}`, `{"email":""}`} {
			e.do("PUT", "/v1/consumers/cust_42/notifications", `{"email":"ops@example.com"}`).must(http.StatusOK, nil)
			e.clock.Advance(time.Minute)
			got = noticeAddressOut{}
			e.do("PUT", "/v1/consumers/cust_42/notifications", clear).must(http.StatusOK, &got)
			require.Nil(t, got.Email, clear)
			require.True(t, got.UpdatedAt.Equal(e.clock.Now()), "cleared at %v", got.UpdatedAt)
			got = noticeAddressOut{}
			e.do("GET", "/v1/consumers/cust_42/notifications", nil).must(http.StatusOK, &got)
			require.Nil(t, got.Email, clear)
		}
	})

	t.Run("InvalidAddressChangesNothing", func(t *testing.T) {
		t.Parallel()
		e := setup(t)
		e.do("PUT", "/v1/consumers/cust_42/notifications", `{"email":"ops@example.com"}`).must(http.StatusOK, nil)
		for _, body := range []string{
			`{"email":"Ops <evil@example.com>"}`, `{"email":"a@example.com, b@example.com"}`,
			`{"email":"ops@example.com\r\nBcc: evil@example.com"}`, `{"email":"not an address"}`,
			`{"email":"` + strings.Repeat("a", 250) + `@example.com"}`, `{}`,
		} {
			msg := e.do("PUT", "/v1/consumers/cust_42/notifications", body).apiErr(http.StatusBadRequest, "invalid_email")
			require.Contains(t, msg, "email", body)
		}
		e.do("PUT", "/v1/consumers/cust_42/notifications", `{"email":1}`).apiErr(http.StatusBadRequest, "invalid_type")
		e.do("PUT", "/v1/consumers/cust_42/notifications", `{"email":"ops@example.com","cc":"x@example.com"}`).
			apiErr(http.StatusBadRequest, "unknown_field")
		var got noticeAddressOut
		e.do("GET", "/v1/consumers/cust_42/notifications", nil).must(http.StatusOK, &got)
		require.Equal(t, "ops@example.com", *got.Email, "nothing refused was stored")
	})

	t.Run("ConsumerKeyReachesItsOwnOnly", func(t *testing.T) {
		t.Parallel()
		e := setup(t)
		key := e.createKey("consumer", "cust_a")
		e.do("PUT", "/v1/consumers/cust_b/notifications", `{"email":"b@example.com"}`).must(http.StatusOK, nil)
		var got noticeAddressOut
		e.doKey(key.Key, "PUT", "/v1/consumers/cust_a/notifications", `{"email":"a@example.com"}`).must(http.StatusOK, &got)
		require.Equal(t, "a@example.com", *got.Email)
		e.doKey(key.Key, "GET", "/v1/consumers/cust_b/notifications", nil).apiErr(http.StatusNotFound, "not_found")
		e.doKey(key.Key, "PUT", "/v1/consumers/cust_b/notifications", `{"email":"evil@example.com"}`).apiErr(http.StatusNotFound, "not_found")
		e.do("GET", "/v1/consumers/cust_b/notifications", nil).must(http.StatusOK, &got)
		require.Equal(t, "b@example.com", *got.Email)
	})
}

// TestOperatorDisableNotifies: an operator's disable of an enabled
// endpoint is handed to Notify (for mail); a consumer's own disable, or
// one of an endpoint already disabled, is not.
func TestOperatorDisableNotifies(t *testing.T) {
	t.Parallel()
	var (
		mu  sync.Mutex
		got []herald.Notification
	)
	e := setup(t, func(o *options) {
		o.notify = func(n herald.Notification) { mu.Lock(); got = append(got, n); mu.Unlock() }
	})
	ep := e.createEndpoint(map[string]any{"consumer_id": "cust_a", "url": "https://a.example.com/hooks"})
	e.do("POST", "/v1/endpoints/"+ep.ID+"/disable", `{"reason":"abuse"}`).must(http.StatusOK, nil)
	e.do("POST", "/v1/endpoints/"+ep.ID+"/disable", nil).must(http.StatusOK, nil) // already disabled
	e.do("POST", "/v1/endpoints/"+ep.ID+"/enable", nil).must(http.StatusOK, nil)
	key := e.createKey("consumer", "cust_a")
	e.doKey(key.Key, "POST", "/v1/endpoints/"+ep.ID+"/disable", nil).must(http.StatusOK, nil)

	mu.Lock()
	defer mu.Unlock()
	require.Len(t, got, 1)
	require.Equal(t, herald.NotifyEndpointDisabled, got[0].EventType)
	require.Equal(t, "cust_a", got[0].ConsumerID)
	var p herald.EndpointDisabledPayload
	require.NoError(t, json.Unmarshal(got[0].Payload, &p))
	require.Equal(t, ep.ID, p.EndpointID)
	require.Equal(t, "https://a.example.com/hooks", p.URL)
	require.Equal(t, "disabled by the operator: abuse", p.Reason)
	require.True(t, p.DisabledAt.Equal(e.clock.Now()))
}

// mailedToken waits for the n-th mail and returns the token of its
// confirmation link, checking it goes to to and links to the server's
// confirmation page for consumer.
func mailedToken(t *testing.T, mail *smtptest.Server, n int, to, consumer string) string {
	t.Helper()
	got := mail.Wait(t, n, 10*time.Second)[n-1]
	require.Equal(t, []string{to}, got.To)
	link := regexp.MustCompile(`https://hooks\.example\.com/portal/confirm\?\S+`).FindString(got.Body)
	require.NotEmpty(t, link, got.Body)
	u, err := url.Parse(link)
	require.NoError(t, err)
	require.Equal(t, consumer, u.Query().Get("consumer"))
	token := u.Query().Get("token")
	require.Len(t, token, 43, "32 random bytes")
	return token
}

// TestNoticeAddressConfirmation: a new address is pending and mailed a
// link with a single-use token valid 48 hours; the token confirms it
// once, on its own consumer only; a resend waits 5 minutes; an operator
// may vouch for an address, a consumer may not; without mail nothing is
// sent and the answer says so.
func TestNoticeAddressConfirmation(t *testing.T) {
	t.Parallel()
	const path = "/v1/consumers/cust_42/notifications"
	confirmBody := func(token string) string { return `{"token":"` + token + `"}` }

	t.Run("NewAddressIsPendingUntilTheMailedTokenConfirmsIt", func(t *testing.T) {
		t.Parallel()
		mail := smtptest.Start(t)
		e := setup(t, func(o *options) { o.mail = mail })
		var got noticeAddressOut
		e.do("PUT", path, `{"email":"ops@example.com"}`).must(http.StatusOK, &got)
		require.Equal(t, wire.NoticeAddressPending, *got.Status)
		require.True(t, got.MailEnabled)
		require.Nil(t, got.ConfirmedAt)
		require.True(t, got.ConfirmationSentAt.Equal(e.clock.Now()))
		require.True(t, got.ConfirmationExpiresAt.Equal(e.clock.Now().Add(48*time.Hour)))
		require.Contains(t, got.Detail, "A confirmation link is being mailed to ops@example.com")
		token := mailedToken(t, mail, 1, "ops@example.com", "cust_42")
		require.Contains(t, mail.Mails()[0].Body, token)

		got = noticeAddressOut{}
		e.do("GET", path, nil).must(http.StatusOK, &got)
		require.Equal(t, wire.NoticeAddressPending, *got.Status)
		require.Contains(t, got.Detail, "Waiting for confirmation")

		// A wrong token confirms nothing: the mailed one with its first
		// character changed.
		wrong := "x" + token[1:]
		if token[0] == 'x' {
			wrong = "y" + token[1:]
		}
		e.do("POST", path+"/confirm", confirmBody(wrong)).apiErr(http.StatusBadRequest, "invalid_token")
		e.do("POST", path+"/confirm", `{}`).apiErr(http.StatusBadRequest, "invalid_token")
		e.do("POST", path+"/confirm", `{"token":"`+token+`","email":"x@example.com"}`).apiErr(http.StatusBadRequest, "unknown_field")
		e.do("GET", path, nil).must(http.StatusOK, &got)
		require.Equal(t, wire.NoticeAddressPending, *got.Status)

		e.clock.Advance(time.Hour)
		got = noticeAddressOut{}
		e.do("POST", path+"/confirm", confirmBody(token)).must(http.StatusOK, &got)
		require.Equal(t, wire.NoticeAddressConfirmed, *got.Status)
		require.True(t, got.ConfirmedAt.Equal(e.clock.Now()))
		require.Equal(t, "ops@example.com", *got.Email)
		require.Contains(t, got.Detail, "notices are mailed to ops@example.com")
		// Used once, it is used.
		msg := e.do("POST", path+"/confirm", confirmBody(token)).apiErr(http.StatusConflict, "token_used")
		require.Contains(t, msg, "used already")

		// The confirmed address set again stays confirmed, and is not
		// mailed again; a new one is pending and mailed.
		got = noticeAddressOut{}
		e.do("PUT", path, `{"email":"ops@example.com"}`).must(http.StatusOK, &got)
		require.Equal(t, wire.NoticeAddressConfirmed, *got.Status)
		got = noticeAddressOut{}
		e.do("PUT", path, `{"email":"new@example.com"}`).must(http.StatusOK, &got)
		require.Equal(t, wire.NoticeAddressPending, *got.Status)
		require.Nil(t, got.ConfirmedAt)
		mailedToken(t, mail, 2, "new@example.com", "cust_42")
		e.do("POST", path+"/confirm", confirmBody(token)).apiErr(http.StatusBadRequest, "invalid_token")
		require.Len(t, mail.Mails(), 2)
	})

	t.Run("ExpiredToken", func(t *testing.T) {
		t.Parallel()
		mail := smtptest.Start(t)
		e := setup(t, func(o *options) { o.mail = mail })
		e.do("PUT", path, `{"email":"ops@example.com"}`).must(http.StatusOK, nil)
		token := mailedToken(t, mail, 1, "ops@example.com", "cust_42")
		e.clock.Advance(48 * time.Hour)
		var got noticeAddressOut
		e.do("GET", path, nil).must(http.StatusOK, &got)
		require.Contains(t, got.Detail, "has expired")
		e.do("POST", path+"/confirm", confirmBody(token)).apiErr(http.StatusGone, "token_expired")
		e.do("GET", path, nil).must(http.StatusOK, &got)
		require.Equal(t, wire.NoticeAddressPending, *got.Status)
		// Set again, a new link works.
		e.do("PUT", path, `{"email":"ops@example.com"}`).must(http.StatusOK, nil)
		e.do("POST", path+"/confirm", confirmBody(mailedToken(t, mail, 2, "ops@example.com", "cust_42"))).must(http.StatusOK, nil)
	})

	t.Run("ResendAtMostEveryFiveMinutes", func(t *testing.T) {
		t.Parallel()
		mail := smtptest.Start(t)
		e := setup(t, func(o *options) { o.mail = mail })
		e.do("PUT", path, `{"email":"ops@example.com"}`).must(http.StatusOK, nil)
		first := mailedToken(t, mail, 1, "ops@example.com", "cust_42")
		e.clock.Advance(5*time.Minute - time.Second)
		var got noticeAddressOut
		e.do("PUT", path, `{"email":"ops@example.com"}`).must(http.StatusOK, &got)
		require.Equal(t, wire.NoticeAddressPending, *got.Status)
		require.True(t, got.ConfirmationSentAt.Equal(start), "the first link stands")
		require.Contains(t, got.Detail, "another can be sent from 2024-05-01 12:05 UTC")
		require.True(t, got.UpdatedAt.Equal(start), "the same address set again is no change")
		require.Len(t, mail.Mails(), 1)

		e.clock.Advance(time.Second)
		e.do("PUT", path, `{"email":"ops@example.com"}`).must(http.StatusOK, &got)
		require.True(t, got.ConfirmationSentAt.Equal(e.clock.Now()))
		second := mailedToken(t, mail, 2, "ops@example.com", "cust_42")
		require.NotEqual(t, first, second)
		e.do("POST", path+"/confirm", confirmBody(first)).apiErr(http.StatusBadRequest, "invalid_token")
		e.do("POST", path+"/confirm", confirmBody(second)).must(http.StatusOK, nil)
	})

	t.Run("AnsweredWithoutWaitingForTheMailServer", func(t *testing.T) {
		t.Parallel()
		mail := smtptest.Start(t)
		e := setup(t, func(o *options) { o.mail = mail })
		release := mail.Hold(t)
		answered := make(chan *response, 1)
		go func() { answered <- e.do("PUT", path, `{"email":"ops@example.com"}`) }()
		var r *response
		select {
		case r = <-answered:
		case <-time.After(10 * time.Second):
			t.Fatal("the PUT waited for the mail server")
		}
		var got noticeAddressOut
		r.must(http.StatusOK, &got)
		require.Contains(t, got.Detail, "A confirmation link is being mailed to ops@example.com")
		require.Empty(t, mail.Mails(), "the server holds the mail still")
		release()
		e.do("POST", path+"/confirm", confirmBody(mailedToken(t, mail, 1, "ops@example.com", "cust_42"))).must(http.StatusOK, nil)
	})

	t.Run("RefusedMailIsTriedAgainFromTheQueue", func(t *testing.T) {
		t.Parallel()
		mail := smtptest.Start(t)
		e := setup(t, func(o *options) { o.mail = mail })
		mail.FailNext(1)
		var got noticeAddressOut
		e.do("PUT", path, `{"email":"ops@example.com"}`).must(http.StatusOK, &got)
		require.Equal(t, wire.NoticeAddressPending, *got.Status)
		require.NotNil(t, got.ConfirmationSentAt)
		e.do("POST", path+"/confirm", confirmBody(mailedToken(t, mail, 1, "ops@example.com", "cust_42"))).must(http.StatusOK, nil)
		require.Len(t, mail.Mails(), 1, "one mail, sent on the second try")
	})

	t.Run("WithoutMailNothingIsSentAndNothingLost", func(t *testing.T) {
		t.Parallel()
		e := setup(t)
		var got noticeAddressOut
		e.do("PUT", path, `{"email":"ops@example.com"}`).must(http.StatusOK, &got)
		require.Equal(t, "ops@example.com", *got.Email)
		require.Equal(t, wire.NoticeAddressPending, *got.Status)
		require.False(t, got.MailEnabled)
		require.Nil(t, got.ConfirmationSentAt)
		require.Contains(t, got.Detail, "Mail is not configured on this server")
		got = noticeAddressOut{}
		e.do("GET", path, nil).must(http.StatusOK, &got)
		require.Equal(t, "ops@example.com", *got.Email, "the address is kept")
		require.Contains(t, got.Detail, "Mail is not configured on this server")
	})

	t.Run("OperatorMayVouchConsumerMayNot", func(t *testing.T) {
		t.Parallel()
		mail := smtptest.Start(t)
		e := setup(t, func(o *options) { o.mail = mail })
		var got noticeAddressOut
		e.do("PUT", path, `{"email":"ops@example.com","confirmed":true}`).must(http.StatusOK, &got)
		require.Equal(t, wire.NoticeAddressConfirmed, *got.Status)
		require.True(t, got.ConfirmedAt.Equal(e.clock.Now()))
		require.Empty(t, mail.Mails(), "an address the operator vouches for is mailed no link")

		key := e.createKey("consumer", "cust_42")
		msg := e.doKey(key.Key, "PUT", path, `{"email":"mine@example.com","confirmed":true}`).apiErr(http.StatusForbidden, "forbidden")
		require.Contains(t, msg, "only an operator key")
		e.do("GET", path, nil).must(http.StatusOK, &got)
		require.Equal(t, "ops@example.com", *got.Email, "a refused call changes nothing")
		require.Empty(t, mail.Mails())
		e.doKey(key.Key, "PUT", path, `{"email":"mine@example.com","confirmed":false}`).must(http.StatusOK, &got)
		require.Equal(t, wire.NoticeAddressPending, *got.Status)
		token := mailedToken(t, mail, 1, "mine@example.com", "cust_42")
		// The consumer confirms with its own key, as the mail tells.
		e.doKey(key.Key, "POST", path+"/confirm", confirmBody(token)).must(http.StatusOK, &got)
		require.Equal(t, wire.NoticeAddressConfirmed, *got.Status)
	})

	t.Run("ATokenConfirmsItsOwnConsumerOnly", func(t *testing.T) {
		t.Parallel()
		mail := smtptest.Start(t)
		e := setup(t, func(o *options) { o.mail = mail })
		a := e.createKey("consumer", "cust_a")
		e.do("PUT", "/v1/consumers/cust_b/notifications", `{"email":"b@example.com"}`).must(http.StatusOK, nil)
		bToken := mailedToken(t, mail, 1, "b@example.com", "cust_b")
		e.doKey(a.Key, "PUT", "/v1/consumers/cust_a/notifications", `{"email":"a@example.com"}`).must(http.StatusOK, nil)
		mailedToken(t, mail, 2, "a@example.com", "cust_a")

		e.doKey(a.Key, "POST", "/v1/consumers/cust_b/notifications/confirm", confirmBody(bToken)).apiErr(http.StatusNotFound, "not_found")
		e.doKey(a.Key, "POST", "/v1/consumers/cust_a/notifications/confirm", confirmBody(bToken)).apiErr(http.StatusBadRequest, "invalid_token")
		e.do("POST", "/v1/consumers/cust_a/notifications/confirm", confirmBody(bToken)).apiErr(http.StatusBadRequest, "invalid_token")
		var got noticeAddressOut
		for _, c := range []string{"cust_a", "cust_b"} {
			e.do("GET", "/v1/consumers/"+c+"/notifications", nil).must(http.StatusOK, &got)
			require.Equal(t, wire.NoticeAddressPending, *got.Status, c)
		}
		e.do("POST", "/v1/consumers/cust_b/notifications/confirm", confirmBody(bToken)).must(http.StatusOK, &got)
		require.Equal(t, wire.NoticeAddressConfirmed, *got.Status)
	})
}

// TestConfirmationMailLimit: a consumer's confirmation mails are at most
// 3 an hour whatever the address, counted in the database across nodes:
// alternating two addresses, through two nodes, mails 3, then answers
// 429 too_many_mails with Retry-After and changes nothing, until the
// first mail is an hour old. A PUT that mails nothing (the same address
// within 5 minutes, a clear, an operator's vouching) is not counted nor
// refused. On both backends.
func TestConfirmationMailLimit(t *testing.T) {
	t.Parallel()
	const path = "/v1/consumers/cust_42/notifications"
	for _, backend := range []struct {
		name string
		opts []func(*options)
	}{{"SQLite", nil}, {"PostgreSQL", []func(*options){onPostgres}}} {
		t.Run(backend.name, func(t *testing.T) {
			t.Parallel()
			mail := smtptest.Start(t)
			e := setup(t, append(backend.opts, func(o *options) { o.mail = mail })...)
			other := e.node()
			key := e.createKey("consumer", "cust_42")
			addresses := []string{"a@example.com", "b@example.com", "a@example.com"}
			nodes := []*env{e, other, e}
			for i, addr := range addresses {
				nodes[i].doKey(key.Key, "PUT", path, `{"email":"`+addr+`"}`).must(http.StatusOK, nil)
				mail.Wait(t, i+1, 10*time.Second)
				// The same address again at once mails nothing and is not refused.
				nodes[i].doKey(key.Key, "PUT", path, `{"email":"`+addr+`"}`).must(http.StatusOK, nil)
				e.clock.Advance(time.Minute)
			}
			for _, node := range []*env{e, other} {
				r := node.doKey(key.Key, "PUT", path, `{"email":"b@example.com"}`)
				msg := r.apiErr(http.StatusTooManyRequests, "too_many_mails")
				require.Contains(t, msg, "at most 3 confirmation mails an hour")
				require.Equal(t, "3420", r.header.Get("Retry-After"), "57 minutes: the first mail is an hour old then")
			}
			var got noticeAddressOut
			e.do("GET", path, nil).must(http.StatusOK, &got)
			require.Equal(t, "a@example.com", *got.Email, "a refused PUT changes nothing")
			require.Len(t, mail.Mails(), 3)

			// Clearing and vouching mail nothing, and go through.
			e.doKey(key.Key, "PUT", path, `{"email":null}`).must(http.StatusOK, nil)
			e.do("PUT", path, `{"email":"ops@example.com","confirmed":true}`).must(http.StatusOK, nil)
			// Another consumer has its own count.
			e.do("PUT", "/v1/consumers/cust_7/notifications", `{"email":"a@example.com"}`).must(http.StatusOK, nil)
			mail.Wait(t, 4, 10*time.Second)

			e.clock.Advance(57 * time.Minute)
			e.doKey(key.Key, "PUT", path, `{"email":"b@example.com"}`).must(http.StatusOK, &got)
			require.Equal(t, "b@example.com", *got.Email)
			require.Equal(t, []string{"b@example.com"}, mail.Wait(t, 5, 10*time.Second)[4].To)
			other.doKey(key.Key, "PUT", path, `{"email":"a@example.com"}`).apiErr(http.StatusTooManyRequests, "too_many_mails")
		})
	}
}
