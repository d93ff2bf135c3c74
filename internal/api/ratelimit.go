package api

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/heraldhooks/herald/internal/auth"
	"github.com/heraldhooks/herald/internal/logkey"
	"github.com/heraldhooks/herald/internal/ratelimit"
	"github.com/heraldhooks/herald/internal/store"
)

const (
	// requestLimiterPrune is how many buckets the limiter keeps before it
	// forgets those that have refilled (a full bucket is the same as none).
	requestLimiterPrune = 10_000
	// lotLifetime is how long a node may spend the tokens of a lot it
	// took from the shared bucket; what is left then lapses.
	lotLifetime = time.Second
	// sharedTakeTimeout bounds one take from the shared bucket; past it,
	// the request goes on as if the database had failed.
	sharedTakeTimeout = time.Second
	// failOpenLogEvery is how often at most the limiter logs that the
	// shared buckets cannot be reached (the metric counts every time).
	failOpenLogEvery = time.Minute
)

// requestLimiter holds every /v1 call of a consumer key, of a portal
// session, and (when configured) of an operator key to a token bucket of
// its own, across all nodes sharing the database (DESIGN.md, "The edge").
//
// Two gates, in this order:
//
//  1. The node's own bucket (ratelimit.Spend), in memory: a request it
//     refuses never reaches the database, so a flood of one key is turned
//     away at the node's memory speed. A key with no limit (operator keys
//     by default) stops here and costs nothing.
//  2. The key's shared bucket, a row in the database
//     (store.RequestBucketStore, the rule ratelimit.TakeUpTo). A node does
//     not write the row per request: it takes tokens in lots and spends
//     them in memory, so the database sees one write per lot. A lot's
//     size adapts to what this node spends of the key within a lot's
//     lifetime (lotLifetime): it starts at one, doubles when a lot is spent
//     in time, up to ratelimit.LotSize (a tenth of the burst), and falls to
//     what was spent when a lot lapses. Tokens of a lot left when it
//     lapses are not given back (no second write): that errs on the side
//     of refusing, and the adaptation keeps the loss small. When the
//     shared bucket has nothing, the node refuses the key without asking
//     again until a whole lot is back (the take says when), so a flood
//     costs the database at most one take per lot per node.
//
// Together the nodes grant a key no more than the rate over time plus
// the burst, plus the unspent part of at most one lot per node.
//
// When the shared bucket cannot be reached (the database down, slow past
// sharedTakeTimeout), the limiter fails open to the node's own bucket: the
// request goes on as if a lot had been granted, the failure is counted
// (failedOpen) and logged at most once a minute. A database outage then
// allows a key the limit on each node, as before shared buckets, rather
// than refusing every consumer's every call; the calls that need the
// database fail on their own.
type requestLimiter struct {
	consumer, operator ratelimit.Rate
	// shared keeps the buckets all nodes share; nil: this node's only.
	shared     store.RequestBucketStore
	log        *slog.Logger
	failedOpen func()

	mu         sync.Mutex
	buckets    map[string]*keyBucket
	lastLogged time.Time
	unlogged   int
}

