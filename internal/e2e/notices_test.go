package e2e

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhooks/herald/internal/notice/smtptest"
)

// noticeTotal sums herald_notices_sent_total over kinds for one result.
func noticeTotal(s scrape, result string) float64 {
	var n float64
	for _, kind := range []string{"failing", "disabled", "dead"} {
		n += s.get(`herald_notices_sent_total{kind="` + kind + `",result="` + result + `"}`)
	}
	return n
}

// TestNoticesByMail runs a node with --smtp-url pointing at an SMTP server
// of the test's own: an endpoint whose receiver fails goes failing and its
// delivery dies, and the consumer's address gets one mail for both (one
// per endpoint per hour); an hour later, the operator disabling it is
// mailed too.
func TestNoticesByMail(t *testing.T) {
	t.Parallel()
	backends(t, func(t *testing.T, db string) {
		mail := smtptest.Start(t)
		e := setup(t, db, func(o *options) { o.smtpURL = mail.URL })
		bad := newReceiver(t, e.clock, func(_ int, _ *http.Request, w http.ResponseWriter) {
			w.WriteHeader(http.StatusServiceUnavailable)
		})
		ep := e.createEndpoint(map[string]any{"consumer_id": "c1", "url": bad.URL, "event_types": []string{"order.*"},
			"retry_schedule": []string{"0s", "1s", "1s"}})
		// The operator vouches for the address: no confirmation mail.
		e.must(http.StatusOK, "PUT", "/v1/consumers/c1/notifications", map[string]any{"email": "ops@example.com", "confirmed": true}, nil)
		// Another consumer's endpoint fails too; it has no address.
		other := e.createEndpoint(map[string]any{"consumer_id": "c2", "url": bad.URL, "retry_schedule": []string{"0s"}})

		sent := e.send("c1", "order.created", `{"n":1}`)
		e.send("c2", "order.created", `{"n":2}`)
		bad.waitHits(t, 2)
		e.settle()
		for range 2 {
			e.tick(2 * time.Second)
			e.settle()
		}
		require.Equal(t, "dead", e.waitStatus(sent.Deliveries[0].ID, "dead").Status)

		// The third failure makes the endpoint failing and the delivery
		// dead at once: one mail, the other notice held back by the hour.
		got := mail.Wait(t, 1, time.Minute)[0]
		s := e.waitMetrics("the notices counted", func(s scrape) bool {
			return noticeTotal(s, "sent") == 1 && noticeTotal(s, "limited") == 1
		})
		require.Equal(t, 1.0, s.get(`herald_notices_sent_total{kind="dead",result="no_address"}`), "c2 has no address")
		require.Equal(t, []string{"ops@example.com"}, got.To)
		require.Equal(t, "herald@example.com", got.From)
		require.True(t, strings.HasPrefix(got.Subject, "Herald: "), got.Subject)
		require.Contains(t, got.Subject, ep.ID)
		require.Contains(t, got.Body, bad.URL)
		require.Contains(t, got.Body, "HTTP 503")
		require.Contains(t, got.Body, "What to do")
		require.NotContains(t, got.Body, other.ID)

		// Past the hour, the operator's disable is mailed.
		e.tick(time.Hour + time.Minute)
		e.must(http.StatusOK, "POST", "/v1/endpoints/"+ep.ID+"/disable", map[string]any{"reason": "receiver retired"}, nil)
		got = mail.Wait(t, 2, time.Minute)[1]
		require.Equal(t, "Herald: your endpoint "+ep.ID+" was disabled", got.Subject)
		require.Contains(t, got.Body, "disabled by the operator: receiver retired")
		require.Contains(t, got.Body, bad.URL)
		require.Len(t, mail.Mails(), 2)
	})
}
