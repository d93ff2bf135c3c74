package notice_test

import (
	"bytes"
	"context"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhooks/herald"
	"github.com/heraldhooks/herald/internal/clock"
	"github.com/heraldhooks/herald/internal/config"
	"github.com/heraldhooks/herald/internal/notice"
	"github.com/heraldhooks/herald/internal/notice/smtptest"
	"github.com/heraldhooks/herald/internal/store"
	"github.com/heraldhooks/herald/internal/store/sqlitestore"
)

var start = time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)

type result struct{ kind, result string }

type env struct {
	t      *testing.T
	store  store.Store
	clock  *clock.Test
	smtp   *smtptest.Server
	sender notice.Sender
}

func setup(t *testing.T) *env {
	t.Helper()
	ctx := context.Background()
	st, err := sqlitestore.Open(ctx, filepath.Join(t.TempDir(), "herald.db"), nil)
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	require.NoError(t, st.Migrate(ctx))
	srv := smtptest.Start(t)
	cfg, err := config.ParseSMTP(srv.URL, "")
	require.NoError(t, err)
	return &env{t: t, store: st, clock: clock.NewTest(start), smtp: srv, sender: notice.NewSMTP(cfg)}
}

// mailer runs a Mailer (a node's) until the test ends; its results arrive
// on the channel.
func (e *env) mailer(opts ...func(*notice.Config)) (*notice.Mailer, chan result) {
	e.t.Helper()
	results := make(chan result, 100)
	cfg := notice.Config{
		Store: e.store, Sender: e.sender, Clock: e.clock,
		Counted: func(kind, r string) { results <- result{kind, r} },
	}
	for _, f := range opts {
		f(&cfg)
	}
	m := notice.New(cfg)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = m.Run(ctx) }()
	e.t.Cleanup(func() { cancel(); <-done })
	return m, results
}

func (e *env) endpoint(consumer, url string) *herald.Endpoint {
	e.t.Helper()
	ep, err := e.store.EndpointCreate(context.Background(), &store.EndpointCreateParams{Endpoint: &herald.Endpoint{
		ConsumerID: consumer, URL: url, EventTypes: []string{"*"}, Secret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", Enabled: true,
	}, Now: e.clock.Now()})
	require.NoError(e.t, err)
	return ep
}

// address sets consumer's address confirmed (as an operator may).
func (e *env) address(consumer, email string) {
	e.t.Helper()
	_, err := e.store.NoticeAddressSet(context.Background(), &store.NoticeAddressSetParams{
		ConsumerID: consumer, Email: email, Confirmed: true, Now: e.clock.Now(),
	})
	require.NoError(e.t, err)
}

// pending sets consumer's address as a consumer does: pending.
func (e *env) pending(consumer, email string) {
	e.t.Helper()
	got, err := e.store.NoticeAddressSet(context.Background(), &store.NoticeAddressSetParams{
		ConsumerID: consumer, Email: email, Now: e.clock.Now(),
	})
	require.NoError(e.t, err)
	require.False(e.t, got.Confirmed())
}

func next(t *testing.T, results chan result) result {
	t.Helper()
	select {
	case r := <-results:
		return r
	case <-time.After(10 * time.Second):
		t.Fatal("no notice result within 10s")
		return result{}
	}
}

func failing(ep *herald.Endpoint) herald.Notification {
	return herald.NewNotification(ep.ConsumerID, herald.NotifyEndpointFailing, herald.EndpointFailingPayload{
		EndpointID: ep.ID, ConsumerID: ep.ConsumerID, URL: ep.URL, ConsecutiveFailures: 3,
		FailingSince: start.Add(-time.Minute), LastStatusCode: 503, LastError: "HTTP 503",
	})
}

func dead(ep *herald.Endpoint) herald.Notification {
	return herald.NewNotification(ep.ConsumerID, herald.NotifyDeliveryDead, herald.DeliveryDeadPayload{
		DeliveryID: "dlv_1", EventID: "evt_1", EventType: "order.created", EndpointID: ep.ID, ConsumerID: ep.ConsumerID,
		DeadReason: "exhausted", AttemptCount: 7, LastError: "dial tcp: connection refused",
	})
}

