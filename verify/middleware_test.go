package verify

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// receiver is a middleware-wrapped handler behind a real HTTP server.
type receiver struct {
	url   string
	now   time.Time
	calls atomic.Int32 // how often the inner handler ran
	// arrivals receives the webhook id of each request as it reaches the
	// middleware (when there is room).
	arrivals chan string
	client   *http.Client
}

// setupReceiver serves Middleware around handler, verifying with
// testSecret at the fixed time testTimestamp.
func setupReceiver(t *testing.T, handler http.HandlerFunc, opts ...Option) *receiver {
	t.Helper()
	rc := &receiver{now: time.Unix(testTimestamp, 0), arrivals: make(chan string, 16)}
	v := &Verifier{Secrets: []string{testSecret}, Now: func() time.Time { return rc.now }}
	inner := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc.calls.Add(1)
		handler(w, r)
	})
	opts = append([]Option{WithLogger(slog.New(slog.DiscardHandler))}, opts...)
	mw := Middleware(v, inner, opts...)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case rc.arrivals <- r.Header.Get(HeaderStandardID):
		default:
		}
		mw.ServeHTTP(w, r)
	}))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // a test handler panics on purpose
	srv.Start()
	t.Cleanup(srv.Close)
	rc.url = srv.URL
	// A client of its own: another test's server closing (httptest's
	// Close) shuts the idle connections of http.DefaultTransport, and
	// with them a request of this test's about to reuse one.
	rc.client = srv.Client()
	return rc
}

type answer struct {
	status int
	body   string
}

// send posts body with headers h and returns the answer. It is safe to call
// from any goroutine.
func (rc *receiver) send(ctx context.Context, h http.Header, body []byte) (answer, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, rc.url, bytes.NewReader(body))
	if err != nil {
		return answer{}, err
	}
	req.Header = h
	resp, err := rc.client.Do(req)
	if err != nil {
		return answer{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return answer{}, err
	}
	return answer{resp.StatusCode, string(b)}, nil
}

// post sends body with headers h and returns the answer.
func (rc *receiver) post(t *testing.T, h http.Header, body []byte) answer {
	t.Helper()
	a, err := rc.send(t.Context(), h, body)
	require.NoError(t, err)
	return a
}

// deliver sends testBody as Herald's attempt signed at ts of webhook id.
func (rc *receiver) deliver(t *testing.T, id string, ts int64) answer {
	t.Helper()
	return rc.post(t, standardHeaders(t, id, ts, testBody, testSecret), testBody)
}

func ok(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) }

