package api

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strconv"
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
// rate_limited with Retry-After past TestEventLimit a minute).
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
		q, err := s.store.ConsumerQuotaTake(r.Context(), &store.ConsumerQuotaTakeParams{
			ConsumerID: ep.ConsumerID, Kind: store.QuotaTestEvent, Limit: TestEventLimit, Window: TestEventWindow, Now: s.storeNow(),
		})
		if err != nil {
			return fmt.Errorf("test endpoint: %w", err)
		}
		if !q.OK {
			wait := retryAfter(w, q)
			return &apiError{http.StatusTooManyRequests, "rate_limited",
				fmt.Sprintf("at most %d test events a minute across a consumer's endpoints; try again in %s", TestEventLimit, wait)}
		}
	}
	payload, err := json.Marshal(herald.NewTestEventPayload(ep.ConsumerID, ep.ID))
	if err != nil {
		return fmt.Errorf("test endpoint: %w", err)
	}
	results, err := s.ingest(r.Context(), []store.EventIngestItem{{
		ConsumerID: ep.ConsumerID, EventType: herald.TestEventType, Payload: payload, EndpointID: ep.ID,
	}})
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

// A consumer (its keys and its portal sessions together) may send at most
// TestEventLimit test events in any TestEventWindow, across all its
// endpoints and all nodes (store.QuotaTestEvent, counted in the database):
// test events are the one kind of event a consumer makes, and each is a
// request Herald sends to a URL the consumer chose, so that without a
// bound a consumer could aim Herald at a third party. Operators send
// events anyway and are not limited.
const (
	TestEventLimit  = 10
	TestEventWindow = time.Minute
)

// retryAfter sets the Retry-After header of a refused quota take q (whole
// seconds, rounded up, at least 1) and returns the wait, rounded to the
// second, for the message.
func retryAfter(w http.ResponseWriter, q store.QuotaTaken) time.Duration {
	secs := int64(math.Ceil(q.RetryAt.Sub(q.Now).Seconds()))
	secs = max(secs, 1)
	w.Header().Set("Retry-After", strconv.FormatInt(secs, 10))
	return time.Duration(secs) * time.Second
}
