package breaker_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhooks/herald"
	"github.com/heraldhooks/herald/internal/breaker"
)

var t0 = time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)

func ptr(t time.Time) *time.Time { return &t }

var (
	failure = breaker.Result{StatusCode: 503, Error: "HTTP 503"}
	success = breaker.Result{Success: true, StatusCode: 200}
)

// observeAll applies results one second apart from start, each with an
// empty window, and returns the health and the effects of each step.
func observeAll(ep *herald.Endpoint, h herald.EndpointHealth, start time.Time, results ...breaker.Result) (herald.EndpointHealth, []breaker.Effects) {
	var all []breaker.Effects
	for i, r := range results {
		var fx breaker.Effects
		h, fx = breaker.Default().Observe(ep, h, r, breaker.Window{}, start.Add(time.Duration(i)*time.Second))
		all = append(all, fx)
	}
	return h, all
}

func repeat(r breaker.Result, n int) []breaker.Result {
	out := make([]breaker.Result, n)
	for i := range out {
		out[i] = r
	}
	return out
}

func TestDefaultIsTheDesign(t *testing.T) {
	t.Parallel()
	require.Equal(t, breaker.Config{
		ConsecutiveFailures: 5,
		WindowRatio:         0.5,
		Window:              10 * time.Minute,
		WindowMinAttempts:   20,
		CooldownMin:         5 * time.Minute,
		CooldownMax:         time.Hour,
	}, breaker.Default())
}

func TestFiveConsecutiveFailuresOpen(t *testing.T) {
	t.Parallel()
	ep := &herald.Endpoint{}
	h, fxs := observeAll(ep, herald.NewEndpointHealth(), t0, repeat(failure, 4)...)
	require.Equal(t, herald.BreakerClosed, h.BreakerState)
	require.Equal(t, 4, h.ConsecutiveFailures)
	for _, fx := range fxs {
		require.False(t, fx.Opened)
	}

	now := t0.Add(time.Minute)
	h, fx := breaker.Default().Observe(ep, h, failure, breaker.Window{}, now)
	require.True(t, fx.Opened)
	require.Equal(t, herald.BreakerOpen, h.BreakerState)
	require.Equal(t, 5, h.ConsecutiveFailures)
	require.Equal(t, 5*time.Minute, h.Cooldown)
	require.Equal(t, ptr(now.Add(5*time.Minute)), h.ProbeAt)
	require.Equal(t, ptr(t0), h.FailingSince, "the streak's first failure")
	require.Equal(t, ptr(now), h.LastFailureAt)
	require.Equal(t, ptr(now.Add(5*time.Minute)), h.BlockedUntil())
}

func TestWindowRule(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name     string
		streak   int
		window   breaker.Window
		wantOpen bool
	}{
		{"HalfOfTwentyOpens", 0, breaker.Window{Attempts: 20, Failures: 10}, true},
		{"AllOfTwentyOpens", 1, breaker.Window{Attempts: 20, Failures: 20}, true},
		{"HalfOfFortyOpens", 0, breaker.Window{Attempts: 40, Failures: 20}, true},
		{"JustUnderHalfStays", 0, breaker.Window{Attempts: 20, Failures: 9}, false},
		{"NineteenAttemptsAreTooFew", 0, breaker.Window{Attempts: 19, Failures: 19}, false},
		{"NoWindowStays", 0, breaker.Window{}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := herald.NewEndpointHealth()
			h.ConsecutiveFailures = tc.streak
			got, fx := breaker.Default().Observe(&herald.Endpoint{}, h, failure, tc.window, t0)
			require.Equal(t, tc.wantOpen, fx.Opened)
			if tc.wantOpen {
				require.Equal(t, herald.BreakerOpen, got.BreakerState)
				require.Equal(t, 5*time.Minute, got.Cooldown)
				require.Equal(t, ptr(t0.Add(5*time.Minute)), got.ProbeAt)
			} else {
				require.Equal(t, herald.BreakerClosed, got.BreakerState)
				require.Nil(t, got.ProbeAt)
			}
		})
	}
}

func TestWindowIsNotConsultedOnSuccess(t *testing.T) {
	t.Parallel()
	got, fx := breaker.Default().Observe(&herald.Endpoint{}, herald.NewEndpointHealth(), success,
		breaker.Window{Attempts: 40, Failures: 40}, t0)
	require.False(t, fx.Opened)
	require.Equal(t, herald.BreakerClosed, got.BreakerState)
}

