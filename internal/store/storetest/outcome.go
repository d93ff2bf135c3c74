package storetest

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhooks/herald"
	"github.com/heraldhooks/herald/internal/store"
)

// elsewhere is a zone away from UTC: the cases below pass their times in
// it, and the backends give every time back in UTC.
var elsewhere = time.FixedZone("UTC-5", -5*60*60)

// completeNotify writes outcomes at now and returns what was applied and
// the notifications handed to Notify, in order.
func completeNotify(t *testing.T, s store.Store, now time.Time, outcomes ...store.DeliveryOutcome) ([]bool, []herald.Notification) {
	t.Helper()
	var got []herald.Notification
	applied, err := s.DeliveryCompleteMany(t.Context(), &store.DeliveryCompleteManyParams{
		Outcomes: outcomes, Now: now,
		Notify: func(n herald.Notification) { got = append(got, n) },
	})
	require.NoError(t, err)
	require.Len(t, applied, len(outcomes))
	return applied, got
}

// typesOf lists the notifications' types, in order.
func typesOf(ns []herald.Notification) []string {
	out := make([]string, len(ns))
	for i, n := range ns {
		out[i] = n.EventType
	}
	return out
}

// requirePayloadTimes requires that the payload's fields named in want
// are these times written in UTC, as RFC 3339 with a "Z".
func requirePayloadTimes(t *testing.T, payload []byte, want map[string]time.Time) {
	t.Helper()
	var fields map[string]any
	require.NoError(t, json.Unmarshal(payload, &fields), "payload %s", payload)
	for name, at := range want {
		require.Equal(t, at.UTC().Format(time.RFC3339Nano), fields[name], "%s in %s", name, payload)
	}
}

// testNotifyOrder: one outcome that ends a delivery, starts the failing
// notice of its streak and disables its endpoint emits the three in the
// one order store.ObserveOutcome documents (failing, dead, disabled),
// hands them to Notify in that order, and ingests the same payloads; its
// times are UTC whatever zone the caller's clock is in.
func testNotifyOrder(t *testing.T, s store.Store) {
	in := quietEndpoint("c")
	in.AutoDisableAfterFailures = 3
	ep := createEndpoint(t, s, in, at(0))
	createEndpoint(t, s, subscriber("c"), at(0))
	ids := ingestN(t, s, at(0), ep, 3)
	leases := claimAll(t, s, at(0))
	require.Len(t, leases, 3)

	fail(t, s, at(time.Second).In(elsewhere), leases[ids[0]], time.Minute)
	fail(t, s, at(2*time.Second).In(elsewhere), leases[ids[1]], time.Minute)
	o := outcome(leases[ids[2]], herald.StatusDead, at(3*time.Second).In(elsewhere))
	o.Attempt.StatusCode = 503
	o.Attempt.Error = "HTTP 503"
	o.DeadReason = herald.DeadExhausted
	applied, got := completeNotify(t, s, at(3*time.Second).In(elsewhere), o)
	require.Equal(t, []bool{true}, applied)
	require.Equal(t, []string{herald.NotifyEndpointFailing, herald.NotifyDeliveryDead, herald.NotifyEndpointDisabled},
		typesOf(got), "failing, then dead, then disabled")
	for _, n := range got {
		require.Equal(t, "c", n.ConsumerID)
		require.Equal(t, n.Payload, oneEvent(t, s, "c", n.EventType, &json.RawMessage{}).Payload,
			"the %s ingested is the one handed over", n.EventType)
	}
	requirePayloadTimes(t, got[0].Payload, map[string]time.Time{"failing_since": at(time.Second)})
	requirePayloadTimes(t, got[2].Payload, map[string]time.Time{"disabled_at": at(3 * time.Second)})
	var dead herald.DeliveryDeadPayload
	require.NoError(t, json.Unmarshal(got[1].Payload, &dead))
	require.Equal(t, herald.DeliveryDeadPayload{
		DeliveryID: ids[2], EventID: dead.EventID, EventType: "order.created", EndpointID: ep.ID, ConsumerID: "c",
		DeadReason: string(herald.DeadExhausted), AttemptCount: 1, LastStatusCode: 503, LastError: "HTTP 503",
	}, dead)
}

