package pgstore

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhooks/herald"
	"github.com/heraldhooks/herald/internal/store"
)

// purgeAt is a purge batch at t0 + 31 days with the default retention.
func purgeAt(ctx context.Context, s *Store) (store.PurgeResult, error) {
	return s.EventPurge(ctx, &store.EventPurgeParams{Retention: 30 * 24 * time.Hour, Now: t0.Add(31 * 24 * time.Hour)})
}

// TestPurgePlans: a purge batch walks the events by their ids, whose
// first characters are their time (events_created_idx is not read, so a
// later release can drop it), and reaches deliveries and attempts by
// their indexes, never by a scan.
func TestPurgePlans(t *testing.T) {
	t.Parallel()
	s := openPlanned(t)
	ids := []string{"evt_x", "evt_y"}
	// Enough events that the planner sees a table worth an index walk.
	for range 4 {
		ingest(t, s, "nobody", 1000)
	}
	_, err := s.pool.Exec(t.Context(), "ANALYZE events")
	require.NoError(t, err)

	cutoff := t0.Add(time.Hour)
	plan := explain(t, s, purgeScanSQL, cutoff, herald.FirstID(herald.PrefixEvent, cutoff), "", 500)
	require.Regexp(t, `Index Scan using events_pkey on events`, plan)
	require.NotContains(t, plan, "events_created_idx")
	require.Contains(t, plan, "deliveries_event_idx")
	require.NotContains(t, plan, "Seq Scan")
	require.NotContains(t, plan, "Sort", "the index gives the order")
	require.Regexp(t, `Index Scan using deliveries_event_idx on deliveries d[^\n]*\n\s+Index Cond: \(event_id = events\.id\)`, plan,
		"one probe of each event's deliveries")
	require.NotContains(t, plan, "Hash", "never a hash of every delivery")

	for _, q := range []string{purgeLockDeliveriesSQL, purgeCountSQL} {
		args := []any{ids}
		if q == purgeLockDeliveriesSQL {
			args = append(args, t0)
		}
		plan = explain(t, s, q, args...)
		require.Contains(t, plan, "deliveries_event_idx", q)
		require.NotContains(t, plan, "Seq Scan", q)
	}

	for _, q := range []string{purgeAttemptsSQL, purgeDeliveriesSQL, purgeEventsSQL} {
		plan = explain(t, s, q, ids)
		require.NotContains(t, plan, "Seq Scan", q)
	}
	require.Contains(t, explain(t, s, purgeAttemptsSQL, ids), "attempts_delivery_idx")
}

// TestPurgeOneNodeAtATime: while one node's purge transaction holds the
// purge lock, another node's batch comes back Busy at once, having done
// nothing; once the lock is free it purges.
func TestPurgeOneNodeAtATime(t *testing.T) {
	t.Parallel()
	nodes := openNodes(t, 2)
	ingest(t, nodes[0], "nobody", 2) // no endpoint: no deliveries

	tx, err := nodes[1].pool.Begin(t.Context())
	require.NoError(t, err)
	defer tx.Rollback(t.Context()) //nolint:errcheck // a no-op after Rollback
	var locked bool
	require.NoError(t, tx.QueryRow(t.Context(), purgeLockSQL, int32(purgeLockClass)).Scan(&locked))
	require.True(t, locked)

	res, err := purgeAt(t.Context(), nodes[0])
	require.NoError(t, err)
	require.True(t, res.Busy)
	require.Zero(t, res.Rows())

	require.NoError(t, tx.Rollback(t.Context()))
	res, err = purgeAt(t.Context(), nodes[0])
	require.NoError(t, err)
	require.False(t, res.Busy)
	require.EqualValues(t, 2, res.Events)
}

// TestPurgeWaitsForNoOne: a delivery another transaction holds (a replay
// under way) keeps its event, and the purge does not wait for it; once
// released, a later batch takes it.
func TestPurgeWaitsForNoOne(t *testing.T) {
	t.Parallel()
	nodes := openNodes(t, 2)
	createEndpoint(t, nodes[0], "c")
	res := ingest(t, nodes[0], "c", 1)
	require.Len(t, res[0].Deliveries, 1)
	got := claimAt(t, nodes[0], 10, t0)
	require.Len(t, got, 1)
	completeAt(t, nodes[0], t0, delivered(got[0]))

	tx, err := nodes[1].pool.Begin(t.Context())
	require.NoError(t, err)
	defer tx.Rollback(t.Context()) //nolint:errcheck // a no-op after Rollback
	_, err = tx.Exec(t.Context(), "SELECT 1 FROM deliveries WHERE id = $1 FOR UPDATE", got[0].Delivery.ID)
	require.NoError(t, err)

	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	purged, err := purgeAt(ctx, nodes[0])
	require.NoError(t, err, "the purge waits for no lock")
	require.Zero(t, purged.Rows())
	d, err := nodes[0].DeliveryGet(t.Context(), got[0].Delivery.ID)
	require.NoError(t, err)
	require.Equal(t, herald.StatusDelivered, d.Status)

	require.NoError(t, tx.Rollback(t.Context()))
	purged, err = purgeAt(t.Context(), nodes[0])
	require.NoError(t, err)
	require.EqualValues(t, 1, purged.Events)
	require.EqualValues(t, 1, purged.Deliveries)
	require.EqualValues(t, 1, purged.Attempts)
}

// TestPurgeWithoutNowUsesTheDatabaseClock: a node passes no Now, and the
// cutoff is the database clock less the retention, as leases are.
func TestPurgeWithoutNowUsesTheDatabaseClock(t *testing.T) {
	t.Parallel()
	s := openNodes(t, 1)[0]
	for _, age := range []time.Duration{31 * 24 * time.Hour, 29 * 24 * time.Hour} {
		_, err := s.EventIngest(t.Context(), &store.EventIngestParams{
			Events: []store.EventIngestItem{{ConsumerID: "nobody", EventType: "order.created", Payload: []byte(`{}`)}},
			Now:    time.Now().Add(-age),
		})
		require.NoError(t, err)
	}
	res, err := s.EventPurge(t.Context(), &store.EventPurgeParams{Retention: 30 * 24 * time.Hour})
	require.NoError(t, err)
	require.True(t, res.Done)
	require.EqualValues(t, 1, res.Events, "the event 31 days old goes, the one 29 days old stays")
}