func TestNeedsWindow(t *testing.T) {
	t.Parallel()
	cfg := breaker.Default()
	cases := []struct {
		state  herald.BreakerState
		streak int
		want   bool
	}{
		{herald.BreakerClosed, 0, true},
		{herald.BreakerClosed, 3, true},
		{herald.BreakerClosed, 4, false}, // the streak alone opens it
		{herald.BreakerClosed, 9, false},
		{"", 0, true}, // the zero health is closed, as Observe reads it
		{herald.BreakerOpen, 0, false},
		{herald.BreakerHalfOpen, 0, false},
	}
	for _, tc := range cases {
		h := herald.EndpointHealth{BreakerState: tc.state, ConsecutiveFailures: tc.streak}
		require.Equal(t, tc.want, cfg.NeedsWindow(&h), "%s with %d failures", tc.state, tc.streak)
	}
}

func TestFailedProbeDoublesCooldownUpToAnHour(t *testing.T) {
	t.Parallel()
	cases := []struct {
		cooldown, want time.Duration
	}{
		{5 * time.Minute, 10 * time.Minute},
		{10 * time.Minute, 20 * time.Minute},
		{20 * time.Minute, 40 * time.Minute},
		{40 * time.Minute, time.Hour},
		{time.Hour, time.Hour},
		{0, 5 * time.Minute}, // never below the first period
	}
	for _, tc := range cases {
		t.Run(tc.cooldown.String(), func(t *testing.T) {
			t.Parallel()
			h := herald.EndpointHealth{
				BreakerState: herald.BreakerHalfOpen, ConsecutiveFailures: 5, Cooldown: tc.cooldown,
				ProbeAt: ptr(t0.Add(27 * time.Second)), RateFactor: 1,
			}
			got, fx := breaker.Default().Observe(&herald.Endpoint{}, h, failure, breaker.Window{}, t0)
			require.True(t, fx.Opened)
			require.Equal(t, herald.BreakerOpen, got.BreakerState)
			require.Equal(t, tc.want, got.Cooldown)
			require.Equal(t, ptr(t0.Add(tc.want)), got.ProbeAt)
			require.Equal(t, 6, got.ConsecutiveFailures)
		})
	}
}

func TestSuccessClosesAndResets(t *testing.T) {
	t.Parallel()
	for _, state := range []herald.BreakerState{herald.BreakerHalfOpen, herald.BreakerOpen, herald.BreakerClosed} {
		t.Run(string(state), func(t *testing.T) {
			t.Parallel()
			h := herald.EndpointHealth{
				BreakerState: state, ConsecutiveFailures: 2, FailingSince: ptr(t0.Add(-time.Hour)),
				LastFailureAt: ptr(t0.Add(-time.Minute)), Cooldown: 20 * time.Minute, RateFactor: 1,
			}
			if state != herald.BreakerClosed {
				h.ProbeAt = ptr(t0)
			}
			got, fx := breaker.Default().Observe(&herald.Endpoint{}, h, success, breaker.Window{}, t0)
			require.Equal(t, state != herald.BreakerClosed, fx.Closed)
			require.Equal(t, herald.EndpointHealth{
				BreakerState:  herald.BreakerClosed,
				LastSuccessAt: ptr(t0),
				LastFailureAt: ptr(t0.Add(-time.Minute)),
				RateFactor:    1,
			}, got)
			require.False(t, fx.NotifyRecovered, "two failures were no streak worth a notice")
			require.Nil(t, got.BlockedUntil())
		})
	}
}