// testNotifyRecoveredUTC: the recovery notice's times are UTC whatever
// zone the caller's clock is in, and the health it leaves has no
// FailingSince.
func testNotifyRecoveredUTC(t *testing.T, s store.Store) {
	ep := createEndpoint(t, s, quietEndpoint("c"), at(0))
	ids := ingestN(t, s, at(0), ep, 4)
	leases := claimAll(t, s, at(0))
	for i, id := range ids[:3] {
		fail(t, s, at(time.Duration(i+1)*time.Second).In(elsewhere), leases[id], time.Hour)
	}
	applied, got := completeNotify(t, s, at(4*time.Second).In(elsewhere),
		outcome(leases[ids[3]], herald.StatusDelivered, at(4*time.Second).In(elsewhere)))
	require.Equal(t, []bool{true}, applied)
	require.Equal(t, []string{herald.NotifyEndpointRecovered}, typesOf(got))
	requirePayloadTimes(t, got[0].Payload, map[string]time.Time{
		"failing_since": at(time.Second), "recovered_at": at(4 * time.Second)})
	require.Nil(t, healthOf(t, s, ep.ID, at(4*time.Second)).FailingSince)
}

// testHealthNoFailingSince: a health without a streak has a nil
// FailingSince, in EndpointHealthGet and EndpointFigures alike, and the
// next failure starts one, in UTC, at its time.
func testHealthNoFailingSince(t *testing.T, s store.Store) {
	ep := createEndpoint(t, s, quietEndpoint("c"), at(0))
	ids := ingestN(t, s, at(0), ep, 3)
	leases := claimAll(t, s, at(0))
	fail(t, s, at(time.Second), leases[ids[0]], time.Hour)
	finish(t, s, at(2*time.Second), leases[ids[1]], herald.StatusDelivered)

	read := healthOf(t, s, ep.ID, at(2*time.Second))
	require.Nil(t, read.FailingSince)
	require.Zero(t, read.ConsecutiveFailures)
	figures, err := s.EndpointFigures(t.Context(), &store.EndpointFiguresParams{IDs: []string{ep.ID}, Now: at(2 * time.Second)})
	require.NoError(t, err)
	require.Contains(t, figures, ep.ID)
	require.Nil(t, figures[ep.ID].FailingSince)
	require.Equal(t, 2, figures[ep.ID].Attempts1h)

	fail(t, s, at(3*time.Second).In(elsewhere), leases[ids[2]], time.Hour)
	read = healthOf(t, s, ep.ID, at(3*time.Second))
	requireTimePtr(t, at(3*time.Second), read.FailingSince)
	require.Equal(t, time.UTC, read.FailingSince.Location())
}

// testHealthLastSuccessPrecisionInAMixedBatch: a success within
// store.LastSuccessPrecision of the last one kept is not written, also in
// a batch whose other outcomes (a failure of another endpoint) take the
// breaker's path.
func testHealthLastSuccessPrecisionInAMixedBatch(t *testing.T, s store.Store) {
	ok := createEndpoint(t, s, quietEndpoint("c1"), at(0))
	failing := createEndpoint(t, s, quietEndpoint("c2"), at(0))
	ids := ingestN(t, s, at(0), ok, 2)
	other := ingestFor(t, s, at(0), failing)
	leases := claimAll(t, s, at(0))
	require.Len(t, leases, 3)

	t1 := at(time.Second)
	finish(t, s, t1, leases[ids[0]], herald.StatusDelivered)
	half := t1.Add(store.LastSuccessPrecision / 2)
	require.Equal(t, []bool{true, true}, complete(t, s, half,
		outcome(leases[other], herald.StatusPending, half),
		outcome(leases[ids[1]], herald.StatusDelivered, half)))
	requireTimePtr(t, t1, healthOf(t, s, ok.ID, half).LastSuccessAt,
		"a success within the precision of the last one kept is not written")
	require.Equal(t, 1, healthOf(t, s, failing.ID, half).ConsecutiveFailures)
}
