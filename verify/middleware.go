package verify

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"sync"
)

// Deduper remembers the ids of webhooks a receiver has already handled, so a
// second delivery of the same webhook (a retry after a lost answer, or an
// operator's replay) is not handled twice. Implementations must be safe for
// concurrent use. MemoryDeduper keeps ids in memory; receivers with several
// processes can implement Deduper over their own database.
type Deduper interface {
	// Seen reports whether MarkSeen was called for id (and not forgotten).
	Seen(ctx context.Context, id string) (bool, error)
	// MarkSeen records that the webhook id was handled successfully.
	MarkSeen(ctx context.Context, id string) error
}

// Option configures Middleware.
type Option func(*middleware)

// WithDeduper sets where handled webhook ids are remembered. The default is
// a MemoryDeduper with default bounds, private to the middleware; nil turns
// deduplication off.
func WithDeduper(d Deduper) Option {
	return func(m *middleware) { m.dedupe = d }
}

// WithLogger sets the logger for refused requests (debug level) and for
// configuration and Deduper errors (error level). The default is
// slog.Default().
func WithLogger(l *slog.Logger) Option {
	return func(m *middleware) { m.log = l }
}

// Middleware verifies every request with v before next sees it, and drops
// duplicates by webhook id.
//
// A request that fails verification is answered 401 with the reason as a
// short text body (413 for a body over v.MaxBodyBytes, 400 for an unreadable
// one), and next is not called. When the receiver itself is misconfigured
// (no secret or public key, a malformed one, one of the wrong kind for the
// scheme, an unknown scheme) the answer is 500, so
// Herald keeps retrying until that is fixed rather than giving up.
//
// A verified request whose id the Deduper has seen is answered 200, so
// Herald stops retrying, without calling next. Otherwise next runs with the
// body restored in r.Body and the Webhook in the context (see
// WebhookFromContext). The id is marked seen only after next answered 2xx: a
// first attempt that failed (an error status or a panic) leaves the id
// unmarked, so Herald's retry is handled and not mistaken for a duplicate.
// Requests with the same id that arrive while one is running wait for it to
// finish, then see its outcome. With SchemeHMACSHA256 the id is not covered
// by the signature, so the timestamp tolerance, not the id, bounds replays.
//
// Deduper errors fail open: the request is handled as new and the error
// logged. Delivery is at least once anyway, and handling a webhook twice is
// better than losing it while the dedupe store is down.
func Middleware(v *Verifier, next http.Handler, opts ...Option) http.Handler {
	m := &middleware{
		verifier: v,
		next:     next,
		dedupe:   &MemoryDeduper{},
		inflight: make(map[string]chan struct{}),
	}
	for _, opt := range opts {
		opt(m)
	}
	if m.log == nil {
		m.log = slog.Default()
	}
	return m
}

type webhookKey struct{}

// WebhookFromContext returns the webhook Middleware verified for the request
// whose context this is.
func WebhookFromContext(ctx context.Context) (*Webhook, bool) {
	wh, ok := ctx.Value(webhookKey{}).(*Webhook)
	return wh, ok
}

// Log keys, in Herald's snake_case style.
const (
	logKeyWebhookID = "webhook_id"
	logKeyError     = "error"
)

type middleware struct {
	verifier *Verifier
	next     http.Handler
	dedupe   Deduper
	log      *slog.Logger

	mu sync.Mutex
	// inflight holds, per webhook id being handled, a channel closed when
	// that request is done.
	inflight map[string]chan struct{}
}

func (m *middleware) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	wh, err := m.verifier.Verify(r)
	if err != nil {
		m.refuse(w, r, err)
		return
	}
	ctx := context.WithValue(r.Context(), webhookKey{}, wh)
	r = r.WithContext(ctx)
	if m.dedupe == nil {
		m.next.ServeHTTP(w, r)
		return
	}

	release, err := m.acquire(ctx, wh.ID)
	if err != nil {
		http.Error(w, "a delivery of this webhook id is in progress", http.StatusServiceUnavailable)
		return
	}
	defer release()

	seen, err := m.dedupe.Seen(ctx, wh.ID)
	if err != nil {
		m.log.ErrorContext(ctx, "webhook dedupe lookup failed, handling as new", logKeyWebhookID, wh.ID, logKeyError, err)
	}
	if seen {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write([]byte("duplicate webhook ignored\n"))
		return
	}

	rec := &statusRecorder{ResponseWriter: w}
	m.next.ServeHTTP(rec, r)
	if rec.status == 0 {
		rec.status = http.StatusOK // net/http's answer when a handler writes nothing
	}
	if rec.status >= 200 && rec.status < 300 {
		// The answer is sent: a client gone now must not undo the mark.
		if err := m.dedupe.MarkSeen(context.WithoutCancel(ctx), wh.ID); err != nil {
			m.log.ErrorContext(ctx, "webhook dedupe mark failed", logKeyWebhookID, wh.ID, logKeyError, err)
		}
	}
}

// refuse answers a request that failed verification.
func (m *middleware) refuse(w http.ResponseWriter, r *http.Request, err error) {
	switch {
	case errors.Is(err, ErrNoSecrets), errors.Is(err, ErrInvalidSecret), errors.Is(err, ErrUnknownScheme):
		m.log.ErrorContext(r.Context(), "webhook verifier misconfigured", logKeyError, err)
		http.Error(w, "webhook receiver misconfigured", http.StatusInternalServerError)
	case errors.Is(err, ErrBodyTooLarge):
		m.log.DebugContext(r.Context(), "webhook refused", logKeyError, err)
		http.Error(w, err.Error(), http.StatusRequestEntityTooLarge)
	case errors.Is(err, ErrReadBody):
		m.log.DebugContext(r.Context(), "webhook refused", logKeyError, err)
		http.Error(w, err.Error(), http.StatusBadRequest)
	default:
		m.log.DebugContext(r.Context(), "webhook refused", logKeyError, err)
		http.Error(w, err.Error(), http.StatusUnauthorized)
	}
}

// acquire waits until no other request with id is being handled, then marks
// id as being handled until release is called. It fails only when ctx ends
// while waiting.
func (m *middleware) acquire(ctx context.Context, id string) (release func(), err error) {
	for {
		m.mu.Lock()
		busy, ok := m.inflight[id]
		if !ok {
			done := make(chan struct{})
			m.inflight[id] = done
			m.mu.Unlock()
			return func() {
				m.mu.Lock()
				delete(m.inflight, id)
				m.mu.Unlock()
				close(done)
			}, nil
		}
		m.mu.Unlock()
		select {
		case <-busy:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// statusRecorder remembers the status next answered with.
type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (s *statusRecorder) WriteHeader(code int) {
	// 1xx answers are informational; the final status comes later.
	if s.status == 0 && code >= 200 {
		s.status = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusRecorder) Write(b []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	return s.ResponseWriter.Write(b)
}

// Flush lets handlers that stream use http.Flusher through the recorder.
func (s *statusRecorder) Flush() {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	if f, ok := s.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (s *statusRecorder) Unwrap() http.ResponseWriter { return s.ResponseWriter }
