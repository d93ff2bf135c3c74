package pgstore

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/heraldhooks/herald/internal/store"
	"github.com/heraldhooks/herald/internal/store/storetest"
)

// roundTrips counts what the store sends and waits on: each query or
// batch is one round trip to the database. (The pool's own pings are not
// counted: it sends them below pgx's tracers.)
type roundTrips struct{ n atomic.Int64 }

func (r *roundTrips) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	r.n.Add(1)
	return ctx
}

func (r *roundTrips) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (r *roundTrips) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	r.n.Add(1)
	return ctx
}

func (r *roundTrips) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}
func (r *roundTrips) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData)     {}

// openCounted opens a migrated store of one connection on a fresh schema,
// whose round trips the returned counter counts.
func openCounted(t *testing.T) (*Store, *roundTrips) {
	t.Helper()
	return openCountedConns(t, 1)
}

// openCountedConns is openCounted with a pool of conns connections.
func openCountedConns(t *testing.T, conns int) (*Store, *roundTrips) {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(migrated.URL(t) + fmt.Sprintf("&pool_max_conns=%d", conns))
	require.NoError(t, err)
	trips := &roundTrips{}
	cfg.ConnConfig.Tracer = trips
	s, err := openConfig(t.Context(), cfg, slog.New(slog.DiscardHandler), store.WithSecrets(storetest.Ring(t)))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	require.NoError(t, s.Migrate(t.Context()))
	s.endpoints.ttl = time.Hour
	return s, trips
}

// TestLoneIngestRoundTrips: a lone ingest call, which is most calls at
// low rates, costs one round trip, its BEGIN and COMMIT riding with its
// statements, once its consumer's endpoints are remembered (two for the
// first, which reads them); one whose key was taken, two more for the
// reads of the event that holds it. A call that fails rolls back and
// leaves its connection fit for the next call, whether a statement fails
// or the COMMIT does, and is answered an error with nothing kept.
func TestLoneIngestRoundTrips(t *testing.T) {
	t.Parallel()
	s, trips := openCounted(t)
	ctx := t.Context()
	ep := createEndpoint(t, s, "c")
	_, err := s.pool.Exec(ctx, refuseAtCommitSQL)
	require.NoError(t, err)

	// lone ingests item alone and returns its answer and the round trips
	// it took.
	lone := func(item store.EventIngestItem) ([]store.EventIngestResult, int64, error) {
		t.Helper()
		trips.n.Store(0)
		res, err := s.EventIngest(ctx, &store.EventIngestParams{Events: []store.EventIngestItem{item}})
		return res, trips.n.Load(), err
	}
	// The first call on the connection prepares the statements, and reads
	// the endpoints.
	_, n, err := lone(event("warm"))
	require.NoError(t, err)
	require.EqualValues(t, 2, n, "BEGIN, endpoints and events; deliveries, wake-up and COMMIT")
	conns := s.pool.Stat().NewConnsCount()

	res, n, err := lone(event("k"))
	require.NoError(t, err)
	require.EqualValues(t, 1, n, "BEGIN, events, deliveries from the endpoints remembered, wake-up and COMMIT")
	require.Len(t, res[0].Deliveries, 1)
	require.Equal(t, ep.ID, res[0].Deliveries[0].EndpointID)
	_, err = s.DeliveryGet(ctx, res[0].Deliveries[0].ID)
	require.NoError(t, err, "committed")

	again, n, err := lone(event("k"))
	require.NoError(t, err)
	require.EqualValues(t, 3, n, "and the reads of the event that holds the key, once committed")
	require.True(t, again[0].Duplicate)
	require.Equal(t, res[0].Event.ID, again[0].Event.ID)
	require.Equal(t, res[0].Deliveries, again[0].Deliveries)

	bad := event("bad")
	bad.EventType = "a.\x00"
	_, n, err = lone(bad)
	require.ErrorContains(t, err, "insert events")
	require.EqualValues(t, 2, n, "the first batch, and the ROLLBACK")

	refused := event("refused")
	refused.EventType = "refused.at.commit"
	_, n, err = lone(refused)
	require.ErrorContains(t, err, "refused at commit")
	require.EqualValues(t, 1, n, "the failed COMMIT ends the transaction, in the one round trip")

	res, _, err = lone(event("after"))
	require.NoError(t, err)
	require.Len(t, res[0].Deliveries, 1)
	require.Equal(t, conns, s.pool.Stat().NewConnsCount(), "the one connection went back to the pool clean each time")
	page, err := s.EventList(ctx, &store.EventListParams{ConsumerID: "c"})
	require.NoError(t, err)
	var keys []string
	for _, ev := range page.Items {
		keys = append(keys, ev.IdempotencyKey)
	}
	require.ElementsMatch(t, []string{"warm", "k", "after"}, keys, "nothing of the failed calls")
}
