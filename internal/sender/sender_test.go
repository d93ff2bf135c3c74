package sender

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhooks/herald"
	"github.com/heraldhooks/herald/verify"
)

// A fixed signing time: tests never read the wall clock for it.
var testTime = time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)

const (
	secretA = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	secretB = "whsec_c2Vjb25kIHNlY3JldCBmb3Igcm90YXRpb24="
	// Ed25519 private keys (whsk_ and a 32-byte seed), for scheme ed25519.
	ed25519KeyA = "whsk_AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="
	ed25519KeyB = "whsk_nWGxne/9WmC6hEr0kuwsxERJxWl7MmkZcDusAxyuf2A="
)

// received is what a test receiver saw of one request.
type received struct {
	header http.Header
	body   []byte
}

// setup returns a Sender allowed to reach loopback receivers.
func setup(t *testing.T) *Sender {
	t.Helper()
	s := New(Config{AllowPrivateNetworks: true, UserAgent: "Herald/test"})
	t.Cleanup(s.CloseIdleConnections)
	return s
}

// receiver starts a server that records each request and answers with
// answer; the records arrive on the returned channel.
func receiver(t *testing.T, answer http.HandlerFunc) (*httptest.Server, <-chan received) {
	t.Helper()
	got := make(chan received, 16)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		got <- received{header: r.Header.Clone(), body: body}
		if answer != nil {
			answer(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv, got
}

// status answers with code and the given headers.
func status(code int, headers ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		for i := 0; i+1 < len(headers); i += 2 {
			w.Header().Set(headers[i], headers[i+1])
		}
		w.WriteHeader(code)
	}
}

func request(url string) *Request {
	return &Request{
		WebhookID: "evt_2xYb7",
		EventType: "order.created",
		Body:      []byte(`{"id":1}`),
		URL:       url,
		Secrets:   []string{secretA},
		Scheme:    herald.SchemeStandard,
		Timeout:   5 * time.Second,
		Timestamp: testTime,
	}
}

func one(t *testing.T, got <-chan received) received {
	t.Helper()
	select {
	case r := <-got:
		return r
	case <-time.After(5 * time.Second):
		t.Fatal("the receiver got no request")
		return received{}
	}
}

func none(t *testing.T, got <-chan received) {
	t.Helper()
	select {
	case r := <-got:
		t.Fatalf("the receiver got a request: %v", r.header)
	default:
	}
}

func TestSendSigns(t *testing.T) {
	t.Parallel()

	t.Run("StandardScheme", func(t *testing.T) {
		t.Parallel()
		s := setup(t)
		srv, got := receiver(t, status(http.StatusOK))
		req := request(srv.URL)

		res := s.Send(context.Background(), req)

		require.Equal(t, Success, res.Class, res.Error)
		r := one(t, got)
		want, err := verify.SignStandard(secretA, req.WebhookID, testTime.Unix(), req.Body)
		require.NoError(t, err)
		require.Equal(t, want, r.header.Get("webhook-signature"))
		require.Equal(t, "evt_2xYb7", r.header.Get("webhook-id"))
		require.Equal(t, strconv.FormatInt(testTime.Unix(), 10), r.header.Get("webhook-timestamp"))
		require.Equal(t, "order.created", r.header.Get("X-Webhook-Event"))
		require.Equal(t, "application/json", r.header.Get("Content-Type"))
		require.Equal(t, "Herald/test", r.header.Get("User-Agent"))
		require.Empty(t, r.header.Get("X-Webhook-Signature"))
	})

	t.Run("EmptySchemeIsStandard", func(t *testing.T) {
		t.Parallel()
		s := setup(t)
		srv, got := receiver(t, status(http.StatusOK))
		req := request(srv.URL)
		req.Scheme = ""

		require.Equal(t, Success, s.Send(context.Background(), req).Class)
		want, err := verify.SignStandard(secretA, req.WebhookID, testTime.Unix(), req.Body)
		require.NoError(t, err)
		require.Equal(t, want, one(t, got).header.Get("webhook-signature"))
	})

	t.Run("HMACSHA256Scheme", func(t *testing.T) {
		t.Parallel()
		s := setup(t)
		srv, got := receiver(t, status(http.StatusOK))
		req := request(srv.URL)
		req.Scheme = herald.SchemeHMACSHA256
		req.Secrets = []string{"plain secret, not base64!"}

		res := s.Send(context.Background(), req)

		require.Equal(t, Success, res.Class, res.Error)
		r := one(t, got)
		require.Equal(t, verify.SignHMACSHA256("plain secret, not base64!", testTime.Unix(), req.Body),
			r.header.Get("X-Webhook-Signature"))
		require.True(t, strings.HasPrefix(r.header.Get("X-Webhook-Signature"), "sha256="))
		require.Equal(t, "evt_2xYb7", r.header.Get("X-Webhook-ID"))
		require.Equal(t, strconv.FormatInt(testTime.Unix(), 10), r.header.Get("X-Webhook-Timestamp"))
		require.Equal(t, "order.created", r.header.Get("X-Webhook-Event"))
		require.Equal(t, "application/json", r.header.Get("Content-Type"))
		require.Empty(t, r.header.Get("webhook-signature"))
	})

	t.Run("TwoSecretsGiveTwoSignatures", func(t *testing.T) {
		t.Parallel()
		s := setup(t)
		srv, got := receiver(t, status(http.StatusOK))
		req := request(srv.URL)
		req.Secrets = []string{secretA, secretB}

		require.Equal(t, Success, s.Send(context.Background(), req).Class)
		sigA, err := verify.SignStandard(secretA, req.WebhookID, testTime.Unix(), req.Body)
		require.NoError(t, err)
		sigB, err := verify.SignStandard(secretB, req.WebhookID, testTime.Unix(), req.Body)
		require.NoError(t, err)
		require.NotEqual(t, sigA, sigB)
		require.Equal(t, sigA+" "+sigB, one(t, got).header.Get("webhook-signature"))
	})

	t.Run("TwoSecretsHMACSHA256", func(t *testing.T) {
		t.Parallel()
		s := setup(t)
		srv, got := receiver(t, status(http.StatusOK))
		req := request(srv.URL)
		req.Scheme = herald.SchemeHMACSHA256
		req.Secrets = []string{"new", "old"}

		require.Equal(t, Success, s.Send(context.Background(), req).Class)
		require.Equal(t,
			verify.SignHMACSHA256("new", testTime.Unix(), req.Body)+" "+verify.SignHMACSHA256("old", testTime.Unix(), req.Body),
			one(t, got).header.Get("X-Webhook-Signature"))
	})

	t.Run("Ed25519Scheme", func(t *testing.T) {
		t.Parallel()
		s := setup(t)
		srv, got := receiver(t, status(http.StatusOK))
		req := request(srv.URL)
		req.Scheme = herald.SchemeEd25519
		req.Secrets = []string{ed25519KeyA}

		res := s.Send(context.Background(), req)

		require.Equal(t, Success, res.Class, res.Error)
		r := one(t, got)
		sig := r.header.Get("webhook-signature")
		require.True(t, strings.HasPrefix(sig, "v1a,"), sig)
		require.NotContains(t, sig, " ")
		require.Equal(t, "evt_2xYb7", r.header.Get("webhook-id"))
		require.Equal(t, strconv.FormatInt(testTime.Unix(), 10), r.header.Get("webhook-timestamp"))
		require.Equal(t, "order.created", r.header.Get("X-Webhook-Event"))
		require.Equal(t, "application/json", r.header.Get("Content-Type"))
		require.Equal(t, "Herald/test", r.header.Get("User-Agent"))
		require.Empty(t, r.header.Get("X-Webhook-Signature"))
		require.Empty(t, r.header.Get("X-Webhook-ID"))

		// The receiver needs only the public key.
		publicKey, err := verify.Ed25519PublicKey(ed25519KeyA)
		require.NoError(t, err)
		require.NoError(t, verify.VerifyEd25519(publicKey, r.header, r.body, testTime, 0))
		otherPublic, err := verify.Ed25519PublicKey(ed25519KeyB)
		require.NoError(t, err)
		require.ErrorIs(t, verify.VerifyEd25519(otherPublic, r.header, r.body, testTime, 0), verify.ErrNoMatchingSignature)
		// Ed25519 is deterministic: the signature is the one verify makes.
		want, err := verify.SignEd25519(ed25519KeyA, req.WebhookID, testTime.Unix(), req.Body)
		require.NoError(t, err)
		require.Equal(t, want, sig)
	})

	t.Run("TwoPrivateKeysGiveTwoSignatures", func(t *testing.T) {
		t.Parallel()
		s := setup(t)
		srv, got := receiver(t, status(http.StatusOK))
		req := request(srv.URL)
		req.Scheme = herald.SchemeEd25519
		req.Secrets = []string{ed25519KeyB, ed25519KeyA}

		require.Equal(t, Success, s.Send(context.Background(), req).Class)
		r := one(t, got)
		sigs := strings.Fields(r.header.Get("webhook-signature"))
		require.Len(t, sigs, 2)
		for i, key := range req.Secrets {
			want, err := verify.SignEd25519(key, req.WebhookID, testTime.Unix(), req.Body)
			require.NoError(t, err)
			require.Equal(t, want, sigs[i])
			publicKey, err := verify.Ed25519PublicKey(key)
			require.NoError(t, err)
			require.NoError(t, verify.VerifyEd25519(publicKey, r.header, r.body, testTime, 0), "key %d alone", i+1)
		}
	})

	t.Run("ExactBodyBytesArrive", func(t *testing.T) {
		t.Parallel()
		s := setup(t)
		srv, got := receiver(t, status(http.StatusNoContent))
		req := request(srv.URL)
		// Odd spacing, key order, escapes and raw UTF-8: any re-encoding shows.
		req.Body = []byte("{ \"b\" :2,\"a\":[1 ,\n 2],\"s\":\"\\u00e9 é \\/\"}  ")

		require.Equal(t, Success, s.Send(context.Background(), req).Class)
		r := one(t, got)
		require.Equal(t, req.Body, r.body)
		want, err := verify.SignStandard(secretA, req.WebhookID, testTime.Unix(), r.body)
		require.NoError(t, err)
		require.Equal(t, want, r.header.Get("webhook-signature"))
	})
}

func TestSendHeaders(t *testing.T) {
	t.Parallel()

	t.Run("CustomHeadersSent", func(t *testing.T) {
		t.Parallel()
		s := setup(t)
		srv, got := receiver(t, status(http.StatusOK))
		req := request(srv.URL)
		req.Headers = map[string]string{"X-Team": "a", "authorization": "Bearer tok"}

		require.Equal(t, Success, s.Send(context.Background(), req).Class)
		r := one(t, got)
		require.Equal(t, "a", r.header.Get("X-Team"))
		require.Equal(t, "Bearer tok", r.header.Get("Authorization"))
	})

	t.Run("CustomHeadersCannotOverride", func(t *testing.T) {
		t.Parallel()
		s := setup(t)
		srv, got := receiver(t, status(http.StatusOK))
		req := request(srv.URL)
		req.Headers = map[string]string{
			"Webhook-Signature":   "v1,forged",
			"webhook-id":          "evt_other",
			"WEBHOOK-TIMESTAMP":   "1",
			"X-Webhook-Signature": "sha256=forged",
			"X-Webhook-Event":     "other.type",
			"content-type":        "text/plain",
			"User-Agent":          "curl/8",
			"X-Kept":              "yes",
		}

		require.Equal(t, Success, s.Send(context.Background(), req).Class)
		r := one(t, got)
		want, err := verify.SignStandard(secretA, req.WebhookID, testTime.Unix(), req.Body)
		require.NoError(t, err)
		require.Equal(t, []string{want}, r.header.Values("Webhook-Signature"))
		require.Equal(t, []string{"evt_2xYb7"}, r.header.Values("Webhook-Id"))
		require.Equal(t, []string{strconv.FormatInt(testTime.Unix(), 10)}, r.header.Values("Webhook-Timestamp"))
		require.Empty(t, r.header.Values("X-Webhook-Signature"))
		require.Equal(t, []string{"order.created"}, r.header.Values("X-Webhook-Event"))
		require.Equal(t, []string{"application/json"}, r.header.Values("Content-Type"))
		require.Equal(t, []string{"Herald/test"}, r.header.Values("User-Agent"))
		require.Equal(t, "yes", r.header.Get("X-Kept"))
	})

	t.Run("InvalidCustomHeaderIsClientError", func(t *testing.T) {
		t.Parallel()
		s := setup(t)
		srv, got := receiver(t, status(http.StatusOK))
		req := request(srv.URL)
		req.Headers = map[string]string{"X-Split": "a\r\nX-Injected: b"}

		res := s.Send(context.Background(), req)

		require.Equal(t, ClientError, res.Class)
		require.Zero(t, res.StatusCode)
		require.Contains(t, res.Error, `"X-Split"`)
		none(t, got)
	})
}

func TestSendConfigurationFaults(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		change func(*Request)
		want   string
	}{
		{"UndecodableSecret", func(r *Request) { r.Secrets = []string{"whsec_not*base64!"} }, "sign with secret 1 of 1: secret is not whsec_"},
		{"UndecodablePreviousSecret", func(r *Request) { r.Secrets = []string{secretA, "whsec_%%%"} }, "sign with secret 2 of 2"},
		{"NoSecret", func(r *Request) { r.Secrets = nil }, "no secret"},
		{"EmptySecret", func(r *Request) { r.Scheme = herald.SchemeHMACSHA256; r.Secrets = []string{""} }, "the secret is empty"},
		{"UnknownScheme", func(r *Request) { r.Scheme = "md5" }, `unknown signature scheme "md5"`},
		{"Ed25519WithAnHMACSecret", func(r *Request) { r.Scheme = herald.SchemeEd25519 }, "sign with private key 1 of 1: the private key does not start with whsk_"},
		{"Ed25519WithAPublicKey", func(r *Request) {
			r.Scheme = herald.SchemeEd25519
			r.Secrets = []string{ed25519KeyA, "whpk_A6EHv/POEL4dcN0Y50vAmWfk1jCbpQ1fHdyGZBJVMbg="}
		}, "sign with private key 2 of 2: the key is a public key"},
		{"NoWebhookID", func(r *Request) { r.WebhookID = "" }, "no webhook id"},
		{"NotHTTP", func(r *Request) { r.URL = "ftp://example.com/x" }, "http or https"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := setup(t)
			srv, got := receiver(t, status(http.StatusOK))
			req := request(srv.URL)
			tc.change(req)

			res := s.Send(context.Background(), req)

			require.Equal(t, ClientError, res.Class)
			require.Zero(t, res.StatusCode)
			require.Zero(t, res.Duration)
			require.Contains(t, res.Error, tc.want)
			require.NotContains(t, res.Error, "whsec_not*base64!", "a secret never appears in an error")
			none(t, got)
		})
	}
}

