// Package breaker decides an endpoint's health after each attempt: its
// circuit breaker (closed, open, half-open), its failure streak, the pause a
// receiver asked for, the slow-down after 429s, the notifications the change
// deserves and whether the endpoint must be disabled. It is pure: the stores
// call it inside the transaction that writes the outcome, so every node
// applies the same rules to the state they share.
package breaker

import (
	"fmt"
	"math"
	"time"

	"github.com/heraldhooks/herald"
)

// Config holds the breaker's thresholds (DESIGN.md, Delivery rules).
type Config struct {
	// ConsecutiveFailures opens the breaker.
	ConsecutiveFailures int
	// WindowRatio of failures over Window, with at least WindowMinAttempts
	// attempts, opens it too.
	WindowRatio       float64
	Window            time.Duration
	WindowMinAttempts int
	// CooldownMin is the first open period; each failed probe doubles it,
	// up to CooldownMax.
	CooldownMin time.Duration
	CooldownMax time.Duration
}

// Default returns the thresholds of DESIGN.md.
func Default() Config {
	return Config{
		ConsecutiveFailures: 5,
		WindowRatio:         0.5,
		Window:              10 * time.Minute,
		WindowMinAttempts:   20,
		CooldownMin:         5 * time.Minute,
		CooldownMax:         time.Hour,
	}
}

// Result is what one attempt of a delivery to the endpoint came to.
type Result struct {
	// Success is a 2xx. Anything else (any other status, a timeout, a
	// refused connection) is a failure: an endpoint answering 404 to
	// everything is as broken as one that is down.
	Success    bool
	StatusCode int
	Error      string
	// PauseFor is the Retry-After of a 429 or 503: no request to the
	// endpoint before it has passed.
	PauseFor time.Duration
	// Throttled is a 429 without Retry-After: the endpoint's effective
	// rate and in-flight cap are halved, and recover on success.
	Throttled bool
}

// Window counts the endpoint's attempts over the last Config.Window,
// including the one being observed.
type Window struct {
	Attempts int
	Failures int
}

// Effects say what follows from an observation, beyond the new health.
type Effects struct {
	Opened          bool
	Closed          bool
	NotifyFailing   bool
	NotifyRecovered bool
	// FailedAttempts and FailingSince describe the streak that just ended
	// (for herald.endpoint.recovered).
	FailedAttempts int
	FailingSince   time.Time
	// Disable, when not empty, is the reason the endpoint must be disabled now.
	Disable string
}

// DisabledAutomatically is the reason recorded on an endpoint that Herald
// disabled after a long failure streak.
const DisabledAutomatically = "auto_disabled"

// NeedsWindow reports whether observing a failure with health h needs the
// window counts: only while the breaker is closed (the zero state, as
// Observe reads it, is closed too) and the streak alone would not open it.
// Stores count attempts only then.
func (c Config) NeedsWindow(h *herald.EndpointHealth) bool {
	closed := h.BreakerState == herald.BreakerClosed || h.BreakerState == ""
	return closed && h.ConsecutiveFailures+1 < c.ConsecutiveFailures
}

// Plain reports whether a success (with no pause asked) would change
// nothing of h but its LastSuccessAt: the breaker closed, no failure
// counted or notified, no probe or cooldown pending, full speed. Stores
// write such a success's health at most once per store.LastSuccessPrecision.
func Plain(health *herald.EndpointHealth) bool {
	h := health.Normalized()
	return h.BreakerState == herald.BreakerClosed && h.ConsecutiveFailures == 0 && h.FailingSince == nil && !h.FailingNotified &&
		h.ProbeAt == nil && h.Cooldown == 0 && h.RateFactor >= 1
}

// Observe applies one attempt's result to the endpoint's health.
func (c Config) Observe(ep *herald.Endpoint, h herald.EndpointHealth, r Result, w Window, now time.Time) (herald.EndpointHealth, Effects) {
	h = h.Normalized()
	var fx Effects
	if r.PauseFor > 0 {
		until := now.Add(r.PauseFor)
		if h.PausedUntil == nil || until.After(*h.PausedUntil) {
			h.PausedUntil = &until
		}
	}
	if r.Success {
		return c.success(h, now)
	}

	h.ConsecutiveFailures++
	h.LastFailureAt = &now
	if h.FailingSince == nil {
		h.FailingSince = &now
	}
	if r.Throttled {
		h.RateFactor = math.Max(h.RateFactor/2, minRateFactor)
	}
	switch h.BreakerState {
	case herald.BreakerHalfOpen:
		// The probe failed: open again, for twice as long.
		h.Cooldown = min(max(2*h.Cooldown, c.CooldownMin), c.CooldownMax)
		c.open(&h, now)
		fx.Opened = true
	case herald.BreakerClosed:
		tooMany := h.ConsecutiveFailures >= c.ConsecutiveFailures
		tooOften := w.Attempts >= c.WindowMinAttempts &&
			float64(w.Failures) >= c.WindowRatio*float64(w.Attempts)
		if tooMany || tooOften {
			h.Cooldown = c.CooldownMin
			c.open(&h, now)
			fx.Opened = true
		}
	case herald.BreakerOpen:
		// An attempt that started before the breaker opened; the open
		// period stands as it is.
	}
	if h.ConsecutiveFailures >= herald.FailingNotifyAfter && !h.FailingNotified {
		h.FailingNotified = true
		fx.NotifyFailing = true
	}
	fx.Disable = disableReason(ep, &h, now)
	return h, fx
}

