// Package retry answers one question for the dispatcher: after attempt n of
// a delivery failed, when does the next attempt go, or is the attempt budget
// spent? It is pure: values in, values out, no clock and no randomness of its
// own. The caller passes the random number that draws the jitter, so tests
// (and the dispatcher's tests) choose it.
//
// An endpoint retries on a schedule (the delay before each attempt, its
// length the budget; DESIGN.md's default is 7 attempts over about 35 hours,
// each delay with ±20 % jitter), or on an exponential policy with full
// jitter. Only real HTTP attempts count here (invariant 4): waits for a
// breaker, a rate limit or Retry-After are the dispatcher's business.
package retry

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/heraldhooks/herald"
)

// Limits on what an endpoint may ask for.
const (
	// MaxScheduleEntries bounds the attempts of a schedule.
	MaxScheduleEntries = 20
	// MaxDelay bounds each delay of a schedule and the cap of an
	// exponential policy: a day, like Retry-After.
	MaxDelay = 24 * time.Hour
	// MaxExponentialAttempts bounds the attempts of an exponential policy.
	MaxExponentialAttempts = 50
)

// ErrInvalidPolicy is wrapped by every error ParseSchedule,
// ValidateSchedule and ValidateExponential return, so the API can answer
// them as bad input.
var ErrInvalidPolicy = errors.New("invalid retry policy")

// Policy decides the delay before the next attempt of a delivery.
type Policy interface {
	// Attempts is the attempt budget: how many attempts a delivery gets in all.
	Attempts() int
	// Next returns the delay before attempt failedAttempt+1, after attempt
	// failedAttempt (1-based) failed, drawn with the random number r in
	// [0, 1). ok is false when the budget is spent and the delivery is dead.
	// A failedAttempt below 1 counts as 1, so a caller's bug retries rather
	// than kills the delivery.
	Next(failedAttempt int, r float64) (delay time.Duration, ok bool)
}

// PolicyFor returns the policy of ep: its exponential policy when set, else
// its schedule when not empty, else herald.DefaultRetrySchedule. A nil ep
// gets the default schedule. The policy reads ep's settings without copying
// them; it must not outlive a change to them.
func PolicyFor(ep *herald.Endpoint) Policy {
	switch {
	case ep == nil:
		return Schedule(herald.DefaultRetrySchedule)
	case ep.RetryExponential != nil:
		return Exponential{*ep.RetryExponential}
	case len(ep.RetrySchedule) > 0:
		return Schedule(ep.RetrySchedule)
	default:
		return Schedule(herald.DefaultRetrySchedule)
	}
}

// Jitter is the spread of a scheduled delay: each is drawn in
// [d*(1-Jitter), d*(1+Jitter)).
const Jitter = 0.2

// Schedule is the delay before each attempt, the first usually 0; its
// length is the attempt budget.
type Schedule []time.Duration

var _ Policy = Schedule(nil)

// Attempts returns len(s).
func (s Schedule) Attempts() int { return len(s) }

// Next returns s[failedAttempt] with ±20 % jitter, d*(0.8 + 0.4*r), or false
// once failedAttempt >= len(s).
func (s Schedule) Next(failedAttempt int, r float64) (time.Duration, bool) {
	failedAttempt = max(failedAttempt, 1)
	if failedAttempt >= len(s) {
		return 0, false
	}
	d := max(s[failedAttempt], 0)
	spread := time.Duration(float64(d) * Jitter)
	return d - spread + scale(2*spread, r), true
}

// Total is the sum of the delays without jitter: about how long after the
// first attempt the last one goes.
func (s Schedule) Total() time.Duration {
	var total time.Duration
	for _, d := range s {
		total += d
	}
	return total
}

// ValidateSchedule checks s holds 1 to MaxScheduleEntries delays, each
// between 0 and MaxDelay. It lists every problem at once.
func ValidateSchedule(s []time.Duration) error {
	problems := checkLen(len(s))
	for i, d := range s {
		problems = append(problems, checkDelay(i, d)...)
	}
	return invalid("retry schedule", problems)
}

