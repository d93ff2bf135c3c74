package notice_test

import (
	"testing"

	"github.com/heraldhooks/herald"
	"github.com/heraldhooks/herald/internal/notice"
)

// BenchmarkNotify is what a notification costs the outcome write that
// emits it when the mailer cannot keep up (the SMTP server slow or down,
// the queue full): a failed non-blocking send, a count and a log line of
// the drop. It never waits for mail.
func BenchmarkNotify(b *testing.B) {
	ep := &herald.Endpoint{ID: "ep_1", ConsumerID: "cust_42", URL: "https://hooks.example.com/x"}
	n := failing(ep)
	b.Run("QueueFull", func(b *testing.B) {
		m := notice.New(notice.Config{QueueSize: 1, Counted: func(string, string) {}})
		m.Notify(n)
		b.ReportAllocs()
		for b.Loop() {
			m.Notify(n)
		}
	})
}