func TestSendClassifies(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name       string
		answer     http.HandlerFunc
		class      Class
		code       int
		retryAfter time.Duration
		errPart    string
	}{
		{name: "200", answer: status(200), class: Success, code: 200},
		{name: "204", answer: status(204), class: Success, code: 204},
		{name: "400", answer: status(400), class: ClientError, code: 400, errPart: "HTTP 400 Bad Request"},
		{name: "404", answer: status(404), class: ClientError, code: 404, errPart: "HTTP 404"},
		{name: "408", answer: status(408), class: Retryable, code: 408, errPart: "HTTP 408"},
		{name: "410", answer: status(410), class: Gone, code: 410, errPart: "HTTP 410 Gone"},
		{name: "425", answer: status(425), class: Retryable, code: 425},
		{name: "429", answer: status(429), class: Retryable, code: 429},
		{name: "429RetryAfterSeconds", answer: status(429, "Retry-After", "120"), class: Retryable, code: 429, retryAfter: 120 * time.Second},
		{name: "429RetryAfterDate", answer: status(429, "Retry-After", testTime.Add(90*time.Second).Format(http.TimeFormat)), class: Retryable, code: 429, retryAfter: 90 * time.Second},
		{name: "429RetryAfterPastDate", answer: status(429, "Retry-After", testTime.Add(-time.Hour).Format(http.TimeFormat)), class: Retryable, code: 429},
		{name: "429RetryAfterGarbage", answer: status(429, "Retry-After", "soon"), class: Retryable, code: 429},
		{name: "429RetryAfterCapped", answer: status(429, "Retry-After", "9999999999"), class: Retryable, code: 429, retryAfter: 24 * time.Hour},
		{name: "429RetryAfterDateCapped", answer: status(429, "Retry-After", testTime.Add(72*time.Hour).Format(http.TimeFormat)), class: Retryable, code: 429, retryAfter: 24 * time.Hour},
		{name: "500", answer: status(500), class: Retryable, code: 500, errPart: "HTTP 500"},
		{name: "500RetryAfterIgnored", answer: status(500, "Retry-After", "120"), class: Retryable, code: 500},
		{name: "502", answer: status(502), class: Retryable, code: 502},
		{name: "503RetryAfter", answer: status(503, "Retry-After", "30"), class: Retryable, code: 503, retryAfter: 30 * time.Second},
		{name: "503RetryAfterDate", answer: status(503, "Retry-After", testTime.Add(2*time.Hour).Format(http.TimeFormat)), class: Retryable, code: 503, retryAfter: 2 * time.Hour},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := setup(t)
			srv, got := receiver(t, tc.answer)

			res := s.Send(context.Background(), request(srv.URL))

			one(t, got)
			require.Equal(t, tc.class, res.Class, res.Error)
			require.Equal(t, tc.code, res.StatusCode)
			require.Equal(t, tc.retryAfter, res.RetryAfter)
			require.Positive(t, res.Duration)
			if tc.class == Success {
				require.Empty(t, res.Error)
			} else {
				require.NotEmpty(t, res.Error)
				require.Contains(t, res.Error, tc.errPart)
			}
		})
	}
}

