package api_test

import (
	"net/http"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhooks/herald"
	"github.com/heraldhooks/herald/internal/store"
)

// failed is the outcome of an attempt answered 500, retried in a minute.
func failed(e *env) func(*store.ClaimedDelivery) store.DeliveryOutcome {
	return func(c *store.ClaimedDelivery) store.DeliveryOutcome {
		return store.DeliveryOutcome{
			Attempt: herald.Attempt{Number: c.Delivery.AttemptCount + 1, AttemptedAt: e.clock.Now(), Duration: time.Millisecond, StatusCode: 500, Error: "HTTP 500"},
			Status:  herald.StatusPending, RetryIn: time.Minute,
		}
	}
}

// succeeded is the outcome of an attempt answered 200.
func succeeded(e *env) func(*store.ClaimedDelivery) store.DeliveryOutcome {
	return func(c *store.ClaimedDelivery) store.DeliveryOutcome {
		return store.DeliveryOutcome{
			Attempt: herald.Attempt{Number: c.Delivery.AttemptCount + 1, AttemptedAt: e.clock.Now(), Duration: time.Millisecond, StatusCode: 200},
			Status:  herald.StatusDelivered,
		}
	}
}

// deadNow is the outcome of a last attempt answered 500.
func deadNow(e *env) func(*store.ClaimedDelivery) store.DeliveryOutcome {
	return func(c *store.ClaimedDelivery) store.DeliveryOutcome {
		return store.DeliveryOutcome{
			Attempt: herald.Attempt{Number: c.Delivery.AttemptCount + 1, AttemptedAt: e.clock.Now(), Duration: time.Millisecond, StatusCode: 500, Error: "HTTP 500"},
			Status:  herald.StatusDead, DeadReason: herald.DeadExhausted,
		}
	}
}

