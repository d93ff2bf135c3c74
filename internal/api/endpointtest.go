package api

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/heraldhooks/herald"
	"github.com/heraldhooks/herald/internal/auth"
	"github.com/heraldhooks/herald/internal/store"
	"github.com/heraldhooks/herald/internal/wire"
)

// endpointTest serves POST /v1/endpoints/{id}/test (body absent or {}): an
// event of the built-in type herald.test, with a small example payload, is
// written for the endpoint's consumer with one delivery, to this endpoint
// only and whatever its filter; the consumer's other endpoints get
// nothing. It answers 202 shaped as POST /v1/events does. A consumer key
// may test its own endpoints (the route's owner rule), so a customer can
// try a receiver from the portal; a disabled endpoint answers 409, as its
// delivery would only go dead. A consumer's test events are limited (429
// rate_limited with Retry-After past testEventBurst a minute).
func (s *Server) endpointTest(w http.ResponseWriter, r *http.Request) error {
	var req wire.EmptyRequest
	if _, err := decodeBody(w, r, maxSmallBody, true, &req); err != nil {
		return err
	}
	id := r.PathValue("id")
	ep, err := s.getEndpoint(r, id)
	if err != nil {
		return err
	}
	if !ep.Enabled {
		return &apiError{http.StatusConflict, "conflict",
			fmt.Sprintf("endpoint %s is disabled; enable it to send it a test event", id)}
	}
	if p, ok := auth.FromContext(r.Context()); ok && !p.IsOperator() {
		if wait, ok := s.tests.take(ep.ID, s.clock.Now()); !ok {
			w.Header().Set("Retry-After", strconv.Itoa(int(wait.Seconds()+0.999)))
			return &apiError{http.StatusTooManyRequests, "rate_limited",
				fmt.Sprintf("at most %d test events a minute to an endpoint; try again in %s", testEventBurst, wait.Round(time.Second))}
		}
	}
	payload, err := json.Marshal(herald.NewTestEventPayload(ep.ConsumerID, ep.ID))
	if err != nil {
		return fmt.Errorf("test endpoint: %w", err)
	}
	results, err := s.store.EventIngest(r.Context(), &store.EventIngestParams{
		Events: []store.EventIngestItem{{
			ConsumerID: ep.ConsumerID, EventType: herald.TestEventType, Payload: payload, EndpointID: ep.ID,
		}},
		Now: s.storeNow(),
	})
	if err != nil {
		return fmt.Errorf("test endpoint: %w", err)
	}
	if len(results) != 1 {
		return fmt.Errorf("test endpoint: store answered %d results for 1 event", len(results))
	}
	if len(results[0].Deliveries) != 1 {
		// Disabled or deleted between the read and the ingest.
		return &apiError{http.StatusConflict, "conflict",
			fmt.Sprintf("endpoint %s was disabled or deleted meanwhile; the test event %s has no delivery", id, results[0].Event.ID)}
	}
	writeJSON(w, http.StatusAccepted, toIngestJSON(&results[0]))
	return nil
}

// A consumer (its key or its portal session) may send an endpoint at most
// testEventBurst test events in testEventWindow on each node: test events
// are the one kind of event a consumer makes, so they are bounded.
// Operators send events anyway and are not limited.
const (
	testEventBurst  = 10
	testEventWindow = time.Minute
	// testLimiterPrune is how many endpoints the limiter remembers before it
	// forgets those whose window has ended.
	testLimiterPrune = 10_000
)

// testLimiter counts each endpoint's test events in fixed windows.
type testLimiter struct {
	mu   sync.Mutex
	seen map[string]testWindow
}

type testWindow struct {
	start time.Time
	n     int
}

// take counts a test event to endpoint id at now, or says how long until
// the endpoint's window ends when it is full.
func (l *testLimiter) take(id string, now time.Time) (time.Duration, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.seen == nil {
		l.seen = map[string]testWindow{}
	}
	if len(l.seen) >= testLimiterPrune {
		for k, w := range l.seen {
			if now.Sub(w.start) >= testEventWindow {
				delete(l.seen, k)
			}
		}
	}
	w := l.seen[id]
	if now.Sub(w.start) >= testEventWindow || now.Before(w.start) {
		w = testWindow{start: now}
	}
	if w.n >= testEventBurst {
		return w.start.Add(testEventWindow).Sub(now), false
	}
	w.n++
	l.seen[id] = w
	return 0, true
}