func TestSendRedirectsNotFollowed(t *testing.T) {
	t.Parallel()
	for _, code := range []int{http.StatusMovedPermanently, http.StatusFound, http.StatusTemporaryRedirect, http.StatusPermanentRedirect} {
		t.Run(strconv.Itoa(code), func(t *testing.T) {
			t.Parallel()
			s := setup(t)
			target, targetGot := receiver(t, status(http.StatusOK))
			srv, got := receiver(t, status(code, "Location", target.URL+"/elsewhere"))

			res := s.Send(context.Background(), request(srv.URL))

			one(t, got)
			require.Equal(t, Retryable, res.Class)
			require.Equal(t, code, res.StatusCode)
			require.Contains(t, res.Error, "redirect not followed")
			require.Contains(t, res.Error, target.URL+"/elsewhere")
			none(t, targetGot)
		})
	}
}

func TestSendAnswerBody(t *testing.T) {
	t.Parallel()

	t.Run("KeptWhole", func(t *testing.T) {
		t.Parallel()
		s := setup(t)
		srv, _ := receiver(t, func(w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(http.StatusInternalServerError)
			_, _ = io.WriteString(w, `{"error":"db down"}`)
		})

		res := s.Send(context.Background(), request(srv.URL))

		require.Equal(t, Retryable, res.Class)
		require.Equal(t, []byte(`{"error":"db down"}`), res.Body)
	})

	t.Run("TenMegabytesCutAt4KiB", func(t *testing.T) {
		t.Parallel()
		s := setup(t)
		big := bytes.Repeat([]byte("0123456789abcdef"), 10<<20/16)
		srv, _ := receiver(t, func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Length", strconv.Itoa(len(big)))
			_, _ = w.Write(big)
		})

		res := s.Send(context.Background(), request(srv.URL))

		require.Equal(t, Success, res.Class, res.Error)
		require.Equal(t, 200, res.StatusCode)
		require.Len(t, res.Body, herald.MaxResponseBodyKeep)
		require.Equal(t, big[:herald.MaxResponseBodyKeep], res.Body)
	})

	t.Run("EndlessAnswerNotDrained", func(t *testing.T) {
		t.Parallel()
		s := setup(t)
		srv, _ := receiver(t, func(w http.ResponseWriter, _ *http.Request) {
			chunk := bytes.Repeat([]byte("x"), 32<<10)
			for {
				if _, err := w.Write(chunk); err != nil {
					return // the sender hung up
				}
			}
		})
		req := request(srv.URL)
		req.Timeout = 30 * time.Second

		res := s.Send(context.Background(), req)

		// Draining an endless body would run into the timeout.
		require.Equal(t, Success, res.Class, res.Error)
		require.Len(t, res.Body, herald.MaxResponseBodyKeep)
		require.Less(t, res.Duration, req.Timeout)
	})
}

