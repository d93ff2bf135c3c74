package api

import (
	"fmt"
	"math"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/heraldhooks/herald/internal/auth"
	"github.com/heraldhooks/herald/internal/ratelimit"
)

// requestLimiterPrune is how many buckets the limiter keeps before it
// forgets those that have refilled (a full bucket is the same as none).
const requestLimiterPrune = 10_000

// requestLimiter holds every /v1 call of a consumer key, of a portal
// session, and (when configured) of an operator key to a token bucket of
// its own (ratelimit.Spend). The buckets live in this node's memory: with
// several nodes behind a balancer, a key may make up to the limit on each.
// A request costs no more than the database work it does, so counting
// each in the database would cost what the limit saves; what is costly
// for others (test sends, confirmation mails, endpoints) has a limit per
// consumer in the database as well (store.QuotaStore).
type requestLimiter struct {
	consumer, operator ratelimit.Rate

	mu      sync.Mutex
	buckets map[string]ratelimit.Bucket
}

// bucketOf names p's bucket and its rate: a portal session's own, a
// stored key's own, the configured operator key's; a consumer principal
// with neither (a page acting on a mailed link's token) shares its
// consumer's.
func (l *requestLimiter) bucketOf(p auth.Principal) (string, ratelimit.Rate) {
	rate := l.consumer
	if p.IsOperator() {
		rate = l.operator
	}
	switch {
	case p.Session != "":
		return "session " + p.Session, rate
	case p.KeyID != "":
		return "key " + p.KeyID, rate
	case p.IsOperator():
		return "operator key", rate
	}
	return "consumer " + p.ConsumerID, rate
}

// take spends a token of p's bucket at now, or says how long until one is
// there.
func (l *requestLimiter) take(p auth.Principal, now time.Time) (ratelimit.Rate, time.Duration, bool) {
	name, rate := l.bucketOf(p)
	if rate.PerSecond <= 0 {
		return rate, 0, true
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.buckets == nil {
		l.buckets = map[string]ratelimit.Bucket{}
	}
	if len(l.buckets) >= requestLimiterPrune {
		for k, b := range l.buckets {
			if ratelimit.Full(l.consumer, b, now) && ratelimit.Full(l.operator, b, now) {
				delete(l.buckets, k)
			}
		}
	}
	b, wait, ok := ratelimit.Spend(rate, l.buckets[name], now)
	l.buckets[name] = b
	return rate, wait, ok
}

// limitRequest answers 429 rate_limited, with Retry-After in whole
// seconds rounded up, when p is past its request rate.
func (s *Server) limitRequest(w http.ResponseWriter, p auth.Principal) error {
	rate, wait, ok := s.limits.take(p, s.clock.Now())
	if ok {
		return nil
	}
	secs := max(int64(math.Ceil(wait.Seconds())), 1)
	w.Header().Set("Retry-After", strconv.FormatInt(secs, 10))
	return &apiError{http.StatusTooManyRequests, "rate_limited", fmt.Sprintf(
		"too many requests: at most %s a second with a burst of %d per key or portal session; try again in %ds",
		strconv.FormatFloat(rate.PerSecond, 'f', -1, 64), max(rate.Burst, 1), secs)}
}