func disabled(ep *herald.Endpoint, at time.Time) herald.Notification {
	return herald.NewNotification(ep.ConsumerID, herald.NotifyEndpointDisabled, herald.EndpointDisabledPayload{
		EndpointID: ep.ID, ConsumerID: ep.ConsumerID, URL: ep.URL, Reason: "auto_disabled", DisabledAt: at,
	})
}

func TestMailer(t *testing.T) {
	t.Parallel()

	t.Run("MailsTheOwnerOncePerEndpointPerHour", func(t *testing.T) {
		t.Parallel()
		e := setup(t)
		m, results := e.mailer()
		ep := e.endpoint("cust_42", "https://hooks.example.com/orders")
		e.address("cust_42", "ops@example.com")

		m.Notify(failing(ep))
		require.Equal(t, result{notice.KindFailing, notice.ResultSent}, next(t, results))
		mails := e.smtp.Wait(t, 1, 10*time.Second)
		got := mails[0]
		require.Equal(t, []string{"ops@example.com"}, got.To)
		require.Equal(t, "herald@example.com", got.From)
		require.Equal(t, "Herald: your endpoint "+ep.ID+" is failing", got.Subject)
		for _, want := range []string{ep.ID, "https://hooks.example.com/orders", "3 attempts in a row", "HTTP 503",
			"2026-05-01 12:00:00 UTC", "What to do", "answers POST requests", "cust_42"} {
			require.Contains(t, got.Body, want)
		}

		// Within the hour: a dead delivery of the same endpoint is not
		// mailed, and neither is a recovery (never mailed).
		e.clock.Advance(59 * time.Minute)
		m.Notify(dead(ep))
		m.Notify(herald.NewNotification(ep.ConsumerID, herald.NotifyEndpointRecovered, herald.EndpointRecoveredPayload{EndpointID: ep.ID}))
		require.Equal(t, result{notice.KindDead, notice.ResultLimited}, next(t, results))

		// Another endpoint has its own hour.
		other := e.endpoint("cust_42", "https://hooks.example.com/other")
		m.Notify(dead(other))
		require.Equal(t, result{notice.KindDead, notice.ResultSent}, next(t, results))
		got = e.smtp.Wait(t, 2, 10*time.Second)[1]
		require.Equal(t, "Herald: a delivery to your endpoint "+other.ID+" went dead", got.Subject)
		for _, want := range []string{other.ID, "https://hooks.example.com/other", "dlv_1", "evt_1", "order.created",
			"after 7 attempt(s)", "exhausted", "connection refused", "/v1/deliveries/dlv_1/replay"} {
			require.Contains(t, got.Body, want)
		}

		// Past the hour, the first endpoint is mailed again.
		e.clock.Advance(time.Minute + time.Second)
		m.Notify(disabled(ep, e.clock.Now()))
		require.Equal(t, result{notice.KindDisabled, notice.ResultSent}, next(t, results))
		got = e.smtp.Wait(t, 3, 10*time.Second)[2]
		require.Equal(t, "Herald: your endpoint "+ep.ID+" was disabled", got.Subject)
		for _, want := range []string{"sends it nothing until it is enabled", "kept failing", "2026-05-01 13:00:01 UTC",
			"/v1/endpoints/" + ep.ID + "/enable"} {
			require.Contains(t, got.Body, want)
		}
		require.Len(t, e.smtp.Mails(), 3)
	})

	t.Run("NoAddressNoMail", func(t *testing.T) {
		t.Parallel()
		e := setup(t)
		m, results := e.mailer()
		ep := e.endpoint("cust_42", "https://hooks.example.com/orders")
		m.Notify(failing(ep))
		require.Equal(t, result{notice.KindFailing, notice.ResultNoAddress}, next(t, results))
		// Cleared is as never set.
		e.address("cust_42", "ops@example.com")
		e.address("cust_42", "")
		m.Notify(failing(ep))
		require.Equal(t, result{notice.KindFailing, notice.ResultNoAddress}, next(t, results))
		require.Empty(t, e.smtp.Mails())
	})

	t.Run("FailedSendIsTriedAgainLater", func(t *testing.T) {
		t.Parallel()
		e := setup(t)
		m, results := e.mailer(func(c *notice.Config) { c.Retries = []time.Duration{time.Minute} })
		ep := e.endpoint("cust_42", "https://hooks.example.com/orders")
		e.address("cust_42", "ops@example.com")
		e.smtp.FailNext(2)
		m.Notify(failing(ep))
		require.Equal(t, result{notice.KindFailing, notice.ResultFailed}, next(t, results))
		// The failed send gave its hour back: a minute later it goes.
		e.clock.Advance(time.Minute)
		require.Equal(t, result{notice.KindFailing, notice.ResultFailed}, next(t, results))
		// Out of retries: dropped, and the hour is free for the next.
		require.Equal(t, result{notice.KindFailing, notice.ResultDropped}, next(t, results))
		require.Empty(t, e.smtp.Mails())
		m.Notify(dead(ep))
		require.Equal(t, result{notice.KindDead, notice.ResultSent}, next(t, results))
		require.Len(t, e.smtp.Wait(t, 1, 10*time.Second), 1)
	})

	t.Run("RetryAfterAFailureSends", func(t *testing.T) {
		t.Parallel()
		e := setup(t)
		m, results := e.mailer()
		ep := e.endpoint("cust_42", "https://hooks.example.com/orders")
		e.address("cust_42", "ops@example.com")
		e.smtp.FailNext(1)
		m.Notify(failing(ep))
		require.Equal(t, result{notice.KindFailing, notice.ResultFailed}, next(t, results))
		e.clock.Advance(notice.DefaultRetries[0])
		require.Equal(t, result{notice.KindFailing, notice.ResultSent}, next(t, results))
		got := e.smtp.Wait(t, 1, 10*time.Second)
		require.Contains(t, got[0].Subject, "is failing")
	})

	t.Run("TwoNodesSendOneMail", func(t *testing.T) {
		t.Parallel()
		e := setup(t)
		a, ra := e.mailer()
		b, rb := e.mailer()
		ep := e.endpoint("cust_42", "https://hooks.example.com/orders")
		e.address("cust_42", "ops@example.com")
		a.Notify(failing(ep))
		b.Notify(failing(ep))
		got := []string{next(t, ra).result, next(t, rb).result}
		require.ElementsMatch(t, []string{notice.ResultSent, notice.ResultLimited}, got)
		require.Len(t, e.smtp.Wait(t, 1, 10*time.Second), 1)
	})

	t.Run("FullQueueDropsAndCounts", func(t *testing.T) {
		t.Parallel()
		e := setup(t)
		var counted []result
		var logged bytes.Buffer
		m := notice.New(notice.Config{Store: e.store, Sender: e.sender, Clock: e.clock, QueueSize: 2,
			Logger:  slog.New(slog.NewTextHandler(&logged, nil)),
			Counted: func(kind, r string) { counted = append(counted, result{kind, r}) }})
		ep := e.endpoint("cust_42", "https://hooks.example.com/orders")
		for range 5 {
			m.Notify(failing(ep)) // nothing runs it: the third and later find no room
		}
		drop := result{notice.KindFailing, notice.ResultDropped}
		require.Equal(t, []result{drop, drop, drop}, counted, "every drop is counted")
		require.Equal(t, 1, strings.Count(logged.String(), "notice queue full"), "a spell of drops logs once: %s", logged.String())
	})
}

func TestMessageNamesNoHeaderTricks(t *testing.T) {
	t.Parallel()
	e := setup(t)
	m, results := e.mailer()
	ep := e.endpoint("cust_42", "https://hooks.example.com/x")
	e.address("cust_42", "ops@example.com")
	n := herald.NewNotification("cust_42", herald.NotifyEndpointDisabled, herald.EndpointDisabledPayload{
		EndpointID: ep.ID, ConsumerID: "cust_42", URL: ep.URL, Reason: "disabled by the operator: x\r\nBcc: evil@example.com", DisabledAt: start,
	})
	m.Notify(n)
	require.Equal(t, notice.ResultSent, next(t, results).result)
	got := e.smtp.Wait(t, 1, 10*time.Second)[0]
	require.Equal(t, []string{"ops@example.com"}, got.To)
	head, _, _ := strings.Cut(got.Raw, "\r\n\r\n")
	require.NotContains(t, head, "evil@example.com")
}