func TestSendTransportFailures(t *testing.T) {
	t.Parallel()

	t.Run("TimeoutIsRetryable", func(t *testing.T) {
		t.Parallel()
		s := setup(t)
		release := make(chan struct{})
		srv, got := receiver(t, func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-release:
			case <-r.Context().Done():
			}
		})
		t.Cleanup(func() { close(release) }) // runs before srv.Close
		req := request(srv.URL)
		req.Timeout = 200 * time.Millisecond

		res := s.Send(context.Background(), req)

		one(t, got)
		require.Equal(t, Retryable, res.Class)
		require.Zero(t, res.StatusCode)
		require.Equal(t, "timed out after 200ms", res.Error)
		require.GreaterOrEqual(t, res.Duration, req.Timeout)
	})

	t.Run("CancelledIsRetryable", func(t *testing.T) {
		t.Parallel()
		s := setup(t)
		ctx, cancel := context.WithCancel(context.Background())
		srv, got := receiver(t, func(w http.ResponseWriter, r *http.Request) {
			cancel()
			<-r.Context().Done()
		})

		res := s.Send(ctx, request(srv.URL))

		one(t, got)
		require.Equal(t, Retryable, res.Class)
		require.Zero(t, res.StatusCode)
		require.Equal(t, "attempt cancelled: context canceled", res.Error)
	})

	t.Run("ClosedPortIsRetryable", func(t *testing.T) {
		t.Parallel()
		s := setup(t)
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		addr := ln.Addr().String()
		require.NoError(t, ln.Close())

		res := s.Send(context.Background(), request("http://"+addr+"/hook"))

		require.Equal(t, Retryable, res.Class)
		require.Zero(t, res.StatusCode)
		require.Contains(t, res.Error, "connection refused")
		require.NotContains(t, res.Error, "Post ", "the URL prefix is trimmed")
	})

	t.Run("HugeAnswerHeadersAreRetryable", func(t *testing.T) {
		t.Parallel()
		s := setup(t)
		// 100 KiB of headers, past MaxResponseHeaderBytes (64 KiB), where
		// Go's default would read 10 MB of them.
		srv, got := receiver(t, func(w http.ResponseWriter, r *http.Request) {
			for i := range 100 {
				w.Header().Set(fmt.Sprintf("X-Filler-%03d", i), strings.Repeat("x", 1<<10))
			}
			w.WriteHeader(http.StatusOK)
		})

		res := s.Send(context.Background(), request(srv.URL))

		one(t, got)
		require.Equal(t, Retryable, res.Class)
		require.Zero(t, res.StatusCode)
		require.Contains(t, res.Error, "header")

		// Just under the cap, the answer is read.
		srv2, got2 := receiver(t, func(w http.ResponseWriter, r *http.Request) {
			for i := range 60 {
				w.Header().Set(fmt.Sprintf("X-Filler-%03d", i), strings.Repeat("x", 1<<10))
			}
			w.WriteHeader(http.StatusOK)
		})
		res = s.Send(context.Background(), request(srv2.URL))
		one(t, got2)
		require.Equal(t, Success, res.Class, res.Error)
	})

	t.Run("UntrustedCertificateIsRetryable", func(t *testing.T) {
		t.Parallel()
		s := setup(t)
		srv := httptest.NewUnstartedServer(status(http.StatusOK))
		srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the failed handshake is expected
		srv.StartTLS()
		t.Cleanup(srv.Close)

		res := s.Send(context.Background(), request(srv.URL))

		require.Equal(t, Retryable, res.Class)
		require.Zero(t, res.StatusCode)
		require.Contains(t, res.Error, "certificate")
	})
}