// ParseSchedule reads a schedule written as Go durations ("0s", "30s",
// "5m"), as the API takes it, and validates it like ValidateSchedule. It
// lists every problem at once.
func ParseSchedule(delays []string) ([]time.Duration, error) {
	s := make([]time.Duration, 0, len(delays))
	problems := checkLen(len(delays))
	for i, text := range delays {
		d, err := time.ParseDuration(strings.TrimSpace(text))
		if err != nil {
			problems = append(problems, fmt.Sprintf("delay %d: %q is not a duration like \"30s\" or \"5m\"", i+1, text))
			continue
		}
		problems = append(problems, checkDelay(i, d)...)
		s = append(s, d)
	}
	if err := invalid("retry schedule", problems); err != nil {
		return nil, err
	}
	return s, nil
}

func checkLen(n int) []string {
	if n < 1 || n > MaxScheduleEntries {
		return []string{fmt.Sprintf("%d delays, want 1 to %d", n, MaxScheduleEntries)}
	}
	return nil
}

func checkDelay(i int, d time.Duration) []string {
	if d < 0 || d > MaxDelay {
		return []string{fmt.Sprintf("delay %d: %s is not between 0s and %s", i+1, herald.FormatDuration(d), herald.FormatDuration(MaxDelay))}
	}
	return nil
}

// FormatSchedule writes a schedule as the API shows it: "0s", "30s", "5m",
// "2h", "1h30m".
func FormatSchedule(s []time.Duration) []string {
	out := make([]string, len(s))
	for i, d := range s {
		out[i] = herald.FormatDuration(d)
	}
	return out
}

// Exponential is an exponential policy with full jitter: after attempt n
// fails, the next waits r * min(Cap, Base * Factor^(n-1)). Full jitter
// spreads the retries of many deliveries that failed together (an endpoint
// coming back from an outage) instead of sending them in waves.
type Exponential struct {
	herald.ExponentialPolicy
}

var _ Policy = Exponential{}

// Attempts returns the policy's Attempts field.
func (e Exponential) Attempts() int { return e.ExponentialPolicy.Attempts }

// Next returns r * min(Cap, Base*Factor^(failedAttempt-1)), or false once
// failedAttempt >= Attempts.
func (e Exponential) Next(failedAttempt int, r float64) (time.Duration, bool) {
	failedAttempt = max(failedAttempt, 1)
	if failedAttempt >= e.Attempts() {
		return 0, false
	}
	// In float64, where growth past the cap (even to +Inf) cannot overflow.
	ceiling := float64(e.Base) * math.Pow(e.Factor, float64(failedAttempt-1))
	if !(ceiling <= float64(e.Cap)) { // also catches NaN
		ceiling = float64(e.Cap)
	}
	return scale(time.Duration(max(ceiling, 0)), r), true
}

// ValidateExponential checks base > 0, factor >= 1 (and finite),
// base <= cap <= MaxDelay, and 1 to MaxExponentialAttempts attempts. It
// lists every problem at once.
func ValidateExponential(p herald.ExponentialPolicy) error {
	var problems []string
	if p.Base <= 0 {
		problems = append(problems, fmt.Sprintf("base %s is not above 0s", herald.FormatDuration(p.Base)))
	}
	if !(p.Factor >= 1) || math.IsInf(p.Factor, 0) {
		problems = append(problems, fmt.Sprintf("factor %v is not a number of at least 1", p.Factor))
	}
	if p.Cap < p.Base || p.Cap > MaxDelay {
		problems = append(problems, fmt.Sprintf("cap %s is not between base (%s) and %s", herald.FormatDuration(p.Cap), herald.FormatDuration(p.Base), herald.FormatDuration(MaxDelay)))
	}
	if p.Attempts < 1 || p.Attempts > MaxExponentialAttempts {
		problems = append(problems, fmt.Sprintf("attempts %d is not between 1 and %d", p.Attempts, MaxExponentialAttempts))
	}
	return invalid("exponential retry policy", problems)
}

// invalid wraps problems in ErrInvalidPolicy, on one line, or returns nil
// when there are none.
func invalid(what string, problems []string) error {
	if len(problems) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %s: %s", ErrInvalidPolicy, what, strings.Join(problems, "; "))
}

// scale returns span*r, with r clamped into [0, 1] (NaN counting as 0) so a
// caller's bad random number cannot stretch a delay past its bounds. For r
// below 1 the result stays below span even where float64 rounding would
// reach it, so the interval is half-open as documented.
func scale(span time.Duration, r float64) time.Duration {
	switch {
	case !(r > 0):
		return 0
	case r >= 1:
		return span
	}
	d := time.Duration(float64(span) * r)
	if d >= span && span > 0 {
		d = span - 1
	}
	return d
}