func TestEndpointProtectionSettings(t *testing.T) {
	t.Parallel()

	t.Run("DefaultsAreShown", func(t *testing.T) {
		t.Parallel()
		e := setup(t)
		ep := e.createEndpoint(map[string]any{})
		require.Equal(t, "none", ep.Ordering)
		require.Equal(t, 100, ep.AutoDisableAfterFailures)
		require.Equal(t, "24h", ep.AutoDisableAfter)
		require.Equal(t, healthOut{BreakerState: "closed", RateFactor: 1}, ep.Health)

		stored, err := e.store.EndpointGet(t.Context(), ep.ID)
		require.NoError(t, err)
		require.Equal(t, herald.OrderingNone, stored.Ordering)
		require.Zero(t, stored.AutoDisableAfterFailures, "the default is kept as zero, so it follows the default")
		require.Zero(t, stored.AutoDisableAfter)
	})

	t.Run("RoundTrip", func(t *testing.T) {
		t.Parallel()
		e := setup(t)
		ep := e.createEndpoint(map[string]any{
			"ordering": "fifo", "auto_disable_after_failures": 500, "auto_disable_after": "72h",
		})
		require.Equal(t, "fifo", ep.Ordering)
		require.Equal(t, 500, ep.AutoDisableAfterFailures)
		require.Equal(t, "72h", ep.AutoDisableAfter)

		var got endpointOut
		e.do("GET", "/v1/endpoints/"+ep.ID, nil).must(http.StatusOK, &got)
		require.Equal(t, ep.Ordering, got.Ordering)
		require.Equal(t, ep.AutoDisableAfterFailures, got.AutoDisableAfterFailures)
		require.Equal(t, ep.AutoDisableAfter, got.AutoDisableAfter)

		stored, err := e.store.EndpointGet(t.Context(), ep.ID)
		require.NoError(t, err)
		require.Equal(t, herald.OrderingFIFO, stored.Ordering)
		require.Equal(t, 500, stored.AutoDisableAfterFailures)
		require.Equal(t, 72*time.Hour, stored.AutoDisableAfter)
	})

	t.Run("Bounds", func(t *testing.T) {
		t.Parallel()
		e := setup(t)
		low := e.createEndpoint(map[string]any{"auto_disable_after_failures": 1, "auto_disable_after": "1m"})
		require.Equal(t, 1, low.AutoDisableAfterFailures)
		require.Equal(t, "1m", low.AutoDisableAfter)
		high := e.createEndpoint(map[string]any{"auto_disable_after_failures": 100000, "auto_disable_after": "720h"})
		require.Equal(t, 100000, high.AutoDisableAfterFailures)
		require.Equal(t, "720h", high.AutoDisableAfter)
		none := e.createEndpoint(map[string]any{"ordering": "none"})
		require.Equal(t, "none", none.Ordering)
		nulls := e.createEndpoint(map[string]any{"ordering": nil, "auto_disable_after_failures": nil, "auto_disable_after": nil})
		require.Equal(t, "none", nulls.Ordering)
		require.Equal(t, 100, nulls.AutoDisableAfterFailures)
		require.Equal(t, "24h", nulls.AutoDisableAfter)
	})

	t.Run("PatchSetsAndNullRestores", func(t *testing.T) {
		t.Parallel()
		e := setup(t)
		ep := e.createEndpoint(map[string]any{"description": "d"})
		path := "/v1/endpoints/" + ep.ID
		var got endpointOut
		e.do("PATCH", path, `{"ordering":"fifo","auto_disable_after_failures":7,"auto_disable_after":"90m"}`).must(http.StatusOK, &got)
		require.Equal(t, "fifo", got.Ordering)
		require.Equal(t, 7, got.AutoDisableAfterFailures)
		require.Equal(t, "1h30m", got.AutoDisableAfter)
		require.Equal(t, "d", got.Description)

		e.do("PATCH", path, `{"description":"e"}`).must(http.StatusOK, &got)
		require.Equal(t, "fifo", got.Ordering, "fields left out stay")
		require.Equal(t, 7, got.AutoDisableAfterFailures)

		e.do("PATCH", path, `{"ordering":"none"}`).must(http.StatusOK, &got)
		require.Equal(t, "none", got.Ordering)
		e.do("PATCH", path, `{"ordering":"fifo"}`).must(http.StatusOK, &got)

		e.do("PATCH", path, `{"ordering":null,"auto_disable_after_failures":null,"auto_disable_after":null}`).must(http.StatusOK, &got)
		require.Equal(t, "none", got.Ordering)
		require.Equal(t, 100, got.AutoDisableAfterFailures)
		require.Equal(t, "24h", got.AutoDisableAfter)
		stored, err := e.store.EndpointGet(t.Context(), ep.ID)
		require.NoError(t, err)
		require.Equal(t, herald.OrderingNone, stored.Ordering)
		require.Zero(t, stored.AutoDisableAfterFailures)
		require.Zero(t, stored.AutoDisableAfter)
	})

	t.Run("Invalid", func(t *testing.T) {
		t.Parallel()
		e := setup(t)
		target := e.createEndpoint(map[string]any{"ordering": "fifo", "auto_disable_after_failures": 9})
		// Runs once every case below has finished.
		t.Cleanup(func() {
			var list listOut[endpointOut]
			e.do("GET", "/v1/endpoints", nil).must(http.StatusOK, &list)
			require.Len(t, list.Data, 1, "nothing invalid was created")
			require.Equal(t, "fifo", list.Data[0].Ordering, "a rejected PATCH changes nothing")
			require.Equal(t, 9, list.Data[0].AutoDisableAfterFailures)
		})
		for _, tc := range []struct {
			name, fields, code, contains string
		}{
			{"OrderingUnknown", `"ordering":"lifo"`, "invalid_ordering", `ordering must be "fifo"`},
			{"OrderingEmpty", `"ordering":""`, "invalid_ordering", `"none"`},
			{"OrderingCase", `"ordering":"FIFO"`, "invalid_ordering", "ordering must be"},
			{"OrderingNotString", `"ordering":1`, "invalid_type", "ordering must be a string"},
			{"FailuresZero", `"auto_disable_after_failures":0`, "invalid_auto_disable_after_failures", "from 1 to 100000"},
			{"FailuresNegative", `"auto_disable_after_failures":-5`, "invalid_auto_disable_after_failures", "from 1 to 100000"},
			{"FailuresHuge", `"auto_disable_after_failures":100001`, "invalid_auto_disable_after_failures", "from 1 to 100000"},
			{"FailuresFraction", `"auto_disable_after_failures":1.5`, "invalid_type", "auto_disable_after_failures must be an integer"},
			{"FailuresString", `"auto_disable_after_failures":"10"`, "invalid_type", "auto_disable_after_failures must be an integer"},
			{"AfterShort", `"auto_disable_after":"59s"`, "invalid_auto_disable_after", "from 1m to 720h"},
			{"AfterLong", `"auto_disable_after":"721h"`, "invalid_auto_disable_after", "from 1m to 720h"},
			{"AfterNegative", `"auto_disable_after":"-24h"`, "invalid_auto_disable_after", "from 1m to 720h"},
			{"AfterNoUnit", `"auto_disable_after":"24"`, "invalid_auto_disable_after", "Go duration"},
			{"AfterNotDuration", `"auto_disable_after":"a day"`, "invalid_auto_disable_after", "Go duration"},
			{"AfterNumber", `"auto_disable_after":3600`, "invalid_type", "auto_disable_after must be a string"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				msg := e.do("POST", "/v1/endpoints", `{"url":"https://example.com",`+tc.fields+`}`).apiErr(http.StatusBadRequest, tc.code)
				require.Contains(t, msg, tc.contains)
				msg = e.do("PATCH", "/v1/endpoints/"+target.ID, `{`+tc.fields+`}`).apiErr(http.StatusBadRequest, tc.code)
				require.Contains(t, msg, tc.contains)
			})
		}
	})
}

