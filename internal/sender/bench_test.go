package sender

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/heraldhooks/herald"
	"github.com/heraldhooks/herald/internal/bench"
)

// benchSizes are the payload sizes BENCHMARKS.md reports.
var benchSizes = []int{256, 1024, 16 << 10}

// BenchmarkSign measures signing one webhook (its headers included), per
// scheme and payload size, with one secret and with two (during a
// rotation).
func BenchmarkSign(b *testing.B) {
	const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	for _, scheme := range []herald.SignatureScheme{herald.SchemeStandard, herald.SchemeHMACSHA256} {
		for _, size := range benchSizes {
			for _, secrets := range [][]string{{secret}, {secret, "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD"}} {
				b.Run(fmt.Sprintf("scheme=%s/payload=%d/secrets=%d", scheme, size, len(secrets)), func(b *testing.B) {
					req := &Request{
						WebhookID: "evt_01hzzzzzzzzzzzzzzzzzzzzzzz", EventType: "order.created",
						Body: bench.Payload(size), Secrets: secrets, Scheme: scheme,
						Headers: map[string]string{"X-Tenant": "acme"},
					}
					b.SetBytes(int64(size))
					for b.Loop() {
						if _, err := buildHeaders(req, DefaultUserAgent, 1614265330); err != nil {
							b.Fatal(err)
						}
					}
				})
			}
		}
	}
}

// BenchmarkSend measures whole attempts over kept-alive loopback
// connections to a receiver that answers 200 at once: signing, the
// request, the answer, reading what is kept of it. Run with -cpu to vary
// the attempts in flight.
func BenchmarkSend(b *testing.B) {
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		_, _ = w.Write([]byte("ok"))
	}))
	defer rcv.Close()
	s := New(Config{AllowPrivateNetworks: true})
	defer s.CloseIdleConnections()
	for _, size := range benchSizes {
		b.Run(fmt.Sprintf("payload=%d", size), func(b *testing.B) {
			body := bench.Payload(size)
			b.SetBytes(int64(size))
			b.SetParallelism(8)
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					res := s.Send(context.Background(), &Request{
						WebhookID: "evt_01hzzzzzzzzzzzzzzzzzzzzzzz", EventType: "order.created",
						Body: body, URL: rcv.URL, Secrets: []string{"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"},
						Timeout: 10 * time.Second,
					})
					if res.Class != Success {
						b.Fatalf("attempt: %v %d %s", res.Class, res.StatusCode, res.Error)
					}
				}
			})
		})
	}
}