// keyBucket is what a node keeps of one key's or session's limit.
type keyBucket struct {
	mu sync.Mutex
	// local is the node's own bucket.
	local ratelimit.Bucket
	// lot is how many tokens of the last lot taken (lotTaken) are left to
	// spend before lotUntil; size is how many the next take asks for.
	lot, lotTaken, size int
	lotUntil            time.Time
	// refusedUntil is when the shared bucket will hold the lot it last
	// refused; until then the key is refused without asking.
	refusedUntil time.Time
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

// bucket returns name's keyBucket, forgetting idle ones when there are
// many.
func (l *requestLimiter) bucket(name string, now time.Time) *keyBucket {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.buckets == nil {
		l.buckets = map[string]*keyBucket{}
	}
	if len(l.buckets) >= requestLimiterPrune {
		for n, k := range l.buckets {
			if !k.mu.TryLock() {
				continue // in use
			}
			if ratelimit.Full(l.consumer, k.local, now) && ratelimit.Full(l.operator, k.local, now) &&
				!now.Before(k.lotUntil) && !now.Before(k.refusedUntil) {
				delete(l.buckets, n)
			}
			k.mu.Unlock()
		}
	}
	k := l.buckets[name]
	if k == nil {
		k = &keyBucket{}
		l.buckets[name] = k
	}
	return k
}

// take spends a token of p's buckets at now (the node's clock; storeNow
// is the time handed to the store), or says how long until one is there.
func (l *requestLimiter) take(ctx context.Context, p auth.Principal, now, storeNow time.Time) (ratelimit.Rate, time.Duration, bool) {
	name, rate := l.bucketOf(p)
	if rate.PerSecond <= 0 {
		return rate, 0, true
	}
	k := l.bucket(name, now)
	k.mu.Lock()
	defer k.mu.Unlock()
	local, wait, ok := ratelimit.Spend(rate, k.local, now)
	if !ok {
		k.local = local
		return rate, wait, false
	}
	if wait, ok := l.takeShared(ctx, k, name, rate, now, storeNow); !ok {
		return rate, wait, false // a refusal spends nothing here either
	}
	k.local = local
	return rate, 0, true
}

// takeShared spends a token of the lot k holds of the shared bucket,
// taking a new lot when it is spent or has lapsed. Called with k.mu held:
// the requests of one key on this node wait for one take, not one each.
func (l *requestLimiter) takeShared(ctx context.Context, k *keyBucket, name string, rate ratelimit.Rate, now, storeNow time.Time) (time.Duration, bool) {
	if l.shared == nil {
		return 0, true
	}
	if k.lot > 0 && now.Before(k.lotUntil) {
		k.lot--
		return 0, true
	}
	if now.Before(k.refusedUntil) {
		return k.refusedUntil.Sub(now), false
	}
	switch {
	case k.size == 0:
		k.size = 1
	case k.lot > 0: // lapsed: ask for what was spent of it
		k.size = max(1, k.lotTaken-k.lot)
	default: // spent in time, or refused: ask for twice as many
		k.size *= 2
	}
	k.size = min(k.size, ratelimit.LotSize(rate))
	tctx, cancel := context.WithTimeout(ctx, sharedTakeTimeout)
	defer cancel()
	taken, err := l.shared.RequestBucketTake(tctx, &store.RequestBucketTakeParams{
		Name: name, Rate: rate, Want: k.size, Now: storeNow,
	})
	switch {
	case err != nil && ctx.Err() != nil:
		return 0, false // the caller is gone: nothing to answer, nothing granted
	case err != nil:
		l.failOpen(err, now)
		taken = store.RequestBucketTaken{Got: k.size}
	}
	if taken.Got == 0 {
		k.lot, k.lotTaken = 0, 0
		k.refusedUntil = now.Add(taken.Wait)
		return taken.Wait, false
	}
	k.lot, k.lotTaken, k.lotUntil = taken.Got-1, taken.Got, now.Add(lotLifetime)
	return 0, true
}

// failOpen counts a take from the shared bucket that failed, and logs it
// unless it logged one in the last failOpenLogEvery.
func (l *requestLimiter) failOpen(err error, now time.Time) {
	if l.failedOpen != nil {
		l.failedOpen()
	}
	l.mu.Lock()
	due := l.lastLogged.IsZero() || now.Sub(l.lastLogged) >= failOpenLogEvery
	skipped := l.unlogged
	if due {
		l.lastLogged, l.unlogged = now, 0
	} else {
		l.unlogged++
	}
	l.mu.Unlock()
	if due {
		l.log.Warn("request limits: the shared buckets cannot be reached; each node holds keys to the limit on its own until they can",
			logkey.Error, err, logkey.Count, skipped+1)
	}
}

// limitRequest answers 429 rate_limited, with Retry-After in whole
// seconds rounded up, when p is past its request rate.
func (s *Server) limitRequest(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	rate, wait, ok := s.limits.take(r.Context(), p, s.clock.Now(), s.storeNow())
	if ok {
		return nil
	}
	secs := max(int64(math.Ceil(wait.Seconds())), 1)
	w.Header().Set("Retry-After", strconv.FormatInt(secs, 10))
	return &apiError{http.StatusTooManyRequests, "rate_limited", fmt.Sprintf(
		"too many requests: at most %s a second with a burst of %d per key or portal session; try again in %ds",
		strconv.FormatFloat(rate.PerSecond, 'f', -1, 64), max(rate.Burst, 1), secs)}
}
