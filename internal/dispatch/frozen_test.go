package dispatch_test

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhooks/herald"
	"github.com/heraldhooks/herald/internal/clock"
	"github.com/heraldhooks/herald/internal/dispatch"
	"github.com/heraldhooks/herald/internal/sender"
	"github.com/heraldhooks/herald/internal/store"
)

// stoppedSender fails its first attempt after the test clock moved on by
// took meanwhile (the receiver silent, or the node stopped mid-attempt:
// only the time tells them apart): with a timeout, or with the answer
// code when it is set. It delivers every later attempt at once.
type stoppedSender struct {
	clock *clock.Test
	took  time.Duration
	code  int
	calls atomic.Int64
}

func (s *stoppedSender) Send(_ context.Context, _ *sender.Request) sender.Result {
	if s.calls.Add(1) == 1 {
		s.clock.Advance(s.took)
		if s.code != 0 {
			return sender.Result{Class: sender.Retryable, StatusCode: s.code, Duration: s.took, Error: "HTTP 503"}
		}
		return sender.Result{Class: sender.Retryable, Duration: s.took, Error: "timeout: no answer within 10s"}
	}
	return sender.Result{Class: sender.Success, StatusCode: 200, Duration: time.Millisecond}
}

// TestFrozenNodeHandsItsLeaseBack: an attempt that outlived its timeout
// only because its node was stopped (its lease expired under it, or it
// took far longer than the timeout allows) is not written: no attempt is
// spent, the endpoint's health counts no failure, and the lease is handed
// back, so a fresh claim delivers. A genuine timeout, the receiver silent
// for the endpoint's 10 s, still counts as a failure, and so does an
// answer the receiver gave, however late it is read. The lease is 2 x
// 10 s + 15 s.
func TestFrozenNodeHandsItsLeaseBack(t *testing.T) {
	t.Parallel()
	// run runs a dispatcher over one delivery. Where the receiver answers,
	// the dispatcher has one slot, which the attempt keeps however long it
	// runs: its lease expiring under it must not let a claim deliver the
	// delivery again before the answer is written, or the answer would
	// find its lease gone.
	run := func(t *testing.T, took time.Duration, code int) (store.Store, *clock.Test, *herald.Endpoint, string, *atomic.Int64) {
		st, c, ep := setup(t, func(http.ResponseWriter, *http.Request) {})
		id := ingest(t, st, c)
		frozen := &atomic.Int64{}
		cfg := dispatch.Config{
			Store:       st,
			Sender:      &stoppedSender{clock: c, took: took, code: code},
			Clock:       c,
			Concurrency: 4,
			Hooks:       dispatch.Hooks{Frozen: func(*store.ClaimedDelivery) { frozen.Add(1) }},
		}
		if code != 0 {
			cfg.Concurrency, cfg.LongAfter = 1, time.Hour
		}
		runDispatcher(t, cfg)
		return st, c, ep, id, frozen
	}
	health := func(t *testing.T, st store.Store, c *clock.Test, ep *herald.Endpoint) *herald.EndpointHealth {
		t.Helper()
		h, err := st.EndpointHealthGet(context.Background(), &store.EndpointHealthGetParams{ID: ep.ID, Now: c.Now()})
		require.NoError(t, err)
		return h
	}

	for _, tc := range []struct {
		name string
		took time.Duration
	}{
		{"PastItsLease", 40 * time.Second},
		{"FarPastItsTimeout", 20 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			st, c, ep, id, frozen := run(t, tc.took, 0)
			var d *herald.Delivery
			waitFor(t, func() bool {
				var err error
				d, err = st.DeliveryGet(context.Background(), id)
				require.NoError(t, err)
				return d.Status == herald.StatusDelivered
			})
			require.Equal(t, int64(1), frozen.Load())
			require.Equal(t, 1, d.AttemptCount, "the frozen attempt spent nothing")
			attempts, err := st.AttemptList(context.Background(), &store.AttemptListParams{DeliveryID: id})
			require.NoError(t, err)
			require.Len(t, attempts.Items, 1, "only the delivering attempt is logged")
			require.Equal(t, 200, attempts.Items[0].StatusCode)
			h := health(t, st, c, ep)
			require.Nil(t, h.LastFailureAt, "the endpoint is not blamed")
			require.Zero(t, h.ConsecutiveFailures)
		})
	}

	for _, tc := range []struct {
		name string
		took time.Duration
		code int
	}{
		{"GenuineTimeoutCounts", 10 * time.Second, 0},
		{"AnAnswerCountsHoweverLate", 40 * time.Second, 503},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			st, c, ep, id, frozen := run(t, tc.took, tc.code)
			var d *herald.Delivery
			waitFor(t, func() bool {
				var err error
				d, err = st.DeliveryGet(context.Background(), id)
				require.NoError(t, err)
				return d.AttemptCount == 1
			})
			require.Equal(t, herald.StatusPending, d.Status, "retried later")
			require.Equal(t, tc.code, d.LastStatusCode)
			require.Zero(t, frozen.Load())
			h := health(t, st, c, ep)
			require.NotNil(t, h.LastFailureAt)
			require.Equal(t, 1, h.ConsecutiveFailures, "the endpoint's own failure counts")
		})
	}
}
