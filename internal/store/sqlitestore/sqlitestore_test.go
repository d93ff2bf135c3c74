package sqlitestore_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhooks/herald"
	"github.com/heraldhooks/herald/internal/store"
	"github.com/heraldhooks/herald/internal/store/sqlitestore"
	"github.com/heraldhooks/herald/internal/store/sqlitestore/sqlitetest"
	"github.com/heraldhooks/herald/internal/store/storetest"
)

// open returns a migrated store on a fresh file, closed when t ends: a copy
// of one migrated once for the package (sqlitetest), migrated again, which
// finds nothing left to apply, as on a restart. It seals endpoint secrets,
// as Herald does.
func open(tb testing.TB) *sqlitestore.Store {
	tb.Helper()
	s, err := sqlitestore.Open(tb.Context(), sqlitetest.Path(tb), slog.New(slog.DiscardHandler),
		store.WithSecrets(storetest.Ring(tb)))
	require.NoError(tb, err)
	tb.Cleanup(func() { require.NoError(tb, s.Close()) })
	require.NoError(tb, s.Migrate(tb.Context()))
	return s
}

// BenchmarkStore measures the SQLite backend's hot paths (see
// storetest.Bench), each benchmark on a fresh file.
func BenchmarkStore(b *testing.B) {
	storetest.Bench(b, func(b *testing.B) store.Store { return open(b) })
}

func TestConformance(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T) store.Store { return open(t) })
}

func TestOpenRefusesNonFilePaths(t *testing.T) {
	t.Parallel()
	for _, p := range []string{"", ":memory:", "file:x.db", "x.db?mode=ro"} {
		_, err := sqlitestore.Open(t.Context(), p, nil)
		require.Error(t, err, p)
	}
}

func TestDataSurvivesReopen(t *testing.T) {
	t.Parallel()
	path := sqlitetest.Path(t)
	s, err := sqlitestore.Open(t.Context(), path, nil)
	require.NoError(t, err)
	require.NoError(t, s.Migrate(t.Context()))
	res, err := s.EventIngest(t.Context(), &store.EventIngestParams{Events: []store.EventIngestItem{{
		ConsumerID: "c", EventType: "order.created", Payload: []byte(`{"a": 1}`), IdempotencyKey: "k",
	}}})
	require.NoError(t, err)
	require.NoError(t, s.Close())

	s, err = sqlitestore.Open(t.Context(), path, nil)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	require.NoError(t, s.Migrate(t.Context()))
	ev, err := s.EventGet(t.Context(), res[0].Event.ID)
	require.NoError(t, err)
	require.Equal(t, `{"a": 1}`, string(ev.Payload))
	again, err := s.EventIngest(t.Context(), &store.EventIngestParams{Events: []store.EventIngestItem{{
		ConsumerID: "c", EventType: "order.created", Payload: []byte(`{"a": 1}`), IdempotencyKey: "k",
	}}})
	require.NoError(t, err)
	require.True(t, again[0].Duplicate)
}

func TestCloseEndsSubscriptions(t *testing.T) {
	t.Parallel()
	s, err := sqlitestore.Open(t.Context(), sqlitetest.Path(t), nil)
	require.NoError(t, err)
	require.NoError(t, s.Migrate(t.Context()))
	ch, err := s.Subscribe(context.Background())
	require.NoError(t, err)

	require.NoError(t, s.Close())
	select {
	case _, ok := <-ch:
		require.False(t, ok, "closed, with no value pending")
	case <-time.After(10 * time.Second):
		require.FailNow(t, "subscription still open after Close")
	}
	require.NoError(t, s.Close(), "a second Close does nothing")
	_, err = s.Subscribe(context.Background())
	require.Error(t, err)
}

// TestClaimFillsUpFromEndpointsWithMore: an endpoint with fewer due
// deliveries than its round-robin share leaves the rest of the limit to
// the others, so a claim is short only when every endpoint is.
func TestClaimFillsUpFromEndpointsWithMore(t *testing.T) {
	t.Parallel()
	s := open(t)
	ctx := t.Context()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	counts := map[string]int{}
	var ids []string
	for consumer, n := range map[string]int{"big": 20, "small": 1, "medium": 3} {
		ep, err := s.EndpointCreate(ctx, &store.EndpointCreateParams{Endpoint: &herald.Endpoint{
			ConsumerID: consumer, URL: "https://x.example/", EventTypes: []string{"*"}, Secret: "whsec_x",
			Enabled: true, MaxInFlight: 50,
		}, Now: now})
		require.NoError(t, err)
		counts[ep.ID] = n
		ids = append(ids, ep.ID)
		items := make([]store.EventIngestItem, n)
		for i := range items {
			items[i] = store.EventIngestItem{ConsumerID: consumer, EventType: "order.created", Payload: []byte(`{}`)}
		}
		_, err = s.EventIngest(ctx, &store.EventIngestParams{Events: items, Now: now})
		require.NoError(t, err)
	}
	got, err := s.DeliveryClaim(ctx, &store.DeliveryClaimParams{Limit: 12, Now: now})
	require.NoError(t, err)
	require.Len(t, got, 12)
	byEndpoint := map[string]int{}
	for _, c := range got {
		byEndpoint[c.Endpoint.ID]++
	}
	for _, id := range ids {
		require.Equal(t, min(counts[id], 8), byEndpoint[id], "endpoint with %d due", counts[id])
	}
}
