package herald

import (
	"math"
	"time"
)

// BreakerState is where an endpoint's circuit breaker stands.
type BreakerState string

// The breaker states.
const (
	// BreakerClosed: deliveries flow.
	BreakerClosed BreakerState = "closed"
	// BreakerOpen: due deliveries wait, spending no attempt, until ProbeAt.
	BreakerOpen BreakerState = "open"
	// BreakerHalfOpen: one probe is in flight; its outcome closes or
	// reopens the breaker. If the probe is lost (its node died), another
	// goes at ProbeAt.
	BreakerHalfOpen BreakerState = "half_open"
)

// Ordering says whether an endpoint's deliveries may overtake each other.
type Ordering string

// The orderings.
const (
	// OrderingNone lets deliveries go in parallel, up to the in-flight cap.
	OrderingNone Ordering = ""
	// OrderingFIFO sends one delivery at a time in event order: a delivery
	// waiting on retries holds back the ones behind it; a dead or cancelled
	// one releases them.
	OrderingFIFO Ordering = "fifo"
)

// Defaults of the auto-disable rules (DESIGN.md, Delivery rules).
const (
	DefaultAutoDisableAfterFailures = 100            // consecutive failures
	DefaultAutoDisableAfter         = 24 * time.Hour // without a success...
	AutoDisableMinFailures          = 10             // ...across at least this many failed attempts
	// FailingNotifyAfter is the consecutive failure that emits
	// herald.endpoint.failing, once per streak.
	FailingNotifyAfter = 3
)

// EndpointHealth is what Herald knows of how an endpoint has been
// answering. It is kept in the database, so every node agrees.
type EndpointHealth struct {
	BreakerState BreakerState
	// ConsecutiveFailures counts failed attempts since the last success.
	ConsecutiveFailures int
	// FailingSince is the time of the first failure of the current streak.
	FailingSince *time.Time
	// FailingNotified: herald.endpoint.failing went out for this streak.
	FailingNotified bool
	LastSuccessAt   *time.Time
	LastFailureAt   *time.Time
	// ProbeAt is, while open or half-open, when the next probe may go.
	ProbeAt *time.Time
	// Cooldown is the current open period: 5 m, doubling to 1 h.
	Cooldown time.Duration
	// PausedUntil: the receiver asked (Retry-After on 429 or 503) for no
	// requests until then.
	PausedUntil *time.Time
	// RateFactor in (0, 1] scales the endpoint's rate limit and in-flight
	// cap down after 429s without Retry-After; it recovers on success.
	RateFactor float64
	// SuccessRate1h is the share of the last hour's attempts that
	// succeeded; nil when there were none (filled on request only).
	SuccessRate1h *float64
	// Attempts1h is how many attempts the last hour saw (with SuccessRate1h).
	Attempts1h int
	// InFlight, Due and Dead are the endpoint's queue, filled on request
	// only (with the figures above): deliveries leased now, deliveries due
	// now (pending and due, or leased under an expired lease), and
	// deliveries dead (its dead-letter depth).
	InFlight int
	Due      int
	Dead     int
}

// HealthScore is an endpoint's health score, from 0 (failing, or taking
// nothing) to 100 (every recent attempt succeeded), and the one place it
// is defined; the API and the dashboard show it as it is given here.
//
//   - A disabled endpoint scores 0, and so does one whose breaker is open:
//     neither takes deliveries now.
//   - Otherwise the score is the share of the last hour's attempts that
//     succeeded (h.SuccessRate1h), in percent, rounded: every attempt
//     weighs the same, so a busy endpoint's score rests on many answers.
//   - A half-open breaker (a probe under way) caps it at 50: the endpoint
//     has failed until a moment ago.
//   - Without an attempt in the last hour there is no score (ok false):
//     nothing recent to judge by.
func HealthScore(enabled bool, h EndpointHealth) (score int, ok bool) {
	if !enabled || h.BreakerState == BreakerOpen {
		return 0, true
	}
	if h.Attempts1h == 0 || h.SuccessRate1h == nil {
		return 0, false
	}
	score = int(math.Round(*h.SuccessRate1h * 100))
	score = max(0, min(100, score))
	if h.BreakerState == BreakerHalfOpen {
		score = min(score, 50)
	}
	return score, true
}

// NewEndpointHealth is the health of an endpoint that has not been tried.
func NewEndpointHealth() EndpointHealth {
	return EndpointHealth{BreakerState: BreakerClosed, RateFactor: 1}
}

// Normalized is h with the zero values of an endpoint never tried read as
// NewEndpointHealth reads them: no breaker state is closed, and a rate
// factor outside (0, 1] is 1.
func (h EndpointHealth) Normalized() EndpointHealth {
	if h.BreakerState == "" {
		h.BreakerState = BreakerClosed
	}
	if h.RateFactor <= 0 || h.RateFactor > 1 {
		h.RateFactor = 1
	}
	return h
}

// BlockedUntil is the time before which no delivery to the endpoint may
// start (a Retry-After pause, or an open breaker's probe time), or nil.
// Stores keep it in a column so claims skip blocked endpoints cheaply.
func (h *EndpointHealth) BlockedUntil() *time.Time {
	var until *time.Time
	if h.PausedUntil != nil {
		until = h.PausedUntil
	}
	if h.BreakerState != BreakerClosed && h.ProbeAt != nil {
		if until == nil || h.ProbeAt.After(*until) {
			until = h.ProbeAt
		}
	}
	return until
}
