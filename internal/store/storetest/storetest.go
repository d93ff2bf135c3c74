// Package storetest is the conformance suite every store.Store backend
// runs. It speaks only through the store.Store interface, so the SQLite and
// PostgreSQL backends are held to the same behaviour; a change in storage
// behaviour starts as a new case here.
//
// A backend's test calls Run with an opener that returns a fresh, migrated,
// empty store for each case and closes it with t.Cleanup:
//
//	func TestStore(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) store.Store { ... })
//	}
//
// Every case runs in parallel with the others. Times are those of a test
// clock passed as Now, starting at Base; backends keep microseconds, so the
// suite compares times in UTC truncated to the microsecond.
package storetest

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhooks/herald"
	"github.com/heraldhooks/herald/internal/store"
)

// Base is the test clock's start: every case measures its time from it.
var Base = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// leaseMargin is the LeaseMargin the suite claims with.
const leaseMargin = 7 * time.Second

// waitFor bounds how long a case waits on a channel.
const waitFor = 10 * time.Second

// testCase is one named behaviour, run on a fresh store.
type testCase struct {
	name string
	fn   func(t *testing.T, s store.Store)
}

// Run runs the conformance suite against the backend that open returns. open
// must give a fresh, migrated, empty store each time it is called, and close
// it when the test ends (t.Cleanup).
func Run(t *testing.T, open func(t *testing.T) store.Store) {
	groups := []struct {
		name  string
		cases []testCase
	}{
		{"Endpoint", endpointCases()},
		{"Event", eventCases()},
		{"Filter", filterCases()},
		{"Trace", traceCases()},
		{"Claim", claimCases()},
		{"NextDue", nextDueCases()},
		{"Queue", queueCases()},
		{"Complete", completeCases()},
		{"Release", releaseCases()},
		{"Delivery", deliveryCases()},
		{"Replay", replayCases()},
		{"Attempt", attemptCases()},
		{"Stats", statsCases()},
		{"Setting", settingCases()},
		{"Subscribe", subscribeCases()},
		{"Lifecycle", lifecycleCases()},
		{"Breaker", breakerCases()},
		{"Limits", limitCases()},
		{"Fairness", fairnessCases()},
		{"FIFO", fifoCases()},
		{"Notify", notifyCases()},
		{"Health", healthCases()},
		{"Figures", figuresCases()},
		{"Sort", sortCases()},
		{"APIKey", apiKeyCases()},
		{"PortalSession", portalCases()},
		{"OperatorSession", operatorSessionCases()},
		{"Purge", purgeCases()},
		{"EventType", eventTypeCases()},
		{"Activity", activityCases()},
		{"Depth", depthCases()},
		{"Notice", noticeCases()},
		{"Quota", quotaCases()},
		{"RequestBucket", requestBucketCases()},
		{"Leasing", leasingCases()},
		{"LeaseLost", leaseLostCases()},
	}
	for _, g := range groups {
		t.Run(g.name, func(t *testing.T) {
			t.Parallel()
			for _, tc := range g.cases {
				t.Run(tc.name, func(t *testing.T) {
					t.Parallel()
					tc.fn(t, open(t))
				})
			}
		})
	}
}

// at is Base plus d.
func at(d time.Duration) time.Time { return Base.Add(d) }

// utcMicro is how a backend gives a time back.
func utcMicro(t time.Time) time.Time { return t.UTC().Truncate(time.Microsecond) }

// requireTime checks that got is want, to the microsecond.
func requireTime(t *testing.T, want, got time.Time, msgAndArgs ...any) {
	t.Helper()
	require.Equal(t, utcMicro(want), utcMicro(got), msgAndArgs...)
}

// requireTimePtr checks that got is set and is want, to the microsecond.
func requireTimePtr(t *testing.T, want time.Time, got *time.Time, msgAndArgs ...any) {
	t.Helper()
	require.NotNil(t, got, msgAndArgs...)
	requireTime(t, want, *got, msgAndArgs...)
}

// newEndpoint is an enabled endpoint of consumer with the given filter
// (default "*": every operator event, none of Herald's notifications) and
// plain settings.
func newEndpoint(consumer string, eventTypes ...string) *herald.Endpoint {
	if len(eventTypes) == 0 {
		eventTypes = []string{"*"}
	}
	return &herald.Endpoint{
		ConsumerID:      consumer,
		URL:             "https://receiver.example.com/hooks",
		EventTypes:      eventTypes,
		Secret:          "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
		Enabled:         true,
		Timeout:         10 * time.Second,
		RetrySchedule:   slices.Clone(herald.DefaultRetrySchedule),
		MaxInFlight:     herald.DefaultMaxInFlight,
		SignatureScheme: herald.SchemeStandard,
	}
}

