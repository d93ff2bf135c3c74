// Package ratelimit decides how many deliveries of one endpoint a claim may
// start now: the Retry-After pause, the in-flight cap, the token bucket
// (scaled down after 429s) and FIFO ordering. It is pure: the stores keep
// the bucket in the database, under the claim's lock on the endpoint, so the
// limits hold across every node sharing that database. Spend is the same
// token bucket for the API's request limits (a bucket per key and per
// portal session on each node), and TakeUpTo the rule of the bucket those
// keys and sessions share across nodes in the database (in lots, LotSize).
package ratelimit

import (
	"math"
	"time"

	"github.com/heraldhooks/herald"
)

// Bucket is a token bucket's state: Tokens as of At. The zero Bucket is full.
type Bucket struct {
	Tokens float64
	At     time.Time
}

// MaxInFlight is the endpoint's in-flight cap now: its max_in_flight (default
// 10) scaled by the health's rate factor, at least 1; 1 for FIFO endpoints.
func MaxInFlight(ep *herald.Endpoint, h *herald.EndpointHealth) int {
	if ep.Ordering == herald.OrderingFIFO {
		return 1
	}
	n := ep.MaxInFlight
	if n <= 0 {
		n = herald.DefaultMaxInFlight
	}
	return max(1, int(math.Floor(float64(n)*factor(h))))
}

func factor(h *herald.EndpointHealth) float64 {
	if h.RateFactor <= 0 || h.RateFactor > 1 {
		return 1
	}
	return h.RateFactor
}

// Refill returns the bucket as of now for the endpoint's rate limit.
func Refill(ep *herald.Endpoint, h *herald.EndpointHealth, b Bucket, now time.Time) Bucket {
	if ep.RateLimit == nil || ep.RateLimit.PerSecond <= 0 {
		return Bucket{At: now}
	}
	burst := float64(max(ep.RateLimit.Burst, 1))
	if b.At.IsZero() {
		return Bucket{Tokens: burst, At: now}
	}
	if now.Before(b.At) {
		return b // clocks of nodes differ; never refill backwards
	}
	rate := ep.RateLimit.PerSecond * factor(h)
	tokens := math.Min(burst, b.Tokens+rate*now.Sub(b.At).Seconds())
	return Bucket{Tokens: tokens, At: now}
}

// Allowance is how many deliveries of the endpoint may start at now, given
// how many are in flight (leased, lease not expired) across all nodes.
func Allowance(ep *herald.Endpoint, h *herald.EndpointHealth, b Bucket, inFlight int, now time.Time) int {
	if h.PausedUntil != nil && now.Before(*h.PausedUntil) {
		return 0
	}
	n := MaxInFlight(ep, h) - inFlight
	if n <= 0 {
		return 0
	}
	if ep.RateLimit != nil && ep.RateLimit.PerSecond > 0 {
		n = min(n, int(math.Floor(Refill(ep, h, b, now).Tokens+1e-9)))
	}
	return max(n, 0)
}

// Take spends n tokens of the bucket at now (after refilling it).
func Take(ep *herald.Endpoint, h *herald.EndpointHealth, b Bucket, n int, now time.Time) Bucket {
	b = Refill(ep, h, b, now)
	if ep.RateLimit != nil && ep.RateLimit.PerSecond > 0 {
		b.Tokens = math.Max(0, b.Tokens-float64(n))
	}
	return b
}

// Rate is a token bucket's refill: PerSecond tokens a second, holding at
// most Burst. A PerSecond of 0 or less is no limit.
type Rate struct {
	PerSecond float64
	Burst     int
}

// Spend takes one token from b at now under r, after refilling it: the
// bucket as it is then, and ok. With less than a token, nothing is taken
// and wait says how long until there is one. The zero Bucket is full.
// The API holds each consumer key and portal session to it.
func Spend(r Rate, b Bucket, now time.Time) (next Bucket, wait time.Duration, ok bool) {
	if r.PerSecond <= 0 {
		return Bucket{At: now}, 0, true
	}
	b = r.refill(b, now)
	if b.Tokens >= 1-1e-9 {
		b.Tokens = math.Max(0, b.Tokens-1)
		return b, 0, true
	}
	return b, time.Duration((1 - b.Tokens) / r.PerSecond * float64(time.Second)), false
}

// Full reports whether b has refilled to r's burst by now: such a bucket
// is the zero Bucket again, and need not be kept.
func Full(r Rate, b Bucket, now time.Time) bool {
	if r.PerSecond <= 0 || b.At.IsZero() {
		return true
	}
	return b.Tokens+r.PerSecond*now.Sub(b.At).Seconds() >= float64(max(r.Burst, 1))
}

// refill is b as of now under r: the zero Bucket is full, and a clock
// behind b.At never refills backwards.
func (r Rate) refill(b Bucket, now time.Time) Bucket {
	burst := float64(max(r.Burst, 1))
	switch {
	case b.At.IsZero():
		return Bucket{Tokens: burst, At: now}
	case now.After(b.At):
		return Bucket{Tokens: math.Min(burst, b.Tokens+r.PerSecond*now.Sub(b.At).Seconds()), At: now}
	}
	return b
}

// LotSize is the most tokens a node takes at once from a bucket shared by
// all nodes (TakeUpTo): a tenth of the burst, at least one. Taking lots
// makes one write of the shared bucket serve several requests; tokens of
// a lot a node does not spend in time lapse (they are not given back), so
// at any moment the nodes hold at most a lot each beyond what the shared
// bucket allows, and usually less.
func LotSize(r Rate) int {
	return max(1, int(math.Ceil(float64(max(r.Burst, 1))/10)))
}

// TakeUpTo takes up to want whole tokens from b at now under r, after
// refilling it: the bucket as it is then, and how many it took (as many
// as it holds, if fewer than want). When it took none, wait says how long
// until it holds want (no more than the burst), so that the asker need
// not ask again before: a node refused by the shared bucket stays away
// that long, and a flood of one key costs the database one take per lot.
// With no rate (PerSecond of 0 or less) it grants want.
func TakeUpTo(r Rate, b Bucket, want int, now time.Time) (next Bucket, got int, wait time.Duration) {
	if r.PerSecond <= 0 {
		return Bucket{At: now}, want, 0
	}
	if want < 1 {
		want = 1
	}
	b = r.refill(b, now)
	got = min(want, int(math.Floor(b.Tokens+1e-9)))
	if got >= 1 {
		b.Tokens = math.Max(0, b.Tokens-float64(got))
		return b, got, 0
	}
	need := math.Min(float64(want), float64(max(r.Burst, 1))) - b.Tokens
	return b, 0, time.Duration(math.Ceil(need / r.PerSecond * float64(time.Second)))
}

// FullAt is when b will have refilled to r's burst: past it, b is the
// same as the zero Bucket, so a store may forget it. With no rate, b.At.
func FullAt(r Rate, b Bucket) time.Time {
	if r.PerSecond <= 0 || b.At.IsZero() {
		return b.At
	}
	missing := math.Max(0, float64(max(r.Burst, 1))-b.Tokens)
	return b.At.Add(time.Duration(math.Ceil(missing / r.PerSecond * float64(time.Second))))
}