// minRateFactor bounds how far 429s slow an endpoint down (1/64 of its rate).
const minRateFactor = 1.0 / 64

func (c Config) open(h *herald.EndpointHealth, now time.Time) {
	h.BreakerState = herald.BreakerOpen
	at := now.Add(h.Cooldown)
	h.ProbeAt = &at
}

func (c Config) success(h herald.EndpointHealth, now time.Time) (herald.EndpointHealth, Effects) {
	var fx Effects
	if h.FailingNotified && h.FailingSince != nil {
		fx.NotifyRecovered = true
		fx.FailedAttempts = h.ConsecutiveFailures
		fx.FailingSince = *h.FailingSince
	}
	if h.BreakerState != herald.BreakerClosed {
		fx.Closed = true
	}
	h.BreakerState = herald.BreakerClosed
	h.ConsecutiveFailures = 0
	h.FailingSince = nil
	h.FailingNotified = false
	h.LastSuccessAt = &now
	h.ProbeAt = nil
	h.Cooldown = 0
	// Recover gradually from 429s: about seven successes from half speed.
	h.RateFactor = math.Min(1, h.RateFactor*1.1+0.01)
	return h, fx
}

// disableReason says why the endpoint must be disabled now, or "": 100
// consecutive failures, or no success for 24 h across at least 10 failed
// attempts (both settable per endpoint).
func disableReason(ep *herald.Endpoint, h *herald.EndpointHealth, now time.Time) string {
	after := ep.AutoDisableAfterFailures
	if after <= 0 {
		after = herald.DefaultAutoDisableAfterFailures
	}
	for24 := ep.AutoDisableAfter
	if for24 <= 0 {
		for24 = herald.DefaultAutoDisableAfter
	}
	if h.ConsecutiveFailures >= after {
		return DisabledAutomatically
	}
	if h.ConsecutiveFailures >= herald.AutoDisableMinFailures && h.FailingSince != nil {
		since := *h.FailingSince
		if h.LastSuccessAt != nil && h.LastSuccessAt.After(since) {
			since = *h.LastSuccessAt
		}
		if now.Sub(since) >= for24 {
			return DisabledAutomatically
		}
	}
	return ""
}

// Gate is what the breaker lets a claim take from an endpoint.
type Gate int

// The gates.
const (
	// Flowing: the breaker is closed and sets no limit.
	Flowing Gate = iota
	// Probe: the open period is over; exactly one delivery may go.
	Probe
	// Blocked: the breaker is open (or a probe is out); nothing goes.
	Blocked
)

// GateAt says what the breaker allows at now.
func GateAt(h *herald.EndpointHealth, now time.Time) Gate {
	if h.BreakerState == herald.BreakerClosed || h.BreakerState == "" {
		return Flowing
	}
	if h.ProbeAt == nil || !now.Before(*h.ProbeAt) {
		return Probe
	}
	return Blocked
}

// Probing records that a probe was claimed and its lease runs until
// leaseExpiry: the breaker is half-open and, should the probe be lost, the
// next may go when its lease has run out.
func Probing(h herald.EndpointHealth, leaseExpiry time.Time) herald.EndpointHealth {
	h.BreakerState = herald.BreakerHalfOpen
	h.ProbeAt = &leaseExpiry
	return h
}

// Describe explains the health in a sentence, for logs and the CLI.
func Describe(h *herald.EndpointHealth) string {
	switch h.BreakerState {
	case herald.BreakerOpen:
		return fmt.Sprintf("breaker open after %d consecutive failures", h.ConsecutiveFailures)
	case herald.BreakerHalfOpen:
		return "breaker half-open: one probe in flight"
	}
	if h.ConsecutiveFailures > 0 {
		return fmt.Sprintf("%d consecutive failures", h.ConsecutiveFailures)
	}
	return "healthy"
}
