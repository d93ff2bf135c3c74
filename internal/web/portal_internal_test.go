package web

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhooks/herald/internal/wire"
)

// TestEndpointNotice: what the portal says of an endpoint's state, from
// what Herald records of it.
func TestEndpointNotice(t *testing.T) {
	t.Parallel()
	since := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	probe := since.Add(5 * time.Minute)
	failed := &wire.Delivery{ID: "dlv_1", LastStatusCode: 502, LastError: "HTTP 502"}
	timedOut := &wire.Delivery{ID: "dlv_2", LastError: "timeout after 10s"}
	cases := []struct {
		name string
		ep   wire.Endpoint
		last *wire.Delivery
		kind string
		want []string // each in the notice's text
	}{
		{"Healthy", wire.Endpoint{Enabled: true, Health: wire.EndpointHealth{BreakerState: "closed"}}, nil, "", nil},
		{"DisabledByTheOperator", wire.Endpoint{DisabledReason: "maintenance", Health: wire.EndpointHealth{BreakerState: "closed"}}, nil,
			"error", []string{"disabled", "Why: maintenance."}},
		{"DisabledFor410", wire.Endpoint{DisabledReason: "gone"}, failed, "error", []string{"410 Gone", "Last failure: HTTP 502 (delivery dlv_1)."}},
		{"DisabledAutomatically", wire.Endpoint{DisabledReason: "auto_disabled", AutoDisableAfterFailures: 100, AutoDisableAfter: wire.Duration(24 * time.Hour)}, nil,
			"error", []string{"failed for too long (100 failures in a row, or no success for 24h across at least 10 failures)"}},
		{"BreakerOpen", wire.Endpoint{Enabled: true, Health: wire.EndpointHealth{BreakerState: "open", ConsecutiveFailures: 5, FailingSince: &since, ProbeAt: &probe}}, timedOut,
			"error", []string{"paused deliveries", "5 attempts in a row failed, since 2026-03-04 05:06:07 UTC.", "tries again at 2026-03-04 05:11:07 UTC", "Last failure: timeout after 10s (delivery dlv_2)."}},
		{"BreakerHalfOpen", wire.Endpoint{Enabled: true, Health: wire.EndpointHealth{BreakerState: "half_open", ConsecutiveFailures: 6, FailingSince: &since, LastFailureAt: &probe}}, nil,
			"error", []string{"single test delivery", "Last failure at 2026-03-04 05:11:07 UTC."}},
		{"Failing", wire.Endpoint{Enabled: true, Health: wire.EndpointHealth{BreakerState: "closed", ConsecutiveFailures: 2, FailingSince: &since}}, failed,
			"warn", []string{"The last 2 attempts failed, since 2026-03-04 05:06:07 UTC", "HTTP 502"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			n := endpointNotice(&c.ep, c.last)
			if c.kind == "" {
				require.Nil(t, n)
				return
			}
			require.NotNil(t, n)
			require.Equal(t, c.kind, n.Kind)
			text := n.Title + " " + strings.Join(n.Lines, " ")
			for _, w := range c.want {
				require.Contains(t, text, w)
			}
		})
	}
}