// A plain health is one a success changes in nothing but its last
// success; the stores write that at most once a second.
func TestPlainIsWhatASuccessLeavesAsItIs(t *testing.T) {
	t.Parallel()
	paused := ptr(t0.Add(time.Minute))
	cases := []struct {
		name  string
		h     herald.EndpointHealth
		plain bool
	}{
		{"fresh", herald.EndpointHealth{}, true},
		{"closed at full speed", herald.EndpointHealth{BreakerState: herald.BreakerClosed, RateFactor: 1, LastSuccessAt: ptr(t0.Add(-time.Hour))}, true},
		{"an old failure", herald.EndpointHealth{BreakerState: herald.BreakerClosed, RateFactor: 1, LastFailureAt: ptr(t0.Add(-time.Hour))}, true},
		{"paused", herald.EndpointHealth{BreakerState: herald.BreakerClosed, RateFactor: 1, PausedUntil: paused}, true},
		{"a failure counted", herald.EndpointHealth{BreakerState: herald.BreakerClosed, RateFactor: 1, ConsecutiveFailures: 1, FailingSince: ptr(t0)}, false},
		{"failing since", herald.EndpointHealth{BreakerState: herald.BreakerClosed, RateFactor: 1, FailingSince: ptr(t0)}, false},
		{"notified", herald.EndpointHealth{BreakerState: herald.BreakerClosed, RateFactor: 1, FailingNotified: true}, false},
		{"slowed down", herald.EndpointHealth{BreakerState: herald.BreakerClosed, RateFactor: 0.5}, false},
		{"a cooldown kept", herald.EndpointHealth{BreakerState: herald.BreakerClosed, RateFactor: 1, Cooldown: time.Minute}, false},
		{"open", herald.EndpointHealth{BreakerState: herald.BreakerOpen, RateFactor: 1, ProbeAt: ptr(t0)}, false},
		{"half-open", herald.EndpointHealth{BreakerState: herald.BreakerHalfOpen, RateFactor: 1}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tc.plain, breaker.Plain(&tc.h))
			got, fx := breaker.Default().Observe(&herald.Endpoint{}, tc.h, success, breaker.Window{}, t0)
			require.Equal(t, ptr(t0), got.LastSuccessAt)
			got.LastSuccessAt = tc.h.LastSuccessAt
			unchanged := got == tc.h.Normalized() && fx == breaker.Effects{}
			require.Equal(t, tc.plain, unchanged, "a success changes more than the last success exactly when the health is not plain")
		})
	}
}

func TestFailureWhileOpenKeepsTheOpenPeriod(t *testing.T) {
	t.Parallel()
	h := herald.EndpointHealth{
		BreakerState: herald.BreakerOpen, ConsecutiveFailures: 5, Cooldown: 5 * time.Minute,
		ProbeAt: ptr(t0.Add(4 * time.Minute)), RateFactor: 1,
	}
	got, fx := breaker.Default().Observe(&herald.Endpoint{}, h, failure, breaker.Window{}, t0)
	require.False(t, fx.Opened)
	require.Equal(t, herald.BreakerOpen, got.BreakerState)
	require.Equal(t, 5*time.Minute, got.Cooldown)
	require.Equal(t, ptr(t0.Add(4*time.Minute)), got.ProbeAt)
	require.Equal(t, 6, got.ConsecutiveFailures)
}

func TestFailingIsNotifiedOncePerStreak(t *testing.T) {
	t.Parallel()
	ep := &herald.Endpoint{}
	results := append(repeat(failure, 4), success)
	results = append(results, repeat(failure, 3)...)
	h, fxs := observeAll(ep, herald.NewEndpointHealth(), t0, results...)
	var notified []int
	for i, fx := range fxs {
		if fx.NotifyFailing {
			notified = append(notified, i+1)
		}
	}
	require.Equal(t, []int{3, 8}, notified, "the third failure of each streak")
	require.True(t, h.FailingNotified)

	// The success after the first streak reported it.
	rec := fxs[4]
	require.True(t, rec.NotifyRecovered)
	require.Equal(t, 4, rec.FailedAttempts)
	require.Equal(t, t0, rec.FailingSince)
	for i, fx := range fxs {
		if i != 4 {
			require.False(t, fx.NotifyRecovered, "step %d", i+1)
		}
	}
}

func TestRecoveredOnlyAfterANotifiedStreak(t *testing.T) {
	t.Parallel()
	_, fxs := observeAll(&herald.Endpoint{}, herald.NewEndpointHealth(), t0, failure, failure, success)
	require.False(t, fxs[2].NotifyRecovered)
	require.Zero(t, fxs[2].FailedAttempts)
}

