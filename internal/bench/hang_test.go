package bench

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhooks/herald/verify"
)

// TestHangingReceiver: a request to a hanging endpoint is held until its
// sender gives up, is counted apart from the load (never in the tally),
// and the receiver knows how many it held at once.
func TestHangingReceiver(t *testing.T) {
	t.Parallel()
	tally := NewTally(4)
	r, err := startReceiver(tally, nil, 0)
	require.NoError(t, err)
	t.Cleanup(func() { r.close() })

	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 2)
	for range 2 {
		go func() {
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.hangURL(7), strings.NewReader("{}"))
			if err != nil {
				done <- err
				return
			}
			req.Header.Set(verify.HeaderStandardID, "msg_1")
			res, err := http.DefaultClient.Do(req)
			if err == nil {
				res.Body.Close()
			}
			done <- err
		}()
	}
	require.Eventually(t, func() bool { return r.hung.open.Load() == 2 }, 10*time.Second, 5*time.Millisecond, "both held")
	select {
	case err := <-done:
		t.Fatalf("a hanging endpoint answered: %v", err)
	default:
	}
	cancel()
	for range 2 {
		require.ErrorIs(t, <-done, context.Canceled, "held until the sender gave up")
	}
	require.Eventually(t, func() bool { return r.hung.open.Load() == 0 }, 10*time.Second, 5*time.Millisecond, "released")
	require.Equal(t, int64(2), r.hung.arrived.Load())
	require.Equal(t, int64(2), r.hung.peakOpen())
	_, _, arrivals := tally.Progress()
	require.Zero(t, arrivals, "not in the load's tally")
	require.Zero(t, r.strange.Load())
}
