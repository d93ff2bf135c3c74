package pgstore

import (
	"bytes"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhooks/herald"
	"github.com/heraldhooks/herald/internal/store"
	"github.com/heraldhooks/herald/internal/testdb"
)

// TestQueueTidyRacesWriters runs ingests (to a few endpoints, and to more
// than 32 at once, which take the one lock for all), claims with outcomes
// and tidies on four nodes at once, all at one time, then drains: every
// delivery must be delivered. A tidy that raised an endpoint's mark past
// a delivery committed meanwhile would leave it pending and due, unseen by
// every claim.
func TestQueueTidyRacesWriters(t *testing.T) {
	t.Parallel()
	nodes := openNodes(t, 4)
	for range 3 {
		createEndpoint(t, nodes[0], "few")
	}
	for range 40 {
		createEndpoint(t, nodes[0], "wide")
	}

	var writers, others sync.WaitGroup
	var done atomic.Bool
	var made atomic.Int64
	for i := range 3 {
		writers.Add(1)
		go func() {
			defer writers.Done()
			for range 60 {
				res := ingest(t, nodes[i], "few", 1)
				made.Add(int64(len(res[0].Deliveries)))
			}
		}()
	}
	writers.Add(1)
	go func() {
		defer writers.Done()
		for range 8 {
			res := ingest(t, nodes[3], "wide", 1)
			made.Add(int64(len(res[0].Deliveries)))
		}
	}()
	var moved atomic.Int64
	for i := range 2 {
		others.Add(1)
		go func() {
			defer others.Done()
			// Until the drain has ended, and once more after: on a
			// machine busy enough that no tidy ran while marks were
			// stale, that last one finds the drained endpoints' marks.
			for last := false; !last; {
				last = done.Load()
				n, err := nodes[i].EndpointQueueTidy(t.Context(), &store.EndpointQueueTidyParams{Now: t0, Limit: store.TidyLimit})
				require.NoError(t, err)
				moved.Add(int64(n))
			}
		}()
	}
	var deliveredCount atomic.Int64
	drain := func(s *Store) int {
		got := claimAt(t, s, 50, t0)
		if len(got) == 0 {
			return 0
		}
		outs := make([]store.DeliveryOutcome, len(got))
		for i, c := range got {
			outs[i] = delivered(c)
		}
		completeAt(t, s, t0, outs...)
		deliveredCount.Add(int64(len(got)))
		return len(got)
	}
	var drainer sync.WaitGroup
	var written atomic.Bool
	drainer.Add(1)
	go func() {
		defer drainer.Done()
		for !written.Load() {
			drain(nodes[2])
		}
	}()
	writers.Wait()
	written.Store(true)
	drainer.Wait()
	for drain(nodes[0]) > 0 {
	}
	done.Store(true)
	others.Wait()

	page, err := nodes[0].DeliveryList(t.Context(), &store.DeliveryListParams{Status: herald.StatusPending, Limit: store.MaxListLimit})
	require.NoError(t, err)
	require.Empty(t, page.Items, "pending deliveries no claim can see")
	require.Equal(t, made.Load(), deliveredCount.Load())
	require.Positive(t, moved.Load(), "the tidies moved the marks of drained endpoints")
	t.Logf("%d deliveries, %d marks moved by tidies", made.Load(), moved.Load())
}

// TestQueueTidySkipsAnEndpointBeingWritten interleaves by hand what
// TestQueueTidyRacesWriters leaves to chance: an ingest has written its
// delivery, found the endpoint's mark due and left it, and not committed
// yet, when another node tidies. Reading the deliveries, that tidy sees
// nothing live and would drop the mark; it must leave the endpoint alone
// (the writer holds its lock), so the delivery is claimed once committed.
func TestQueueTidySkipsAnEndpointBeingWritten(t *testing.T) {
	t.Parallel()
	nodes := openNodes(t, 2)
	writer, tidier := nodes[0], nodes[1]
	for _, c := range []string{"few", "wide"} {
		t.Run(c, func(t *testing.T) {
			n := 1
			if c == "wide" {
				n = 40 // past 32 endpoints: one lock for all
			}
			for range n {
				createEndpoint(t, writer, c)
			}
			// Something delivered leaves the marks due with nothing live.
			first := ingest(t, writer, c, 1)
			require.Len(t, first[0].Deliveries, n)
			got := claimAt(t, writer, 100, t0)
			require.Len(t, got, n)
			outs := make([]store.DeliveryOutcome, n)
			for i, g := range got {
				outs[i] = delivered(g)
			}
			completeAt(t, writer, t0, outs...)

			tx, err := writer.pool.Begin(t.Context())
			require.NoError(t, err)
			defer tx.Rollback(t.Context()) //nolint:errcheck // a no-op after Commit
			_, err = writer.ingest(t.Context(), tx, []store.EventIngestItem{
				{ConsumerID: c, EventType: "order.created", Payload: []byte(`{}`)},
			}, t0)
			require.NoError(t, err)

			moved, err := tidier.EndpointQueueTidy(t.Context(), &store.EndpointQueueTidyParams{Now: t0, Limit: store.TidyLimit})
			require.NoError(t, err)
			require.Zero(t, moved, "the endpoints being written are left marked")
			require.NoError(t, tx.Commit(t.Context()))

			require.Len(t, claimAt(t, tidier, 100, t0), n, "the delivery committed meanwhile is claimed")
		})
	}
}

// TestOpenWarnsWhenAutovacuumIsOff: a database whose autovacuum is off is
// said at start (this machine's test database may have it either way; the
// warning must follow the setting).
func TestOpenWarnsWhenAutovacuumIsOff(t *testing.T) {
	t.Parallel()
	url := testdb.PostgresURL(t)
	var buf bytes.Buffer
	s, err := Open(t.Context(), url, slog.New(slog.NewTextHandler(&buf, nil)))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	var setting string
	require.NoError(t, s.pool.QueryRow(t.Context(), "SHOW autovacuum").Scan(&setting))
	if setting == "off" {
		require.Contains(t, buf.String(), "autovacuum is off")
	} else {
		require.NotContains(t, buf.String(), "autovacuum")
	}
}

// TestFullClaimsVacuumTheQueues: a node working through a backlog claims
// full batches and never tidies, so its full claims vacuum the queues
// (in the background, when a vacuum is due).
func TestFullClaimsVacuumTheQueues(t *testing.T) {
	t.Parallel()
	s := openNodes(t, 1)[0]
	createEndpoint(t, s, "c1")
	ingest(t, s, "c1", 5)
	vacuums := func() int64 {
		var n int64
		require.NoError(t, s.pool.QueryRow(t.Context(),
			"SELECT vacuum_count FROM pg_stat_user_tables WHERE relid = 'delivery_queue'::regclass").Scan(&n))
		return n
	}
	before := vacuums()

	s.vacuumedAt.Store(0) // never vacuumed: due
	claimed, err := s.DeliveryClaim(t.Context(), &store.DeliveryClaimParams{Limit: 2, LeaseMargin: time.Second, Now: t0})
	require.NoError(t, err)
	require.Len(t, claimed, 2, "a full claim")
	require.Eventually(t, func() bool { return vacuums() > before }, 10*time.Second, 20*time.Millisecond,
		"the full claim vacuumed the delivery queue")
}
