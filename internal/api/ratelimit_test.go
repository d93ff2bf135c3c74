package api_test

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhooks/herald/internal/api"
	"github.com/heraldhooks/herald/internal/auth"
	"github.com/heraldhooks/herald/internal/ratelimit"
	"github.com/heraldhooks/herald/internal/store"
	"github.com/heraldhooks/herald/internal/syncbuf"
)

// TestRequestRateLimit: each consumer key and each portal session has a
// token bucket of its own (5 a second, a burst of 10 here): past it a
// call answers 429 rate_limited with Retry-After, and a token later one
// more goes; other keys and sessions, of the same consumer too, are not
// slowed. Operator keys are not limited unless configured, and then as
// the consumers' are.
func TestRequestRateLimit(t *testing.T) {
	t.Parallel()
	consumerRate := ratelimit.Rate{PerSecond: 5, Burst: 10}

	t.Run("ConsumerKeys", func(t *testing.T) {
		t.Parallel()
		e := setup(t, func(o *options) { o.config = func(c *api.Config) { c.ConsumerRateLimit = consumerRate } })
		own, same, other := e.createKey("consumer", "c1"), e.createKey("consumer", "c1"), e.createKey("consumer", "c2")
		for range 10 {
			e.doKey(own.Key, "GET", "/v1/endpoints", nil).must(http.StatusOK, nil)
		}
		r := e.doKey(own.Key, "GET", "/v1/endpoints", nil)
		msg := r.apiErr(http.StatusTooManyRequests, "rate_limited")
		require.Contains(t, msg, "at most 5 a second with a burst of 10")
		require.Equal(t, "1", r.header.Get("Retry-After"))
		// Refused calls do nothing: a POST past the limit makes nothing.
		e.doKey(own.Key, "POST", "/v1/endpoints", map[string]any{"url": "https://a.example.com/hooks"}).
			apiErr(http.StatusTooManyRequests, "rate_limited")
		var page struct {
			Data []any `json:"data"`
		}
		e.do("GET", "/v1/endpoints?consumer_id=c1", nil).must(http.StatusOK, &page)
		require.Empty(t, page.Data)

		// Another key of the same consumer, another consumer's key and
		// the operator key go on.
		e.doKey(same.Key, "GET", "/v1/endpoints", nil).must(http.StatusOK, nil)
		e.doKey(other.Key, "GET", "/v1/endpoints", nil).must(http.StatusOK, nil)
		for range 30 {
			e.do("GET", "/v1/stats", nil).must(http.StatusOK, nil)
		}

		// A token comes back every 200 ms.
		e.clock.Advance(200 * time.Millisecond)
		e.doKey(own.Key, "GET", "/v1/endpoints", nil).must(http.StatusOK, nil)
		e.doKey(own.Key, "GET", "/v1/endpoints", nil).apiErr(http.StatusTooManyRequests, "rate_limited")
		e.clock.Advance(2 * time.Second)
		for range 10 {
			e.doKey(own.Key, "GET", "/v1/endpoints", nil).must(http.StatusOK, nil)
		}
		// Unauthenticated probes are not counted.
		for range 20 {
			e.doKey("", "GET", "/healthz", nil).must(http.StatusOK, nil)
		}
	})

	t.Run("OperatorKeysWhenConfigured", func(t *testing.T) {
		t.Parallel()
		e := setup(t, func(o *options) {
			o.config = func(c *api.Config) { c.OperatorRateLimit = ratelimit.Rate{PerSecond: 1, Burst: 3} }
		})
		for range 3 {
			e.do("GET", "/v1/stats", nil).must(http.StatusOK, nil)
		}
		r := e.do("GET", "/v1/stats", nil)
		r.apiErr(http.StatusTooManyRequests, "rate_limited")
		require.Equal(t, "1", r.header.Get("Retry-After"))
	})

	t.Run("EachPortalSession", func(t *testing.T) {
		t.Parallel()
		e := setup(t, func(o *options) { o.config = func(c *api.Config) { c.ConsumerRateLimit = consumerRate } })
		srv := api.New(e.cfg)
		ctx := context.Background()
		first, second := auth.Consumer("c1", ""), auth.Consumer("c1", "")
		first.Session, second.Session = "ps_first", "ps_second"
		for range 10 {
			require.NoError(t, srv.Call(ctx, first, http.MethodGet, "/v1/endpoints", nil, nil))
		}
		err := srv.Call(ctx, first, http.MethodGet, "/v1/endpoints", nil, nil)
		var ce *api.CallError
		require.True(t, errors.As(err, &ce), "err: %v", err)
		require.Equal(t, http.StatusTooManyRequests, ce.Status)
		require.Equal(t, "rate_limited", ce.Code)
		require.NoError(t, srv.Call(ctx, second, http.MethodGet, "/v1/endpoints", nil, nil), "another session has its own")
	})
}

// bucketCounter counts the takes from the shared request buckets, and
// fails them when fail is set.
type bucketCounter struct {
	store.Store
	takes atomic.Int64
	fail  bool
}

