package cli_test

import (
	"context"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhooks/herald"
	"github.com/heraldhooks/herald/internal/store"
)

// failing is the outcome of an attempt answered 500, retried in an hour.
func failing(c *store.ClaimedDelivery) store.DeliveryOutcome {
	return store.DeliveryOutcome{
		Status: herald.StatusPending, RetryIn: time.Hour,
		Attempt: herald.Attempt{
			Number: c.Delivery.AttemptCount + 1, AttemptedAt: time.Now(), Duration: 5 * time.Millisecond,
			StatusCode: 500, Error: "HTTP 500",
		},
	}
}

// protectionJSON is the part of an endpoint answer about its protection.
type protectionJSON struct {
	Ordering                 string `json:"ordering"`
	AutoDisableAfterFailures int    `json:"auto_disable_after_failures"`
	AutoDisableAfter         string `json:"auto_disable_after"`
	Health                   struct {
		BreakerState        string   `json:"breaker_state"`
		ConsecutiveFailures int      `json:"consecutive_failures"`
		SuccessRate1h       *float64 `json:"success_rate_1h"`
		Attempts1h          int      `json:"attempts_1h"`
	} `json:"health"`
}

func TestEndpointsProtectionFlags(t *testing.T) {
	t.Parallel()
	t.Run("CreateShowsThem", func(t *testing.T) {
		t.Parallel()
		e := setupAPI(t)
		out := e.run("endpoints", "create", "--url", "https://example.com/hooks", "--ordering", "fifo",
			"--auto-disable-after-failures", "50", "--auto-disable-after", "48h")
		require.Equal(t, "fifo", field(t, out, "ordering"))
		require.Equal(t, "after 50 consecutive failures, or 48h without a success", field(t, out, "auto-disable"))

		var ep protectionJSON
		e.runJSON(&ep, "endpoints", "get", field(t, out, "id"))
		require.Equal(t, "fifo", ep.Ordering)
		require.Equal(t, 50, ep.AutoDisableAfterFailures)
		require.Equal(t, "48h", ep.AutoDisableAfter)
	})
	t.Run("DefaultsShown", func(t *testing.T) {
		t.Parallel()
		e := setupAPI(t)
		out := e.run("endpoints", "get", e.createEndpoint())
		require.Equal(t, "none", field(t, out, "ordering"))
		require.Equal(t, "after 100 consecutive failures, or 24h without a success", field(t, out, "auto-disable"))
	})
	t.Run("UpdateAndZeroRestoresTheDefault", func(t *testing.T) {
		t.Parallel()
		e := setupAPI(t)
		id := e.createEndpoint("--ordering", "fifo", "--auto-disable-after-failures", "7", "--auto-disable-after", "2h")
		var ep protectionJSON
		e.runJSON(&ep, "endpoints", "update", id, "--ordering", "none")
		require.Equal(t, "none", ep.Ordering)
		require.Equal(t, 7, ep.AutoDisableAfterFailures, "only the flags given change")
		e.runJSON(&ep, "endpoints", "update", id, "--auto-disable-after-failures", "9")
		require.Equal(t, 9, ep.AutoDisableAfterFailures)
		require.Equal(t, "2h", ep.AutoDisableAfter)
		e.runJSON(&ep, "endpoints", "update", id, "--auto-disable-after-failures", "0", "--auto-disable-after", "0s")
		require.Equal(t, 100, ep.AutoDisableAfterFailures)
		require.Equal(t, "24h", ep.AutoDisableAfter)
		e.runJSON(&ep, "endpoints", "update", id, "--auto-disable-after", "30m")
		require.Equal(t, "30m", ep.AutoDisableAfter)
	})
	t.Run("APIValidationErrorsShowTheirCode", func(t *testing.T) {
		t.Parallel()
		e := setupAPI(t)
		id := e.createEndpoint()
		for _, tc := range []struct {
			args []string
			code string
		}{
			{[]string{"endpoints", "create", "--url", "https://example.com/hooks", "--ordering", "lifo"}, "invalid_ordering: "},
			{[]string{"endpoints", "update", id, "--ordering", "random"}, "invalid_ordering: "},
			{[]string{"endpoints", "update", id, "--auto-disable-after-failures", "100001"}, "invalid_auto_disable_after_failures: "},
			{[]string{"endpoints", "create", "--url", "https://example.com/hooks", "--auto-disable-after", "30s"}, "invalid_auto_disable_after: "},
		} {
			err := e.fail(tc.args...)
			require.True(t, strings.HasPrefix(err.Error(), tc.code), err.Error())
		}
		require.ErrorContains(t, e.fail("endpoints", "update", id, "--auto-disable-after", "soon"), "auto-disable-after")
	})
}