// createEndpoint creates ep at now.
func createEndpoint(t *testing.T, s store.Store, ep *herald.Endpoint, now time.Time) *herald.Endpoint {
	t.Helper()
	got, err := s.EndpointCreate(t.Context(), &store.EndpointCreateParams{Endpoint: ep, Now: now})
	require.NoError(t, err)
	return got
}

// disableEndpoint disables endpoint id at now.
func disableEndpoint(t *testing.T, s store.Store, id string, now time.Time) *herald.Endpoint {
	t.Helper()
	ep, err := s.EndpointSetEnabled(t.Context(), &store.EndpointSetEnabledParams{ID: id, Enabled: false, Reason: "manual", Now: now})
	require.NoError(t, err)
	return ep
}

// ingest ingests items at now.
func ingest(t *testing.T, s store.Store, now time.Time, items ...store.EventIngestItem) []store.EventIngestResult {
	t.Helper()
	res, err := s.EventIngest(t.Context(), &store.EventIngestParams{Events: items, Now: now})
	require.NoError(t, err)
	require.Len(t, res, len(items))
	return res
}

// ingestOne ingests one event of eventType for consumer at now.
func ingestOne(t *testing.T, s store.Store, now time.Time, consumer, eventType string) store.EventIngestResult {
	t.Helper()
	return ingest(t, s, now, store.EventIngestItem{
		ConsumerID: consumer,
		EventType:  eventType,
		Payload:    []byte(`{"n":1}`),
	})[0]
}

// ingestFor ingests one event for ep's consumer at now, requires that it
// fans out to ep alone, and returns that delivery's id.
func ingestFor(t *testing.T, s store.Store, now time.Time, ep *herald.Endpoint) string {
	t.Helper()
	res := ingestOne(t, s, now, ep.ConsumerID, "order.created")
	require.Len(t, res.Deliveries, 1)
	require.Equal(t, ep.ID, res.Deliveries[0].EndpointID)
	return res.Deliveries[0].ID
}

// claim claims up to limit deliveries at now.
func claim(t *testing.T, s store.Store, now time.Time, limit int) []*store.ClaimedDelivery {
	t.Helper()
	got, err := s.DeliveryClaim(t.Context(), &store.DeliveryClaimParams{Limit: limit, LeaseMargin: leaseMargin, Now: now})
	require.NoError(t, err)
	return got
}

// claimAll claims every due delivery at now, by delivery id.
func claimAll(t *testing.T, s store.Store, now time.Time) map[string]*store.ClaimedDelivery {
	t.Helper()
	out := map[string]*store.ClaimedDelivery{}
	for _, c := range claim(t, s, now, store.MaxListLimit) {
		out[c.Delivery.ID] = c
	}
	return out
}

// claimOne claims at now and requires that exactly delivery id comes back.
func claimOne(t *testing.T, s store.Store, now time.Time, id string) *store.ClaimedDelivery {
	t.Helper()
	got := claim(t, s, now, store.MaxListLimit)
	require.Len(t, got, 1)
	require.Equal(t, id, got[0].Delivery.ID)
	return got[0]
}

// requireNoneDue requires that a claim at now takes nothing.
func requireNoneDue(t *testing.T, s store.Store, now time.Time) {
	t.Helper()
	require.Empty(t, claim(t, s, now, store.MaxListLimit))
}

// outcome is a plain outcome of lease c.
func outcome(c *store.ClaimedDelivery, status herald.Status, attemptedAt time.Time) store.DeliveryOutcome {
	o := store.DeliveryOutcome{
		Lease:  store.Lease{DeliveryID: c.Delivery.ID, LeaseToken: c.LeaseToken},
		Status: status,
		Attempt: herald.Attempt{
			Number:      c.Delivery.AttemptCount + 1,
			AttemptedAt: attemptedAt,
			Duration:    120 * time.Millisecond,
		},
	}
	switch status {
	case herald.StatusDelivered:
		o.Attempt.StatusCode = 200
		o.Attempt.Response = []byte("ok")
	case herald.StatusPending:
		o.Attempt.StatusCode = 503
		o.Attempt.Error = "HTTP 503"
		o.RetryIn = 30 * time.Second
	case herald.StatusDead:
		o.Attempt.StatusCode = 400
		o.Attempt.Error = "HTTP 400"
		o.DeadReason = herald.DeadClientError
	}
	return o
}

