package client_test

import (
	"context"
	"encoding/json"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhooks/herald/internal/client"
)

func TestEndpointProtection(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("SettingsRoundTrip", func(t *testing.T) {
		t.Parallel()
		c := setup(t, nil)
		ep, err := c.EndpointCreate(ctx, &client.EndpointParams{
			URL: ptr("https://example.com/hooks"), Ordering: ptr("fifo"),
			AutoDisableAfterFailures: ptr(50), AutoDisableAfter: ptr(client.Duration(48 * time.Hour)),
		})
		require.NoError(t, err)
		require.Equal(t, "fifo", ep.Ordering)
		require.Equal(t, 50, ep.AutoDisableAfterFailures)
		require.Equal(t, "48h", ep.AutoDisableAfter.String())

		// Reset sends null: back to the defaults.
		up, err := c.EndpointUpdate(ctx, ep.ID, &client.EndpointParams{
			Ordering: ptr("none"), Reset: []string{"auto_disable_after_failures", "auto_disable_after"},
		})
		require.NoError(t, err)
		require.Equal(t, "none", up.Ordering)
		require.Equal(t, 100, up.AutoDisableAfterFailures)
		require.Equal(t, client.Duration(24*time.Hour), up.AutoDisableAfter)

		_, err = c.EndpointUpdate(ctx, ep.ID, &client.EndpointParams{AutoDisableAfterFailures: ptr(0)})
		var apiErr *client.Error
		require.ErrorAs(t, err, &apiErr)
		require.Equal(t, "invalid_auto_disable_after_failures", apiErr.Code)
	})

	t.Run("HealthOfANewEndpoint", func(t *testing.T) {
		t.Parallel()
		c := setup(t, nil)
		ep, err := c.EndpointCreate(ctx, &client.EndpointParams{URL: ptr("https://example.com/hooks")})
		require.NoError(t, err)
		got, err := c.EndpointGet(ctx, ep.ID)
		require.NoError(t, err)
		require.Equal(t, client.EndpointHealth{BreakerState: "closed", RateFactor: 1, InFlight: ptr(0), Due: ptr(0), Dead: ptr(0)}, got.Health)
		require.Equal(t, "none", got.Ordering)
	})
}

func TestBulkReplay(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := setup(t, nil)
	ep, err := c.EndpointCreate(ctx, &client.EndpointParams{URL: ptr("https://example.com/hooks"), ConsumerID: ptr("c1")})
	require.NoError(t, err)
	var events []string
	for range 3 {
		res, err := c.EventSend(ctx, &client.EventParams{ConsumerID: "c1", EventType: "a.b", Payload: json.RawMessage(`{}`)})
		require.NoError(t, err)
		events = append(events, res.ID)
	}
	// Disabling sends the live deliveries dead; enabling lets them be replayed.
	_, err = c.EndpointDisable(ctx, ep.ID, "")
	require.NoError(t, err)
	_, err = c.EndpointEnable(ctx, ep.ID)
	require.NoError(t, err)
	deadCount := func() int {
		page, err := c.DeliveryList(ctx, &client.DeliveryListParams{EndpointID: ep.ID, Status: "dead"})
		require.NoError(t, err)
		return len(page.Data)
	}
	require.Equal(t, 3, deadCount())

	out, err := c.EndpointReplay(ctx, ep.ID, &client.ReplayParams{DryRun: true})
	require.NoError(t, err)
	require.Equal(t, 3, out.Replayed)
	require.True(t, out.DryRun)
	out, err = c.EventReplay(ctx, events[0], &client.EventReplayParams{Status: "dead", DryRun: true})
	require.NoError(t, err)
	require.Equal(t, 1, out.Replayed)
	require.True(t, out.DryRun)
	require.Equal(t, 3, deadCount(), "dry runs change nothing")

	out, err = c.EventReplay(ctx, events[0], &client.EventReplayParams{Rate: 100})
	require.NoError(t, err)
	require.Equal(t, 1, out.Replayed)
	require.False(t, out.DryRun)

	out, err = c.EndpointReplay(ctx, ep.ID, &client.ReplayParams{Rate: 2})
	require.NoError(t, err)
	require.Equal(t, 2, out.Replayed)
	require.JSONEq(t, `{"replayed":2,"dry_run":false}`, string(out.Raw))
	require.Zero(t, deadCount())

	// The two replayed together are half a second apart.
	page, err := c.DeliveryList(ctx, &client.DeliveryListParams{EndpointID: ep.ID, Status: "pending"})
	require.NoError(t, err)
	var due []time.Time
	for _, d := range page.Data {
		if d.EventID != events[0] {
			require.NotNil(t, d.NextAttemptAt)
			due = append(due, *d.NextAttemptAt)
		}
	}
	require.Len(t, due, 2)
	sort.Slice(due, func(i, j int) bool { return due[i].Before(due[j]) })
	require.Equal(t, 500*time.Millisecond, due[1].Sub(due[0]))

	out, err = c.EventReplay(ctx, events[1], nil)
	require.NoError(t, err)
	require.Zero(t, out.Replayed, "nothing terminal is left")

	_, err = c.EndpointReplay(ctx, ep.ID, &client.ReplayParams{Rate: -1})
	var apiErr *client.Error
	require.ErrorAs(t, err, &apiErr)
	require.Equal(t, "invalid_rate", apiErr.Code)
}