func TestRetryAfterPauses(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		paused *time.Time
		r      breaker.Result
		want   *time.Time
	}{
		{"FailureSetsPause", nil, breaker.Result{StatusCode: 503, PauseFor: 30 * time.Second}, ptr(t0.Add(30 * time.Second))},
		{"SuccessMayAskToo", nil, breaker.Result{Success: true, StatusCode: 200, PauseFor: time.Minute}, ptr(t0.Add(time.Minute))},
		{"LongerExtends", ptr(t0.Add(10 * time.Second)), breaker.Result{StatusCode: 429, PauseFor: time.Minute}, ptr(t0.Add(time.Minute))},
		{"ShorterKeepsTheLonger", ptr(t0.Add(time.Hour)), breaker.Result{StatusCode: 429, PauseFor: time.Minute}, ptr(t0.Add(time.Hour))},
		{"NoneLeavesIt", ptr(t0.Add(time.Hour)), failure, ptr(t0.Add(time.Hour))},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := herald.NewEndpointHealth()
			h.PausedUntil = tc.paused
			got, _ := breaker.Default().Observe(&herald.Endpoint{}, h, tc.r, breaker.Window{}, t0)
			require.Equal(t, tc.want, got.PausedUntil)
			require.Equal(t, tc.want, got.BlockedUntil(), "a closed breaker blocks for the pause")
			require.Equal(t, herald.BreakerClosed, got.BreakerState)
		})
	}
}

func TestThrottleHalvesAndRecovers(t *testing.T) {
	t.Parallel()
	throttled := breaker.Result{StatusCode: 429, Error: "HTTP 429", Throttled: true}
	ep := &herald.Endpoint{}
	h := herald.NewEndpointHealth()
	want := 1.0
	for i := range 8 {
		h, _ = breaker.Default().Observe(ep, h, throttled, breaker.Window{}, t0)
		want = max(want/2, 1.0/64)
		require.InDelta(t, want, h.RateFactor, 1e-12, "after %d", i+1)
		h.BreakerState, h.ProbeAt = herald.BreakerClosed, nil // keep it about the factor
	}
	require.InDelta(t, 1.0/64, h.RateFactor, 1e-12, "never below 1/64")

	// A failure that is not a 429 leaves the factor alone.
	h.RateFactor = 0.5
	h, _ = breaker.Default().Observe(ep, h, failure, breaker.Window{}, t0)
	require.InDelta(t, 0.5, h.RateFactor, 1e-12)

	// From half speed, seven successes restore it, six do not.
	h = herald.NewEndpointHealth()
	h.RateFactor = 0.5
	prev := h.RateFactor
	for i := 1; i <= 7; i++ {
		h, _ = breaker.Default().Observe(ep, h, success, breaker.Window{}, t0)
		require.Greater(t, h.RateFactor, prev, "success %d speeds up", i)
		if i < 7 {
			require.Less(t, h.RateFactor, 1.0, "after %d successes", i)
		}
		prev = h.RateFactor
	}
	require.Equal(t, 1.0, h.RateFactor)
	h, _ = breaker.Default().Observe(ep, h, success, breaker.Window{}, t0)
	require.Equal(t, 1.0, h.RateFactor, "and no further")
}

func TestZeroHealthIsClosedAtFullSpeed(t *testing.T) {
	t.Parallel()
	got, fx := breaker.Default().Observe(&herald.Endpoint{}, herald.EndpointHealth{}, failure, breaker.Window{}, t0)
	require.False(t, fx.Opened)
	require.Equal(t, herald.BreakerClosed, got.BreakerState)
	require.Equal(t, 1.0, got.RateFactor)
	require.Equal(t, breaker.Flowing, breaker.GateAt(&herald.EndpointHealth{}, t0))
}

func TestAutoDisable(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		ep   herald.Endpoint
		// failures in the streak before the one observed, the first at
		// FailingSince
		before int
		since  time.Duration // how long ago the streak began
		want   string
	}{
		{"NinetyNineFailuresStay", herald.Endpoint{}, 98, time.Hour, ""},
		{"HundredthFailureDisables", herald.Endpoint{}, 99, time.Hour, breaker.DisabledAutomatically},
		{"OwnCountDisables", herald.Endpoint{AutoDisableAfterFailures: 3}, 2, time.Minute, breaker.DisabledAutomatically},
		{"OwnCountNotYet", herald.Endpoint{AutoDisableAfterFailures: 3}, 1, time.Minute, ""},
		{"TenFailuresOverADayDisable", herald.Endpoint{}, 9, 24 * time.Hour, breaker.DisabledAutomatically},
		{"TenFailuresOverLessThanADayStay", herald.Endpoint{}, 9, 24*time.Hour - time.Second, ""},
		{"NineFailuresOverTwoDaysStay", herald.Endpoint{}, 8, 48 * time.Hour, ""},
		{"OwnPeriodDisables", herald.Endpoint{AutoDisableAfter: time.Hour}, 9, time.Hour, breaker.DisabledAutomatically},
		{"OwnPeriodNotYet", herald.Endpoint{AutoDisableAfter: time.Hour}, 9, 59 * time.Minute, ""},
		{"OwnPeriodStillNeedsTenFailures", herald.Endpoint{AutoDisableAfter: time.Hour}, 8, 5 * time.Hour, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := herald.NewEndpointHealth()
			h.ConsecutiveFailures = tc.before
			h.FailingNotified = tc.before >= herald.FailingNotifyAfter
			if tc.before > 0 {
				h.FailingSince = ptr(t0.Add(-tc.since))
				h.LastSuccessAt = ptr(t0.Add(-tc.since - time.Minute))
			}
			// An open breaker does not stop the count.
			if tc.before >= 5 {
				h.BreakerState, h.Cooldown, h.ProbeAt = herald.BreakerHalfOpen, time.Hour, ptr(t0)
			}
			got, fx := breaker.Default().Observe(&tc.ep, h, failure, breaker.Window{}, t0)
			require.Equal(t, tc.want, fx.Disable)
			require.Equal(t, tc.before+1, got.ConsecutiveFailures)
		})
	}
}