// complete writes outcomes at now and returns what was applied.
func complete(t *testing.T, s store.Store, now time.Time, outcomes ...store.DeliveryOutcome) []bool {
	t.Helper()
	got, err := s.DeliveryCompleteMany(t.Context(), &store.DeliveryCompleteManyParams{Outcomes: outcomes, Now: now})
	require.NoError(t, err)
	require.Len(t, got, len(outcomes))
	return got
}

// finish completes lease c with status at now and requires it applied.
func finish(t *testing.T, s store.Store, now time.Time, c *store.ClaimedDelivery, status herald.Status) {
	t.Helper()
	require.Equal(t, []bool{true}, complete(t, s, now, outcome(c, status, now)))
}

// getDelivery reads delivery id.
func getDelivery(t *testing.T, s store.Store, id string) *herald.Delivery {
	t.Helper()
	d, err := s.DeliveryGet(t.Context(), id)
	require.NoError(t, err)
	return d
}

// requireStatus requires that delivery id is in status.
func requireStatus(t *testing.T, s store.Store, id string, status herald.Status) *herald.Delivery {
	t.Helper()
	d := getDelivery(t, s, id)
	require.Equal(t, status, d.Status, "delivery %s", id)
	return d
}

// attempts lists every attempt of delivery id.
func attempts(t *testing.T, s store.Store, id string) []*herald.Attempt {
	t.Helper()
	page, err := s.AttemptList(t.Context(), &store.AttemptListParams{DeliveryID: id, Limit: store.MaxListLimit})
	require.NoError(t, err)
	require.Empty(t, page.NextCursor)
	return page.Items
}

// collect walks every page of a list with limit, checking that no page is
// larger than limit and that only the last has no cursor, and returns the
// ids in list order.
func collect[T any](t *testing.T, limit int, id func(T) string, list func(cursor string) (*store.Page[T], error)) []string {
	t.Helper()
	var ids []string
	cursor := ""
	for range 10000 {
		page, err := list(cursor)
		require.NoError(t, err)
		require.LessOrEqual(t, len(page.Items), limit)
		for _, it := range page.Items {
			ids = append(ids, id(it))
		}
		if page.NextCursor == "" {
			return ids
		}
		require.Len(t, page.Items, limit, "a page before the last is full")
		cursor = page.NextCursor
	}
	require.FailNow(t, "pagination never ended")
	return nil
}

// reversed returns a reversed copy of ids.
func reversed(ids []string) []string {
	out := slices.Clone(ids)
	slices.Reverse(out)
	return out
}

// waitSignal waits for a value (or a close) on ch.
func waitSignal(t *testing.T, ch <-chan struct{}) bool {
	t.Helper()
	select {
	case _, ok := <-ch:
		return ok
	case <-time.After(waitFor):
		require.FailNow(t, "no signal in time")
		return false
	}
}

// expectNotFound requires err to be store.ErrNotFound.
func expectNotFound(t *testing.T, err error) {
	t.Helper()
	require.ErrorIs(t, err, store.ErrNotFound)
}

// expectConflict requires err to be store.ErrConflict.
func expectConflict(t *testing.T, err error) {
	t.Helper()
	require.ErrorIs(t, err, store.ErrConflict)
}

// ctxCancelledAfter is a context that is cancelled the moment its Done
// method has been called more than n times: every database call checks its
// context, so a run of these cancels an operation at each step in turn.
type ctxCancelledAfter struct {
	context.Context
	mu   sync.Mutex
	left int
	done chan struct{}
}

func newCtxCancelledAfter(parent context.Context, n int) *ctxCancelledAfter {
	return &ctxCancelledAfter{Context: parent, left: n, done: make(chan struct{})}
}

func (c *ctxCancelledAfter) Done() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.left >= 0 {
		c.left--
		if c.left < 0 {
			close(c.done)
		}
	}
	return c.done
}

func (c *ctxCancelledAfter) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.left < 0 {
		return context.Canceled
	}
	return nil
}