func TestEndpointHealth(t *testing.T) {
	t.Parallel()

	t.Run("AfterAFailureAndASuccess", func(t *testing.T) {
		t.Parallel()
		e := setup(t)
		ep := e.createEndpoint(map[string]any{"consumer_id": "c1"})
		path := "/v1/endpoints/" + ep.ID
		e.send("c1", "order.created", `{}`)
		e.send("c1", "order.created", `{}`)
		failedAt := e.clock.Now()
		e.attempt(failed(e))

		var got endpointOut
		e.do("GET", path, nil).must(http.StatusOK, &got)
		h := got.Health
		require.Equal(t, "closed", h.BreakerState)
		require.Equal(t, 2, h.ConsecutiveFailures)
		require.Equal(t, &failedAt, h.FailingSince)
		require.Equal(t, &failedAt, h.LastFailureAt)
		require.Nil(t, h.LastSuccessAt)
		require.Nil(t, h.ProbeAt)
		require.Nil(t, h.PausedUntil)
		require.Equal(t, 1.0, h.RateFactor)
		require.NotNil(t, h.SuccessRate1h)
		require.Equal(t, 0.0, *h.SuccessRate1h)
		require.Equal(t, 2, h.Attempts1h)
		// Both wait for their retry: nothing leased, due or dead, and
		// every recent attempt failed.
		require.Equal(t, ptr(0), h.InFlight)
		require.Equal(t, ptr(0), h.Due)
		require.Equal(t, ptr(0), h.Dead)
		require.Equal(t, ptr(0), h.Score)

		t.Run("ListsLeaveTheHourOut", func(t *testing.T) {
			var list listOut[endpointOut]
			e.do("GET", "/v1/endpoints", nil).must(http.StatusOK, &list)
			require.Len(t, list.Data, 1)
			lh := list.Data[0].Health
			require.Equal(t, 2, lh.ConsecutiveFailures, "the stored health is shown")
			require.Equal(t, &failedAt, lh.LastFailureAt)
			require.Nil(t, lh.SuccessRate1h)
			require.Zero(t, lh.Attempts1h)
			require.Nil(t, lh.InFlight)
			require.Nil(t, lh.Due)
			require.Nil(t, lh.Dead)
			require.Nil(t, lh.Score)
		})

		t.Run("ListsWithIncludeHealthCarryTheHour", func(t *testing.T) {
			var list listOut[endpointOut]
			e.do("GET", "/v1/endpoints?include=health", nil).must(http.StatusOK, &list)
			require.Len(t, list.Data, 1)
			require.Equal(t, h, list.Data[0].Health, "as GET of the endpoint shows it")
		})

		e.clock.Advance(time.Minute)
		okAt := e.clock.Now()
		e.attempt(succeeded(e))
		e.do("GET", path, nil).must(http.StatusOK, &got)
		h = got.Health
		require.Equal(t, "closed", h.BreakerState)
		require.Zero(t, h.ConsecutiveFailures)
		require.Nil(t, h.FailingSince)
		require.Equal(t, &okAt, h.LastSuccessAt)
		require.Equal(t, &failedAt, h.LastFailureAt)
		require.Equal(t, 0.5, *h.SuccessRate1h)
		require.Equal(t, 4, h.Attempts1h)
		require.Equal(t, ptr(50), h.Score, "half of the hour's attempts succeeded")

		// The hour is measured on the clock handed to the store.
		e.clock.Advance(2 * time.Hour)
		e.do("GET", path, nil).must(http.StatusOK, &got)
		require.Nil(t, got.Health.SuccessRate1h, "no attempt in the last hour")
		require.Zero(t, got.Health.Attempts1h)
		require.Nil(t, got.Health.Score, "nothing recent to judge by")
		require.Equal(t, &okAt, got.Health.LastSuccessAt)
	})

	t.Run("BreakerOpens", func(t *testing.T) {
		t.Parallel()
		e := setup(t)
		ep := e.createEndpoint(map[string]any{"consumer_id": "c1"})
		for range 5 {
			e.send("c1", "a", `{}`)
		}
		openedAt := e.clock.Now()
		e.attempt(failed(e))

		var got endpointOut
		e.do("GET", "/v1/endpoints/"+ep.ID, nil).must(http.StatusOK, &got)
		require.Equal(t, "open", got.Health.BreakerState)
		require.Equal(t, 5, got.Health.ConsecutiveFailures)
		probe := openedAt.Add(5 * time.Minute)
		require.Equal(t, &probe, got.Health.ProbeAt)
	})

	t.Run("Backpressure", func(t *testing.T) {
		t.Parallel()
		e := setup(t)
		ep := e.createEndpoint(map[string]any{"consumer_id": "c1"})
		e.send("c1", "a", `{}`)
		e.send("c1", "a", `{}`)
		now := e.clock.Now()
		e.attempt(func(c *store.ClaimedDelivery) store.DeliveryOutcome {
			o := failed(e)(c)
			o.Attempt.StatusCode = 429
			o.PauseFor = 2 * time.Minute
			o.Throttled = true
			return o
		})
		var got endpointOut
		e.do("GET", "/v1/endpoints/"+ep.ID, nil).must(http.StatusOK, &got)
		until := now.Add(2 * time.Minute)
		require.Equal(t, &until, got.Health.PausedUntil)
		require.Less(t, got.Health.RateFactor, 1.0)
		require.Greater(t, got.Health.RateFactor, 0.0)
	})

	t.Run("MissingEndpoint", func(t *testing.T) {
		t.Parallel()
		e := setup(t)
		e.do("GET", "/v1/endpoints/ep_missing", nil).apiErr(http.StatusNotFound, "not_found")
	})
}