func TestMiddleware(t *testing.T) {
	t.Parallel()

	t.Run("PassesVerifiedRequest", func(t *testing.T) {
		t.Parallel()
		var got *Webhook
		var gotBody []byte
		rc := setupReceiver(t, func(w http.ResponseWriter, r *http.Request) {
			got, _ = WebhookFromContext(r.Context())
			gotBody, _ = io.ReadAll(r.Body)
			w.WriteHeader(http.StatusAccepted)
			_, _ = w.Write([]byte("thanks"))
		})
		h := standardHeaders(t, testID, testTimestamp, testBody, testSecret)
		h.Set(HeaderEvent, "order.created")
		require.Equal(t, answer{http.StatusAccepted, "thanks"}, rc.post(t, h, testBody))
		require.Equal(t, testBody, gotBody)
		require.NotNil(t, got)
		require.Equal(t, testID, got.ID)
		require.Equal(t, "order.created", got.EventType)
	})

	t.Run("BadSignatureIs401", func(t *testing.T) {
		t.Parallel()
		rc := setupReceiver(t, ok)
		h := standardHeaders(t, testID, testTimestamp, testBody, testOtherSecret)
		a := rc.post(t, h, testBody)
		require.Equal(t, http.StatusUnauthorized, a.status)
		require.Contains(t, a.body, ErrNoMatchingSignature.Error())
		require.Zero(t, rc.calls.Load())
	})

	t.Run("TamperedBodyIs401", func(t *testing.T) {
		t.Parallel()
		rc := setupReceiver(t, ok)
		h := standardHeaders(t, testID, testTimestamp, testBody, testSecret)
		require.Equal(t, http.StatusUnauthorized, rc.post(t, h, []byte(`{"order_id":"o_9"}`)).status)
		require.Zero(t, rc.calls.Load())
	})

	t.Run("MissingHeadersIs401WithReason", func(t *testing.T) {
		t.Parallel()
		rc := setupReceiver(t, ok)
		a := rc.post(t, http.Header{}, testBody)
		require.Equal(t, http.StatusUnauthorized, a.status)
		require.Contains(t, a.body, "missing webhook headers: webhook-id")
		require.Zero(t, rc.calls.Load())
	})

	t.Run("ExpiredIs401", func(t *testing.T) {
		t.Parallel()
		rc := setupReceiver(t, ok)
		a := rc.deliver(t, testID, testTimestamp-int64(DefaultTolerance/time.Second)-1)
		require.Equal(t, http.StatusUnauthorized, a.status)
		require.Contains(t, a.body, ErrTimestampOutOfTolerance.Error())
	})

	t.Run("MisconfiguredIs500", func(t *testing.T) {
		t.Parallel()
		v := &Verifier{}
		srv := httptest.NewServer(Middleware(v, http.HandlerFunc(ok), WithLogger(slog.New(slog.DiscardHandler))))
		t.Cleanup(srv.Close)
		rc := &receiver{url: srv.URL, client: srv.Client()}
		a := rc.deliver(t, testID, time.Now().Unix())
		require.Equal(t, http.StatusInternalServerError, a.status)
		require.NotContains(t, a.body, testSecret)
	})

	t.Run("DuplicateAnswered200WithoutHandler", func(t *testing.T) {
		t.Parallel()
		rc := setupReceiver(t, ok)
		require.Equal(t, http.StatusNoContent, rc.deliver(t, testID, testTimestamp).status)
		// Herald's retry: same id, a new timestamp and signature.
		a := rc.deliver(t, testID, testTimestamp+30)
		require.Equal(t, answer{http.StatusOK, "duplicate webhook ignored\n"}, a)
		require.EqualValues(t, 1, rc.calls.Load())
		// Another webhook still goes through.
		require.Equal(t, http.StatusNoContent, rc.deliver(t, "evt_test_2", testTimestamp).status)
		require.EqualValues(t, 2, rc.calls.Load())
	})

	t.Run("FailedFirstAttemptNotMarked", func(t *testing.T) {
		t.Parallel()
		var fail atomic.Bool
		fail.Store(true)
		rc := setupReceiver(t, func(w http.ResponseWriter, r *http.Request) {
			if fail.Load() {
				http.Error(w, "database down", http.StatusInternalServerError)
				return
			}
			w.WriteHeader(http.StatusOK)
		})
		require.Equal(t, http.StatusInternalServerError, rc.deliver(t, testID, testTimestamp).status)
		fail.Store(false)
		require.Equal(t, http.StatusOK, rc.deliver(t, testID, testTimestamp+30).status)
		require.EqualValues(t, 2, rc.calls.Load())
		require.Equal(t, "duplicate webhook ignored\n", rc.deliver(t, testID, testTimestamp+60).body)
		require.EqualValues(t, 2, rc.calls.Load())
	})

	t.Run("PanicNotMarked", func(t *testing.T) {
		t.Parallel()
		var panicking atomic.Bool
		panicking.Store(true)
		rc := setupReceiver(t, func(w http.ResponseWriter, r *http.Request) {
			if panicking.Load() {
				panic("handler bug")
			}
		})
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, rc.url, bytes.NewReader(testBody))
		require.NoError(t, err)
		req.Header = standardHeaders(t, testID, testTimestamp, testBody, testSecret)
		resp, err := rc.client.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		require.Error(t, err, "the server drops the connection of a panicking handler")
		panicking.Store(false)
		require.Equal(t, answer{http.StatusOK, ""}, rc.deliver(t, testID, testTimestamp))
		require.EqualValues(t, 2, rc.calls.Load())
	})

	t.Run("HandlerWritingNothingIsSuccess", func(t *testing.T) {
		t.Parallel()
		rc := setupReceiver(t, func(http.ResponseWriter, *http.Request) {})
		require.Equal(t, http.StatusOK, rc.deliver(t, testID, testTimestamp).status)
		require.Equal(t, "duplicate webhook ignored\n", rc.deliver(t, testID, testTimestamp).body)
		require.EqualValues(t, 1, rc.calls.Load())
	})

	t.Run("ConcurrentDuplicateWaitsForFirst", func(t *testing.T) {
		t.Parallel()
		release := make(chan struct{})
		firstRunning := make(chan struct{})
		rc := setupReceiver(t, func(w http.ResponseWriter, r *http.Request) {
			close(firstRunning) // panics if the handler runs twice
			<-release
			w.WriteHeader(http.StatusOK)
		})
		answers := make(chan answer, 2)
		deliverAsync := func(ts int64) {
			h := standardHeaders(t, testID, ts, testBody, testSecret)
			go func() {
				a, err := rc.send(t.Context(), h, testBody)
				if err != nil {
					a = answer{body: err.Error()}
				}
				answers <- a
			}()
		}
		deliverAsync(testTimestamp)
		waitFor(t, firstRunning)
		<-rc.arrivals
		deliverAsync(testTimestamp + 1)
		// Let the first finish only once the second has reached the
		// middleware, so it overlaps the first.
		select {
		case <-rc.arrivals:
		case <-time.After(10 * time.Second):
			t.Fatal("second request did not arrive")
		}
		close(release)
		got := []answer{waitAnswer(t, answers), waitAnswer(t, answers)}
		require.ElementsMatch(t, []answer{{http.StatusOK, ""}, {http.StatusOK, "duplicate webhook ignored\n"}}, got)
		require.EqualValues(t, 1, rc.calls.Load())
	})

	t.Run("DedupeOff", func(t *testing.T) {
		t.Parallel()
		rc := setupReceiver(t, ok, WithDeduper(nil))
		require.Equal(t, http.StatusNoContent, rc.deliver(t, testID, testTimestamp).status)
		require.Equal(t, http.StatusNoContent, rc.deliver(t, testID, testTimestamp).status)
		require.EqualValues(t, 2, rc.calls.Load())
	})

	t.Run("DeduperErrorsFailOpen", func(t *testing.T) {
		t.Parallel()
		broken := &fakeDeduper{
			SeenFunc:     func(context.Context, string) (bool, error) { return false, errors.New("redis down") },
			MarkSeenFunc: func(context.Context, string) error { return errors.New("redis down") },
		}
		rc := setupReceiver(t, ok, WithDeduper(broken))
		require.Equal(t, http.StatusNoContent, rc.deliver(t, testID, testTimestamp).status)
		require.Equal(t, http.StatusNoContent, rc.deliver(t, testID, testTimestamp).status)
		require.EqualValues(t, 2, rc.calls.Load())
	})

	t.Run("CustomDeduperSharedAcrossReceivers", func(t *testing.T) {
		t.Parallel()
		shared := &MemoryDeduper{}
		a := setupReceiver(t, ok, WithDeduper(shared))
		b := setupReceiver(t, ok, WithDeduper(shared))
		require.Equal(t, http.StatusNoContent, a.deliver(t, testID, testTimestamp).status)
		require.Equal(t, http.StatusOK, b.deliver(t, testID, testTimestamp).status)
		require.Zero(t, b.calls.Load())
	})
}

// fakeDeduper is a Deduper whose behaviour each test sets.
type fakeDeduper struct {
	SeenFunc     func(ctx context.Context, id string) (bool, error)
	MarkSeenFunc func(ctx context.Context, id string) error
}

func (f *fakeDeduper) Seen(ctx context.Context, id string) (bool, error) { return f.SeenFunc(ctx, id) }
func (f *fakeDeduper) MarkSeen(ctx context.Context, id string) error     { return f.MarkSeenFunc(ctx, id) }

func waitFor(t *testing.T, ch <-chan struct{}) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatal("timed out waiting")
	}
}

func waitAnswer(t *testing.T, ch <-chan answer) answer {
	t.Helper()
	select {
	case a := <-ch:
		return a
	case <-time.After(10 * time.Second):
		t.Fatal("timed out waiting for an answer")
		return answer{}
	}
}
