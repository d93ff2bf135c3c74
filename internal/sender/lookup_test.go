package sender

import (
	"context"
	"errors"
	"net/http"
	"net/netip"
	"net/url"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestLookupIP checks the resolver seam: names go through Config.LookupIP,
// literal addresses do not, and what it answers is dialed through the SSRF
// check like the system resolver's answers.
func TestLookupIP(t *testing.T) {
	t.Parallel()
	// Each subtest has its own receiver, so a request one of them lets
	// through cannot be read by another.
	start := func(t *testing.T) (port string, got <-chan received) {
		t.Helper()
		srv, got := receiver(t, status(http.StatusOK))
		u, err := url.Parse(srv.URL)
		require.NoError(t, err)
		return u.Port(), got
	}
	loopback := func(context.Context, string) ([]netip.Addr, error) {
		return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
	}

	t.Run("NameReachesWhatLookupAnswersWhenAllowed", func(t *testing.T) {
		t.Parallel()
		port, got := start(t)
		var asked atomic.Value
		s := New(Config{AllowPrivateNetworks: true, LookupIP: func(ctx context.Context, host string) ([]netip.Addr, error) {
			asked.Store(host)
			return loopback(ctx, host)
		}})
		t.Cleanup(s.CloseIdleConnections)

		res := s.Send(context.Background(), request("http://hooks.example.test:"+port+"/hook"))

		require.Equal(t, Success, res.Class, res.Error)
		require.Equal(t, "hooks.example.test", asked.Load())
		one(t, got)
	})

	t.Run("NameResolvingToLoopbackRefused", func(t *testing.T) {
		t.Parallel()
		port, got := start(t)
		s := New(Config{LookupIP: loopback})
		t.Cleanup(s.CloseIdleConnections)

		res := s.Send(context.Background(), request("http://hooks.example.test:"+port+"/hook"))

		require.Equal(t, Retryable, res.Class)
		require.Equal(t, "destination 127.0.0.1 is a private or loopback address; "+flagHint, res.Error)
		none(t, got)
	})

	t.Run("LaterAddressTriedWhenOneIsRefused", func(t *testing.T) {
		t.Parallel()
		port, got := start(t)
		s := New(Config{LookupIP: func(context.Context, string) ([]netip.Addr, error) {
			return []netip.Addr{netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("127.0.0.1")}, nil
		}})
		t.Cleanup(s.CloseIdleConnections)

		res := s.Send(context.Background(), request("http://hooks.example.test:"+port+"/hook"))

		require.Equal(t, Retryable, res.Class)
		require.Contains(t, res.Error, "destination 10.0.0.1 is a private")
		none(t, got)
	})

	t.Run("LiteralAddressNotLookedUp", func(t *testing.T) {
		t.Parallel()
		s := New(Config{AllowPrivateNetworks: true, LookupIP: func(context.Context, string) ([]netip.Addr, error) {
			return nil, errors.New("lookup must not be asked")
		}})
		t.Cleanup(s.CloseIdleConnections)
		srv, got := receiver(t, status(http.StatusOK))

		res := s.Send(context.Background(), request(srv.URL))

		require.Equal(t, Success, res.Class, res.Error)
		one(t, got)
	})

	t.Run("LookupFailureIsRetryable", func(t *testing.T) {
		t.Parallel()
		port, got := start(t)
		for _, lookup := range []func(context.Context, string) ([]netip.Addr, error){
			func(context.Context, string) ([]netip.Addr, error) { return nil, errors.New("server misbehaving") },
			func(context.Context, string) ([]netip.Addr, error) { return nil, nil },
		} {
			s := New(Config{AllowPrivateNetworks: true, LookupIP: lookup})
			t.Cleanup(s.CloseIdleConnections)

			res := s.Send(context.Background(), request("http://hooks.example.test:"+port+"/hook"))

			require.Equal(t, Retryable, res.Class)
			require.Contains(t, res.Error, "lookup hooks.example.test")
		}
		none(t, got)
	})
}