func TestEndpointsGetHealth(t *testing.T) {
	t.Parallel()
	t.Run("Fresh", func(t *testing.T) {
		t.Parallel()
		e := setupAPI(t)
		out := e.run("endpoints", "get", e.createEndpoint())
		require.Equal(t, "closed", field(t, out, "breaker"))
		require.Equal(t, "0", field(t, out, "consecutive failures"))
		require.Equal(t, "-", field(t, out, "last success"))
		require.Equal(t, "-", field(t, out, "last failure"))
		require.Equal(t, "no attempts", field(t, out, "success rate 1h"))
		require.NotContains(t, out, "paused until")
		require.NotContains(t, out, "slowed down")
	})
	t.Run("FailuresThenAnOpenBreaker", func(t *testing.T) {
		t.Parallel()
		e := setupAPI(t)
		id := e.createEndpoint("--consumer", "c1")
		e.send("c1", "a.b", `{}`)
		e.send("c1", "a.b", `{}`)
		e.complete(failing)

		out := e.run("endpoints", "get", id)
		require.Equal(t, "closed", field(t, out, "breaker"))
		require.Regexp(t, `^2 \(since \d{4}-\d\d-\d\dT`, field(t, out, "consecutive failures"))
		require.Equal(t, "-", field(t, out, "last success"))
		require.Regexp(t, `^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d`, field(t, out, "last failure"))
		require.Equal(t, "0% of 2 attempts", field(t, out, "success rate 1h"))
		require.NotContains(t, e.run("endpoints", "update", id, "--description", "x"), "breaker",
			"only get shows the health")

		for range 3 {
			e.send("c1", "a.b", `{}`)
		}
		e.complete(failing)
		out = e.run("endpoints", "get", id)
		require.Regexp(t, `^open: deliveries wait, spending no attempt; next probe at \d{4}-`, field(t, out, "breaker"))
		require.Regexp(t, `^5 \(since `, field(t, out, "consecutive failures"))
		require.Equal(t, "0% of 5 attempts", field(t, out, "success rate 1h"))

		var ep protectionJSON
		e.runJSON(&ep, "endpoints", "get", id)
		require.Equal(t, "open", ep.Health.BreakerState)
		require.Equal(t, 5, ep.Health.Attempts1h)
	})
	t.Run("SuccessRateAndBackpressure", func(t *testing.T) {
		t.Parallel()
		e := setupAPI(t)
		id := e.createEndpoint("--consumer", "c1")
		for range 3 {
			e.send("c1", "ok", `{}`)
		}
		e.send("c1", "slow", `{}`)
		e.complete(byType(map[string]func(*store.ClaimedDelivery) store.DeliveryOutcome{
			"ok": delivered,
			"slow": func(c *store.ClaimedDelivery) store.DeliveryOutcome {
				o := failing(c)
				o.Attempt.StatusCode = 429
				o.PauseFor = time.Hour
				o.Throttled = true
				return o
			},
		}))
		out := e.run("endpoints", "get", id)
		require.Equal(t, "75% of 4 attempts", field(t, out, "success rate 1h"))
		require.Regexp(t, `^\d{4}-\d\d-\d\dT\S+ \(the receiver sent Retry-After\)$`, field(t, out, "paused until"))
		require.Regexp(t, `^\d+(\.\d)?% of its rate and in-flight cap \(the receiver answered 429\)$`, field(t, out, "slowed down"))
		require.Regexp(t, `^\d{4}-`, field(t, out, "last success"))
	})
}