func TestSendConnections(t *testing.T) {
	t.Parallel()

	t.Run("KeepAliveReusesOneConnection", func(t *testing.T) {
		t.Parallel()
		s := setup(t)
		var conns atomic.Int32
		srv := httptest.NewUnstartedServer(status(http.StatusOK))
		srv.Config.ConnState = func(_ net.Conn, state http.ConnState) {
			if state == http.StateNew {
				conns.Add(1)
			}
		}
		srv.Start()
		t.Cleanup(srv.Close)

		for range 5 {
			require.Equal(t, Success, s.Send(context.Background(), request(srv.URL)).Class)
		}
		require.Equal(t, int32(1), conns.Load())
	})

	t.Run("HTTP2OverTLS", func(t *testing.T) {
		t.Parallel()
		s := setup(t)
		protos := make(chan int, 1)
		srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			protos <- r.ProtoMajor
		}))
		srv.EnableHTTP2 = true
		srv.StartTLS()
		t.Cleanup(srv.Close)
		pool := x509.NewCertPool()
		pool.AddCert(srv.Certificate())
		s.transport.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}

		res := s.Send(context.Background(), request(srv.URL))

		require.Equal(t, Success, res.Class, res.Error)
		require.Equal(t, 2, <-protos)
	})

	t.Run("EnvironmentProxyIgnored", func(t *testing.T) {
		t.Parallel()
		s := setup(t)
		// The transport has no Proxy function, so HTTP_PROXY and friends
		// cannot route a webhook around the dial-time check.
		require.Nil(t, s.transport.Proxy)
	})
}

func TestParseRetryAfter(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		value string
		want  time.Duration
	}{
		{"", 0},
		{"0", 0},
		{"-5", 0},
		{" 7 ", 7 * time.Second},
		{"86400", 24 * time.Hour},
		{"86401", 24 * time.Hour},
		{"99999999999999999999", 0}, // overflows int64: unparseable
		{testTime.Add(10 * time.Minute).Format(http.TimeFormat), 10 * time.Minute},
		{testTime.Add(10 * time.Minute).Format(time.RFC850), 10 * time.Minute},
		{testTime.Format(http.TimeFormat), 0},
		{"tomorrow", 0},
	} {
		t.Run(tc.value, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tc.want, parseRetryAfter(tc.value, testTime))
		})
	}
}

func TestClassString(t *testing.T) {
	t.Parallel()
	require.Equal(t, "success", Success.String())
	require.Equal(t, "retryable", Retryable.String())
	require.Equal(t, "gone", Gone.String())
	require.Equal(t, "client_error", ClientError.String())
	require.Equal(t, "Class(0)", Class(0).String())
}