// deliveriesOf lists the deliveries of an endpoint or event, by filter.
func (e *env) deliveriesOf(query string) []deliveryOut {
	e.t.Helper()
	var list listOut[deliveryOut]
	e.do("GET", "/v1/deliveries?limit=1000&"+query, nil).must(http.StatusOK, &list)
	return list.Data
}

// dueTimes returns the deliveries' next attempt times as offsets from base,
// in the order the deliveries were created (oldest first, ties by id).
func dueTimes(t *testing.T, ds []deliveryOut, base time.Time) []time.Duration {
	t.Helper()
	sort.Slice(ds, func(i, j int) bool {
		if !ds[i].CreatedAt.Equal(ds[j].CreatedAt) {
			return ds[i].CreatedAt.Before(ds[j].CreatedAt)
		}
		return ds[i].ID < ds[j].ID
	})
	out := make([]time.Duration, len(ds))
	for i, d := range ds {
		require.Equal(t, "pending", d.Status, d.ID)
		require.NotNil(t, d.NextAttemptAt, d.ID)
		out[i] = d.NextAttemptAt.Sub(base)
	}
	return out
}

func statuses(ds []deliveryOut) []string {
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = d.Status
	}
	return out
}

func TestReplayDryRunAndRate(t *testing.T) {
	t.Parallel()

	t.Run("Endpoint", func(t *testing.T) {
		t.Parallel()
		e := setup(t)
		ep := e.createEndpoint(map[string]any{"consumer_id": "c1"})
		path := "/v1/endpoints/" + ep.ID + "/replay"
		for range 3 {
			e.send("c1", "a", `{}`)
			e.clock.Advance(time.Millisecond)
		}
		e.attempt(deadNow(e))
		e.clock.Advance(time.Hour)
		query := "endpoint_id=" + ep.ID

		var out replayedOut
		e.do("POST", path, `{"dry_run":true}`).must(http.StatusOK, &out)
		require.Equal(t, replayedOut{Replayed: 3, DryRun: true}, out)
		require.Equal(t, []string{"dead", "dead", "dead"}, statuses(e.deliveriesOf(query)), "a dry run changes nothing")
		e.do("POST", path, `{"dry_run":true,"since":"2024-05-01T12:00:00.001Z"}`).must(http.StatusOK, &out)
		require.Equal(t, replayedOut{Replayed: 2, DryRun: true}, out, "the dry run counts with the filter")

		now := e.clock.Now()
		e.do("POST", path, `{"rate":2,"dry_run":false}`).must(http.StatusOK, &out)
		require.Equal(t, replayedOut{Replayed: 3}, out)
		require.Equal(t, []time.Duration{0, 500 * time.Millisecond, time.Second}, dueTimes(t, e.deliveriesOf(query), now),
			"paced at 2 a second, oldest first")

		e.do("POST", path, `{"dry_run":true}`).must(http.StatusOK, &out)
		require.Equal(t, replayedOut{Replayed: 0, DryRun: true}, out, "nothing dead is left")
	})

	t.Run("WithoutRateAllAreDueNow", func(t *testing.T) {
		t.Parallel()
		e := setup(t)
		ep := e.createEndpoint(map[string]any{"consumer_id": "c1"})
		e.send("c1", "a", `{}`)
		e.send("c1", "a", `{}`)
		e.attempt(deadNow(e))
		e.clock.Advance(time.Minute)
		now := e.clock.Now()
		var out replayedOut
		e.do("POST", "/v1/endpoints/"+ep.ID+"/replay", nil).must(http.StatusOK, &out)
		require.Equal(t, replayedOut{Replayed: 2}, out)
		require.Equal(t, []time.Duration{0, 0}, dueTimes(t, e.deliveriesOf("endpoint_id="+ep.ID), now))
	})

	t.Run("Event", func(t *testing.T) {
		t.Parallel()
		e := setup(t)
		for range 3 {
			e.createEndpoint(map[string]any{"consumer_id": "c1"})
		}
		ev := e.send("c1", "a", `{}`)
		require.Len(t, ev.Deliveries, 3)
		e.attempt(deadNow(e))
		e.clock.Advance(time.Minute)
		path := "/v1/events/" + ev.ID + "/replay"
		query := "event_id=" + ev.ID

		var out replayedOut
		e.do("POST", path, `{"dry_run":true,"status":"dead"}`).must(http.StatusOK, &out)
		require.Equal(t, replayedOut{Replayed: 3, DryRun: true}, out)
		require.Equal(t, []string{"dead", "dead", "dead"}, statuses(e.deliveriesOf(query)))
		e.do("POST", path, `{"dry_run":true,"status":"cancelled"}`).must(http.StatusOK, &out)
		require.Equal(t, replayedOut{Replayed: 0, DryRun: true}, out)

		now := e.clock.Now()
		e.do("POST", path, `{"rate":4}`).must(http.StatusOK, &out)
		require.Equal(t, replayedOut{Replayed: 3}, out)
		got := dueTimes(t, e.deliveriesOf(query), now)
		sort.Slice(got, func(i, j int) bool { return got[i] < got[j] })
		require.Equal(t, []time.Duration{0, 250 * time.Millisecond, 500 * time.Millisecond}, got, "paced at 4 a second")
	})

	t.Run("DisabledEndpointEvenDryRun", func(t *testing.T) {
		t.Parallel()
		e := setup(t)
		ep := e.createEndpoint(map[string]any{})
		e.do("POST", "/v1/endpoints/"+ep.ID+"/disable", nil).must(http.StatusOK, nil)
		msg := e.do("POST", "/v1/endpoints/"+ep.ID+"/replay", `{"dry_run":true}`).apiErr(http.StatusConflict, "conflict")
		require.Contains(t, msg, "enable")
	})

	t.Run("Invalid", func(t *testing.T) {
		t.Parallel()
		e := setup(t)
		ep := e.createEndpoint(map[string]any{"consumer_id": "c1"})
		ev := e.send("c1", "a", `{}`)
		for _, path := range []string{"/v1/endpoints/" + ep.ID + "/replay", "/v1/events/" + ev.ID + "/replay"} {
			for _, tc := range []struct{ body, code, contains string }{
				{`{"rate":0}`, "invalid_rate", "above 0 and at most 10000"},
				{`{"rate":-1}`, "invalid_rate", "above 0"},
				{`{"rate":10000.5}`, "invalid_rate", "at most 10000"},
				{`{"rate":"fast"}`, "invalid_type", "rate must be a number"},
				{`{"dry_run":"yes"}`, "invalid_type", "dry_run must be a boolean"},
				{`{"dry_run":true,"rate":1,"pace":1}`, "unknown_field", `"pace"`},
			} {
				msg := e.do("POST", path, tc.body).apiErr(http.StatusBadRequest, tc.code)
				require.Contains(t, msg, tc.contains, "%s %s", path, tc.body)
			}
			var out replayedOut
			e.do("POST", path, `{"rate":10000}`).must(http.StatusOK, &out)
			require.Equal(t, replayedOut{}, out, "the highest rate is taken")
		}
		// A bad rate is refused before the id is looked up.
		e.do("POST", "/v1/endpoints/ep_missing/replay", `{"rate":0}`).apiErr(http.StatusBadRequest, "invalid_rate")
		e.do("POST", "/v1/events/evt_missing/replay", `{"rate":0}`).apiErr(http.StatusBadRequest, "invalid_rate")
	})
}