// dueOffsets returns how long after the first the deliveries are due,
// sorted.
func dueOffsets(t *testing.T, e *apiEnv, p *store.DeliveryListParams) []time.Duration {
	t.Helper()
	page, err := e.store.DeliveryList(context.Background(), p)
	require.NoError(t, err)
	var due []time.Time
	for _, d := range page.Items {
		require.Equal(t, herald.StatusPending, d.Status)
		require.NotNil(t, d.NextAttemptAt)
		due = append(due, *d.NextAttemptAt)
	}
	sort.Slice(due, func(i, j int) bool { return due[i].Before(due[j]) })
	out := make([]time.Duration, len(due))
	for i, d := range due {
		out[i] = d.Sub(due[0])
	}
	return out
}

func TestReplayDryRunAndRate(t *testing.T) {
	t.Parallel()
	t.Run("Endpoint", func(t *testing.T) {
		t.Parallel()
		e := setupAPI(t)
		id := e.createEndpoint("--consumer", "c1")
		for range 3 {
			e.send("c1", "a.b", `{}`)
		}
		e.complete(dead)

		require.Equal(t, "would replay 3 deliveries of endpoint "+id+" (dry run: nothing changed)\n",
			e.run("endpoints", "replay", id, "--dry-run"))
		require.Len(t, lines(e.run("deliveries", "list", "--status", "dead", "-q")), 3)
		var out struct {
			Replayed int  `json:"replayed"`
			DryRun   bool `json:"dry_run"`
		}
		e.runJSON(&out, "endpoints", "replay", id, "--dry-run", "--status", "dead")
		require.Equal(t, 3, out.Replayed)
		require.True(t, out.DryRun)

		require.Equal(t, "replayed 3 deliveries of endpoint "+id+", paced at 2 a second over 1s\n",
			e.run("endpoints", "replay", id, "--rate", "2"))
		require.Equal(t, []time.Duration{0, 500 * time.Millisecond, time.Second},
			dueOffsets(t, e, &store.DeliveryListParams{EndpointID: id}))
	})
	t.Run("Event", func(t *testing.T) {
		t.Parallel()
		e := setupAPI(t)
		for range 3 {
			e.createEndpoint("--consumer", "c1")
		}
		ev := e.send("c1", "a.b", `{}`)
		e.complete(dead)

		require.Equal(t, "would replay 3 deliveries of event "+ev+" (dry run: nothing changed)\n",
			e.run("events", "replay", ev, "--dry-run", "--status", "dead"))
		require.Equal(t, "would replay 0 deliveries of event "+ev+" (dry run: nothing changed)\n",
			e.run("events", "replay", ev, "--dry-run", "--status", "cancelled"))
		require.Len(t, lines(e.run("deliveries", "list", "--status", "dead", "-q")), 3)

		require.Equal(t, "replayed 3 deliveries of event "+ev+", paced at 4 a second over 500ms\n",
			e.run("events", "replay", ev, "--rate", "4"))
		require.Equal(t, []time.Duration{0, 250 * time.Millisecond, 500 * time.Millisecond},
			dueOffsets(t, e, &store.DeliveryListParams{EventID: ev}))
		require.Equal(t, "replayed 0 deliveries of event "+ev+"\n", e.run("events", "replay", ev, "--rate", "4"))
	})
	t.Run("BadRate", func(t *testing.T) {
		t.Parallel()
		e := setupAPI(t)
		id := e.createEndpoint("--consumer", "c1")
		ev := e.send("c1", "a.b", `{}`)
		for _, args := range [][]string{
			{"endpoints", "replay", id, "--rate", "0"},
			{"events", "replay", ev, "--rate", "-3"},
		} {
			require.ErrorContains(t, e.fail(args...), "--rate must be above 0")
		}
		err := e.fail("endpoints", "replay", id, "--rate", "20000")
		require.True(t, strings.HasPrefix(err.Error(), "invalid_rate: "), err.Error())
		err = e.fail("events", "replay", ev, "--rate", "20000")
		require.True(t, strings.HasPrefix(err.Error(), "invalid_rate: "), err.Error())
		require.ErrorContains(t, e.fail("events", "replay", ev, "--rate", "fast"), "rate")
	})
}
