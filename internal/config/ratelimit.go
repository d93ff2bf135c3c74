package config

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Defaults of the request limits (--consumer-rate-limit,
// --operator-rate-limit).
const (
	DefaultConsumerRateLimit = "50/s"
	DefaultOperatorRateLimit = "off"
)

// RequestRate is a token bucket's rate for API requests: PerSecond tokens
// a second, at most Burst at once. The zero RequestRate is no limit.
type RequestRate struct {
	PerSecond float64
	Burst     int
}

// ParseRequestRate reads a request limit as the flags take it: "N/s",
// "N/m" or "N/h" (N requests a second, a minute or an hour), with a burst
// of twice the rate per second (at least 1) unless ",burst=B" follows;
// "off" or "0" is no limit. Examples: "50/s" (50 a second, burst 100),
// "600/m,burst=20", "off".
func ParseRequestRate(s string) (RequestRate, error) {
	s = strings.TrimSpace(s)
	if s == "off" || s == "0" {
		return RequestRate{}, nil
	}
	rate, burstPart, hasBurst := strings.Cut(s, ",")
	num, unit, ok := strings.Cut(rate, "/")
	if !ok {
		return RequestRate{}, fmt.Errorf("%q is not a rate such as 50/s, 600/m,burst=20 or off", s)
	}
	n, err := strconv.ParseFloat(strings.TrimSpace(num), 64)
	if err != nil || n <= 0 || math.IsInf(n, 0) || math.IsNaN(n) {
		return RequestRate{}, fmt.Errorf("%q: the rate must be a positive number, as in 50/s", s)
	}
	switch strings.TrimSpace(unit) {
	case "s":
	case "m":
		n /= 60
	case "h":
		n /= 3600
	default:
		return RequestRate{}, fmt.Errorf("%q: the unit must be s, m or h, as in 50/s", s)
	}
	out := RequestRate{PerSecond: n, Burst: max(1, int(math.Ceil(2*n)))}
	if hasBurst {
		name, value, ok := strings.Cut(strings.TrimSpace(burstPart), "=")
		b, err := strconv.Atoi(strings.TrimSpace(value))
		if !ok || strings.TrimSpace(name) != "burst" || err != nil || b < 1 || b > 1_000_000 {
			return RequestRate{}, fmt.Errorf("%q: after the rate comes ,burst=N with N between 1 and 1000000", s)
		}
		out.Burst = b
	}
	if out.PerSecond > 1_000_000 {
		return RequestRate{}, fmt.Errorf("%q: more than 1000000 a second is no limit; use off", s)
	}
	return out, nil
}
