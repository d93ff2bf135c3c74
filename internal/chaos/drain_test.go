package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhooks/herald/internal/client"
)

var (
	buildOnce sync.Once
	builtBin  string
	buildErr  error
)

// heraldBinary builds the herald binary from the tree once for the
// package's internal tests.
func heraldBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "herald-chaos-internal-")
		if err != nil {
			buildErr = err
			return
		}
		builtBin = filepath.Join(dir, "herald")
		if out, err := exec.Command("go", "build", "-o", builtBin, "github.com/heraldhooks/herald/cmd/herald").CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("build herald: %w\n%s", err, out)
		}
	})
	require.NoError(t, buildErr)
	return builtBin
}

// TestDrainWaitsForAnOpenBreaker: when the drain's limit comes while an
// endpoint's breaker is open, the drain goes on waiting for its probe
// instead of declaring the run undrained, and names the breaker.
func TestDrainWaitsForAnOpenBreaker(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rcv := setupReceiver(t, ReceiverOptions{})
	cl, err := startCluster(ctx, clusterOptions{backend: BackendSQLite, herald: heraldBinary(t), leaseMargin: leaseMargin, log: t.Logf})
	require.NoError(t, err)
	defer cl.close()

	api, err := client.New(cl.api, cl.apiKey, client.Options{})
	require.NoError(t, err)
	down, err := closedPortURL()
	require.NoError(t, err)
	consumer := chaosConsumer
	ep, err := api.EndpointCreate(ctx, &client.EndpointParams{
		ConsumerID: &consumer, URL: &down, EventTypes: []string{"*"},
		RetrySchedule: []client.Duration{0, client.Duration(100 * time.Millisecond), client.Duration(100 * time.Millisecond)},
	})
	require.NoError(t, err)
	eps := []endpointSpec{{Name: "down", ID: ep.ID}}

	// Refused connections, five in a row, open its breaker.
	var sent []sentEvent
	for i := range 3 {
		cid := fmt.Sprintf("breaker-%d", i)
		payload, _ := json.Marshal(map[string]any{"cid": cid})
		res, err := api.EventSend(ctx, &client.EventParams{ConsumerID: chaosConsumer, EventType: "chaos.test", Payload: payload})
		require.NoError(t, err)
		sent = append(sent, sentEvent{CID: cid, SentAt: time.Now(), AckAt: time.Now(), EventID: res.ID, Deliveries: 1})
	}
	require.Eventually(t, func() bool {
		got, err := api.EndpointGet(ctx, ep.ID)
		return err == nil && got.Health.BreakerState == "open"
	}, time.Minute, 100*time.Millisecond, "the breaker opens")

	// Its probe is 5 minutes away: the drain, limited to a second, is
	// still waiting when the context ends 4 seconds on.
	drainCtx, stop := context.WithTimeout(ctx, 4*time.Second)
	defer stop()
	drained, took, waited := drain(drainCtx, cl, rcv, sent, eps, time.Second, false, t.Logf)
	require.False(t, drained)
	// took counts from the drain's own start, a moment after the
	// context's: it ends a little short of 4 s.
	require.Error(t, drainCtx.Err(), "the drain waited until the context ended")
	require.Greater(t, took, 3*time.Second, "the drain did not stop at its limit")
	require.Len(t, waited, 1)
	require.Contains(t, waited[0], "down (open, ")

	// An endpoint whose breaker stays closed gets no such wait.
	plainURL := rcv.URL("plain")
	ok, err := api.EndpointCreate(ctx, &client.EndpointParams{ConsumerID: &consumer, URL: &plainURL, EventTypes: []string{"other.*"}})
	require.NoError(t, err)
	drained, _, waited = drain(ctx, cl, rcv, sent, []endpointSpec{{Name: "plain", ID: ok.ID}}, time.Second, false, t.Logf)
	require.False(t, drained)
	require.Empty(t, waited)
}
