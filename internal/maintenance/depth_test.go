package maintenance_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhooks/herald"
	"github.com/heraldhooks/herald/internal/clock"
	"github.com/heraldhooks/herald/internal/maintenance"
	"github.com/heraldhooks/herald/internal/store"
	"github.com/heraldhooks/herald/internal/store/sqlitestore"
	"github.com/heraldhooks/herald/internal/store/sqlitestore/sqlitetest"
	"github.com/heraldhooks/herald/internal/syncbuf"
)

// sampleStart is 20 seconds into a minute: the sampler samples at :20 of
// each.
var sampleStart = time.Date(2026, 5, 1, 10, 0, 20, 0, time.UTC)

func TestNextSample(t *testing.T) {
	t.Parallel()
	at := func(s string) time.Time {
		v, err := time.Parse("15:04:05.000", s)
		require.NoError(t, err)
		return v
	}
	for _, tc := range []struct {
		name  string
		now   string
		phase time.Duration
		want  string
	}{
		{"LaterInTheMinute", "10:00:05.000", 20 * time.Second, "10:00:20.000"},
		{"AtThePhase", "10:00:20.000", 20 * time.Second, "10:01:20.000"},
		{"PastThePhase", "10:00:21.500", 20 * time.Second, "10:01:20.000"},
		{"TopOfTheMinute", "10:00:00.000", 0, "10:01:00.000"},
		{"ALateTimerKeepsThePhase", "10:01:20.090", 20 * time.Second, "10:02:20.000"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, at(tc.want), maintenance.NextSample(at(tc.now), tc.phase))
		})
	}
}

// openStore opens a migrated SQLite store.
func openStore(t *testing.T) *sqlitestore.Store {
	t.Helper()
	st, err := sqlitestore.Open(t.Context(), sqlitetest.Path(t), nil)
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	require.NoError(t, st.Migrate(t.Context()))
	return st
}

// run runs s until the test ends, and waits for its first sample.
func run(t *testing.T, s *maintenance.Sampler, c *clock.Test, waiters int) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
	})
	waitWaiters(t, c, waiters)
}

// waitWaiters waits until n timers wait on the clock: the samplers have
// sampled and sleep until their next minute.
func waitWaiters(t *testing.T, c *clock.Test, n int) {
	t.Helper()
	deadline := time.NewTimer(time.Minute)
	defer deadline.Stop()
	poll := time.NewTicker(time.Millisecond)
	defer poll.Stop()
	for c.Waiters() < n {
		select {
		case <-deadline.C:
			t.Fatalf("%d of %d samplers asleep", c.Waiters(), n)
		case <-poll.C:
		}
	}
}

// points reads the last hour's depth at now.
func points(t *testing.T, st store.Store, now time.Time) []store.DepthPoint {
	t.Helper()
	p, err := st.DepthSeries(t.Context(), &store.DepthSeriesParams{Window: time.Hour, Step: time.Minute, Now: now})
	require.NoError(t, err)
	return p
}

// dueDelivery makes one delivery due at now.
func dueDelivery(t *testing.T, st store.Store, now time.Time) {
	t.Helper()
	ep, err := st.EndpointCreate(t.Context(), &store.EndpointCreateParams{Now: now, Endpoint: &herald.Endpoint{
		ConsumerID: "c", URL: "https://example.com/hook", EventTypes: []string{"*"}, Secret: "whsec_dGVzdA==",
		Enabled: true, Timeout: 10 * time.Second, SignatureScheme: herald.SchemeStandard}})
	require.NoError(t, err)
	_, err = st.EventIngest(t.Context(), &store.EventIngestParams{Now: now, Events: []store.EventIngestItem{
		{ConsumerID: ep.ConsumerID, EventType: "order.created", Payload: []byte(`{}`)}}})
	require.NoError(t, err)
}

// TestRunSamplesEveryMinuteOnTheClock: the sampler samples when it starts
// and then at the same second of every minute, on the test clock, each
// sample the queue of its time.
func TestRunSamplesEveryMinuteOnTheClock(t *testing.T) {
	t.Parallel()
	st := openStore(t)
	c := clock.NewTest(sampleStart)
	run(t, maintenance.NewSampler(maintenance.SamplerConfig{Store: st, Clock: c}), c, 1)
	minute := sampleStart.Truncate(time.Minute)
	got := points(t, st, minute.Add(time.Minute))
	require.True(t, got[59].Sampled, "the first sample, when it starts")
	require.Equal(t, store.Depth{}, got[59].Depth, "nothing queued yet")

	dueDelivery(t, st, sampleStart)
	c.Advance(30 * time.Second) // 10:00:50: not yet the next minute's :20
	waitWaiters(t, c, 1)
	c.Advance(30 * time.Second) // 10:01:20
	waitWaiters(t, c, 1)
	got = points(t, st, minute.Add(2*time.Minute))
	require.Equal(t, store.Depth{DueNow: 1, OldestDueAge: time.Minute}, got[59].Depth, "sampled at 10:01:20")
	require.Equal(t, store.Depth{}, got[58].Depth, "10:00 keeps its sample")

	c.Advance(2 * time.Minute) // 10:03:20; 10:02:20 passed without a tick
	waitWaiters(t, c, 1)
	got = points(t, st, minute.Add(4*time.Minute))
	require.False(t, got[58].Sampled, "the clock jumped over 10:02: a gap, not a zero")
	require.True(t, got[59].Sampled)
	require.Equal(t, 3*time.Minute, got[59].OldestDueAge)
}

// TestNodesSampleAMinuteOnce: two nodes on one database, started at
// different seconds: the first to reach a minute samples it, the other
// finds it sampled and writes nothing.
func TestNodesSampleAMinuteOnce(t *testing.T) {
	t.Parallel()
	st := openStore(t)
	c := clock.NewTest(sampleStart)
	first := maintenance.NewSampler(maintenance.SamplerConfig{Store: st, Clock: c})
	wrote, err := first.Sample(t.Context())
	require.NoError(t, err)
	require.True(t, wrote)

	second := maintenance.NewSampler(maintenance.SamplerConfig{Store: st, Clock: c})
	c.Advance(15 * time.Second)
	dueDelivery(t, st, c.Now())
	wrote, err = second.Sample(t.Context())
	require.NoError(t, err)
	require.False(t, wrote, "the minute has its sample")
	got := points(t, st, sampleStart.Truncate(time.Minute).Add(time.Minute))
	require.Equal(t, store.Depth{}, got[59].Depth, "the first node's")
}

// TestAFailedSampleIsLoggedAndTheNextOneComes: a sample the store refuses
// is logged, and the sampler still sleeps until its next minute.
func TestAFailedSampleIsLoggedAndTheNextOneComes(t *testing.T) {
	t.Parallel()
	st := openStore(t)
	require.NoError(t, st.Close()) // every call now fails
	c := clock.NewTest(sampleStart)
	log := &syncbuf.Buffer{}
	run(t, maintenance.NewSampler(maintenance.SamplerConfig{Store: st, Clock: c, Logger: slog.New(slog.NewTextHandler(log, nil))}), c, 1)
	require.Contains(t, log.String(), `msg="sample queue depth"`)
	c.Advance(time.Minute)
	waitWaiters(t, c, 1)
	require.Equal(t, 2, strings.Count(log.String(), `msg="sample queue depth"`))
}
