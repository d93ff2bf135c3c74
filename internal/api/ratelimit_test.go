package api_test

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhooks/herald/internal/api"
	"github.com/heraldhooks/herald/internal/auth"
	"github.com/heraldhooks/herald/internal/ratelimit"
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