func TestGateAt(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		h    herald.EndpointHealth
		want breaker.Gate
	}{
		{"Closed", herald.NewEndpointHealth(), breaker.Flowing},
		{"ClosedWhilePausedStillFlows", herald.EndpointHealth{BreakerState: herald.BreakerClosed, PausedUntil: ptr(t0.Add(time.Hour))}, breaker.Flowing},
		{"OpenBeforeProbeTime", herald.EndpointHealth{BreakerState: herald.BreakerOpen, ProbeAt: ptr(t0.Add(time.Microsecond))}, breaker.Blocked},
		{"OpenAtProbeTime", herald.EndpointHealth{BreakerState: herald.BreakerOpen, ProbeAt: ptr(t0)}, breaker.Probe},
		{"OpenAfterProbeTime", herald.EndpointHealth{BreakerState: herald.BreakerOpen, ProbeAt: ptr(t0.Add(-time.Hour))}, breaker.Probe},
		{"OpenWithoutProbeTime", herald.EndpointHealth{BreakerState: herald.BreakerOpen}, breaker.Probe},
		{"ProbeOut", herald.EndpointHealth{BreakerState: herald.BreakerHalfOpen, ProbeAt: ptr(t0.Add(time.Second))}, breaker.Blocked},
		{"ProbeLost", herald.EndpointHealth{BreakerState: herald.BreakerHalfOpen, ProbeAt: ptr(t0)}, breaker.Probe},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tc.want, breaker.GateAt(&tc.h, t0))
		})
	}
}

func TestProbing(t *testing.T) {
	t.Parallel()
	h := herald.EndpointHealth{
		BreakerState: herald.BreakerOpen, ConsecutiveFailures: 5, Cooldown: 5 * time.Minute,
		ProbeAt: ptr(t0), RateFactor: 1,
	}
	expiry := t0.Add(27 * time.Second)
	got := breaker.Probing(h, expiry)
	require.Equal(t, herald.BreakerHalfOpen, got.BreakerState)
	require.Equal(t, ptr(expiry), got.ProbeAt)
	require.Equal(t, 5*time.Minute, got.Cooldown, "a failed probe doubles from here")
	require.Equal(t, 5, got.ConsecutiveFailures)
	require.Equal(t, herald.BreakerOpen, h.BreakerState, "the argument is a copy")
	require.Equal(t, breaker.Blocked, breaker.GateAt(&got, t0))
	require.Equal(t, breaker.Probe, breaker.GateAt(&got, expiry))
	require.Equal(t, ptr(expiry), got.BlockedUntil())
}

func TestDescribe(t *testing.T) {
	t.Parallel()
	cases := []struct {
		h    herald.EndpointHealth
		want string
	}{
		{herald.NewEndpointHealth(), "healthy"},
		{herald.EndpointHealth{BreakerState: herald.BreakerClosed, ConsecutiveFailures: 2}, "2 consecutive failures"},
		{herald.EndpointHealth{BreakerState: herald.BreakerOpen, ConsecutiveFailures: 7}, "breaker open after 7 consecutive failures"},
		{herald.EndpointHealth{BreakerState: herald.BreakerHalfOpen, ConsecutiveFailures: 7}, "breaker half-open: one probe in flight"},
	}
	for _, tc := range cases {
		require.Equal(t, tc.want, breaker.Describe(&tc.h))
	}
}