func (s *bucketCounter) RequestBucketTake(ctx context.Context, p *store.RequestBucketTakeParams) (store.RequestBucketTaken, error) {
	s.takes.Add(1)
	if s.fail {
		return store.RequestBucketTaken{}, errors.New("database unreachable")
	}
	return s.Store.RequestBucketTake(ctx, p)
}

// untilBothRefuse calls GET /v1/endpoints with key through a and b in
// turn until both refuse in the same round, and says how many answered
// 200; each refusal is 429 rate_limited with Retry-After.
func untilBothRefuse(t *testing.T, key string, a, b *env) int {
	t.Helper()
	ok := 0
	for round := 0; round < 200; round++ {
		refused := 0
		for _, node := range []*env{a, b} {
			r := node.doKey(key, "GET", "/v1/endpoints", nil)
			if r.status == http.StatusOK {
				ok++
				continue
			}
			r.apiErr(http.StatusTooManyRequests, "rate_limited")
			require.Equal(t, "1", r.header.Get("Retry-After"))
			refused++
		}
		if refused == 2 {
			return ok
		}
	}
	t.Fatalf("still answering after 400 calls (%d answered)", ok)
	return ok
}

// TestRequestRateLimitAcrossNodes: a consumer key's requests through two
// nodes over one database spend one budget (10 a second with a burst of
// 40 here, where each node alone would allow 40 at once): together they
// answer 40, then 429 with Retry-After on both, then 10 a second later;
// another key has its own. The operator key, with no limit, never makes
// the nodes touch the shared buckets. On both backends.
func TestRequestRateLimitAcrossNodes(t *testing.T) {
	t.Parallel()
	for _, backend := range []struct {
		name string
		opts []func(*options)
	}{{"SQLite", nil}, {"PostgreSQL", []func(*options){onPostgres}}} {
		t.Run(backend.name, func(t *testing.T) {
			t.Parallel()
			var counter *bucketCounter
			e := setup(t, append(backend.opts, func(o *options) {
				o.wrap = func(st store.Store) store.Store { counter = &bucketCounter{Store: st}; return counter }
				o.config = func(c *api.Config) { c.ConsumerRateLimit = ratelimit.Rate{PerSecond: 10, Burst: 40} }
			})...)
			other := e.node()

			for range 50 {
				e.do("GET", "/v1/stats", nil).must(http.StatusOK, nil)
				other.do("GET", "/v1/stats", nil).must(http.StatusOK, nil)
			}
			require.Zero(t, counter.takes.Load(), "a key with no limit takes nothing from the database")

			own, theirs := e.createKey("consumer", "c1"), e.createKey("consumer", "c2")
			require.Equal(t, 40, untilBothRefuse(t, own.Key, e, other), "the burst, across both nodes")
			takes := counter.takes.Load()
			require.Less(t, takes, int64(20), "tokens are taken in lots, not one by one")
			for range 10 {
				e.doKey(own.Key, "GET", "/v1/endpoints", nil).apiErr(http.StatusTooManyRequests, "rate_limited")
				other.doKey(own.Key, "GET", "/v1/endpoints", nil).apiErr(http.StatusTooManyRequests, "rate_limited")
			}
			require.LessOrEqual(t, counter.takes.Load(), takes+2, "a refused key does not ask again before a lot is back")
			other.doKey(theirs.Key, "GET", "/v1/endpoints", nil).must(http.StatusOK, nil)

			e.clock.Advance(time.Second)
			require.Equal(t, 10, untilBothRefuse(t, own.Key, e, other), "a second's worth, across both nodes")
		})
	}
}

// TestRequestRateLimitFailsOpen: when the shared buckets cannot be read,
// a node holds each key to the limit on its own: calls go on up to the
// node's burst and are refused past it, the failures are counted, and
// the log says so once, not once a call.
func TestRequestRateLimitFailsOpen(t *testing.T) {
	t.Parallel()
	var logs syncbuf.Buffer
	var failed atomic.Int64
	var counter *bucketCounter
	e := setup(t, func(o *options) {
		o.logger = slog.New(slog.NewTextHandler(&logs, nil))
		o.wrap = func(st store.Store) store.Store { counter = &bucketCounter{Store: st, fail: true}; return counter }
		o.config = func(c *api.Config) {
			c.ConsumerRateLimit = ratelimit.Rate{PerSecond: 5, Burst: 10}
			c.RequestLimitFailedOpen = func() { failed.Add(1) }
		}
	})
	own := e.createKey("consumer", "c1")
	for range 10 {
		e.doKey(own.Key, "GET", "/v1/endpoints", nil).must(http.StatusOK, nil)
	}
	r := e.doKey(own.Key, "GET", "/v1/endpoints", nil)
	r.apiErr(http.StatusTooManyRequests, "rate_limited")
	require.Equal(t, "1", r.header.Get("Retry-After"))
	require.Equal(t, counter.takes.Load(), failed.Load())
	require.Positive(t, failed.Load())
	require.Equal(t, 1, strings.Count(logs.String(), "shared buckets cannot be reached"), "logs: %s", logs.String())
	require.Contains(t, logs.String(), "database unreachable")
}
