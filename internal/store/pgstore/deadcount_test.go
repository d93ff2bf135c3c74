package pgstore

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/heraldhooks/herald"
	"github.com/heraldhooks/herald/internal/store"
)

// TestDeadCountsUnderConcurrentWriters runs, on two nodes at once, outcome
// batches that send deliveries of several endpoints dead (their outcomes
// in no particular order, some disabling an endpoint), enables, replays of whole events (every endpoint's
// delivery of it) and purge batches, all moving the same endpoints'
// counts in endpoint_dead. None may fail (a deadlock would), and the
// counts must end as the deliveries are, and dead_deliveries hold exactly
// the dead ones.
func TestDeadCountsUnderConcurrentWriters(t *testing.T) {
	t.Parallel()
	nodes := openNodes(t, 2)
	for range 8 {
		createEndpoint(t, nodes[0], "c1", func(ep *herald.Endpoint) { ep.MaxInFlight = 1000 })
	}
	ctx := t.Context()
	now := t0.Add(time.Minute)
	const rounds = 15

	w := newWriters(ctx, nodes, rounds)
	// Writers of dead deliveries: ingest, claim and send a batch dead, the
	// outcomes reversed or shuffled so batches list endpoints in any order.
	sendDead := func(ctx context.Context, node *Store, i int) error {
		claimed, err := ingestAndClaim(ctx, node, 3, 24, now)
		if err != nil {
			return err
		}
		var outcomes []store.DeliveryOutcome
		for _, c := range claimed {
			outcomes = append(outcomes, outcomeAt(c, herald.StatusDead, now))
		}
		if i%2 == 0 {
			slices.Reverse(outcomes)
		}
		// Every third batch disables an endpoint too: its other live
		// deliveries go dead in a statement after the batch's own.
		if i%3 == 0 && len(outcomes) > 0 {
			outcomes[0].DisableEndpoint = "gone"
		}
		_, err = node.DeliveryCompleteMany(ctx, &store.DeliveryCompleteManyParams{Outcomes: outcomes, Now: now})
		return err
	}
	w.run("send dead", sendDead)
	// Replays of whole events: one statement over several endpoints.
	w.run("replay", func(ctx context.Context, node *Store, i int) error {
		rows, err := node.pool.Query(ctx, `SELECT DISTINCT event_id FROM deliveries WHERE status = 'dead' LIMIT 3`)
		if err != nil {
			return err
		}
		events, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return err
		}
		for _, ev := range events {
			_, err := node.DeliveryReplayMany(ctx, &store.DeliveryReplayManyParams{EventID: ev, Status: herald.StatusDead, Now: now})
			if err != nil && !errors.Is(err, store.ErrNotFound) {
				return err
			}
		}
		return nil
	})
	// Enabling the disabled endpoints again.
	w.run("enable", func(ctx context.Context, node *Store, i int) error {
		rows, err := node.pool.Query(ctx, `SELECT id FROM endpoints WHERE NOT enabled`)
		if err != nil {
			return err
		}
		ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return err
		}
		for _, id := range ids {
			if _, err := node.EndpointSetEnabled(ctx, &store.EndpointSetEnabledParams{ID: id, Enabled: true, Now: now}); err != nil {
				return err
			}
		}
		return nil
	})
	// Purge batches: every ended event goes.
	w.run("purge", func(ctx context.Context, node *Store, i int) error {
		_, err := node.EventPurge(ctx, &store.EventPurgeParams{Retention: time.Hour, Limit: 20, Now: now.Add(48 * time.Hour)})
		return err
	})
	w.wait(t)
	// Replays and purges may have ended every dead delivery by now; one
	// more batch, alone, leaves some dead for the counts to be checked on.
	require.NoError(t, sendDead(ctx, nodes[1], rounds+1))

	rows, err := nodes[0].pool.Query(ctx, `
		SELECT coalesce(d.endpoint_id, c.endpoint_id), coalesce(d.dead, 0), coalesce(c.n, 0)
		FROM (SELECT endpoint_id, dead FROM endpoint_dead WHERE dead <> 0) AS d
		FULL JOIN (SELECT endpoint_id, count(*) AS n FROM deliveries WHERE status = 'dead' GROUP BY endpoint_id) AS c
			ON c.endpoint_id = d.endpoint_id`)
	require.NoError(t, err)
	type count struct {
		endpoint   string
		kept, real int64
	}
	counts, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (count, error) {
		var c count
		return c, r.Scan(&c.endpoint, &c.kept, &c.real)
	})
	require.NoError(t, err)
	require.NotEmpty(t, counts, "some deliveries stayed dead")
	for _, c := range counts {
		require.Equal(t, c.real, c.kept, "endpoint %s", c.endpoint)
	}
	require.Empty(t, deadMismatches(t, nodes[0]))
}

// deadMismatches lists, one line each, the dead deliveries missing from
// dead_deliveries or differing from their row there, and the rows of
// dead_deliveries whose delivery is not dead (or gone).
func deadMismatches(t *testing.T, s *Store) []string {
	t.Helper()
	rows, err := s.pool.Query(t.Context(), `
		SELECT coalesce(d.id, x.delivery_id) || CASE
			WHEN d.id IS NULL THEN ': listed dead but not dead'
			WHEN x.delivery_id IS NULL THEN ': dead but not listed'
			ELSE ': listed differently' END
		FROM (SELECT * FROM deliveries WHERE status = 'dead') AS d
		FULL JOIN dead_deliveries x ON x.delivery_id = d.id
		WHERE d.id IS NULL OR x.delivery_id IS NULL
			OR (d.endpoint_id, d.consumer_id) IS DISTINCT FROM (x.endpoint_id, x.consumer_id)`)
	require.NoError(t, err)
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	return out
}
