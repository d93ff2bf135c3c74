package sqlitestore

import (
	"context"
	"database/sql"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhooks/herald"
	"github.com/heraldhooks/herald/internal/store"
)

// openWithEndpoint opens a store with one endpoint, of consumer "c", taking
// every event type, and its statements compiled (which needs the writer).
func openWithEndpoint(t *testing.T) *Store {
	t.Helper()
	// The lister, which commits a pass every listEvery, waits an hour, so
	// that the commits a test counts are the writers' it drives.
	s := openInternal(t, func(s *Store) { s.listEvery = time.Hour })
	_, err := s.EndpointCreate(t.Context(), &store.EndpointCreateParams{Endpoint: &herald.Endpoint{
		ConsumerID: "c", URL: "https://example.com/h", EventTypes: []string{"*"}, Enabled: true,
		Secret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", Timeout: time.Second, SignatureScheme: herald.SchemeStandard,
	}})
	require.NoError(t, err)
	_, err = s.prepared(t.Context())
	require.NoError(t, err)
	return s
}

// holdWriter holds the writer until release is called, so that write
// transactions queue behind it.
func holdWriter(t *testing.T, s *Store) (release func()) {
	t.Helper()
	done, held := make(chan struct{}), make(chan struct{})
	holder := make(chan error, 1)
	go func() {
		holder <- s.write(t.Context(), func(*sql.Tx) error {
			close(held)
			<-done
			return nil
		})
	}()
	<-held
	return func() {
		close(done)
		require.NoError(t, <-holder)
	}
}

// ingestAnswer is what an EventIngest call answered.
type ingestAnswer struct {
	res []store.EventIngestResult
	err error
}

// ingestAsync makes an EventIngest call of item in the background.
func ingestAsync(ctx context.Context, s *Store, item store.EventIngestItem) <-chan ingestAnswer {
	ch := make(chan ingestAnswer, 1)
	go func() {
		res, err := s.EventIngest(ctx, &store.EventIngestParams{Events: []store.EventIngestItem{item}})
		ch <- ingestAnswer{res, err}
	}()
	return ch
}

// refuseEvents has the database refuse every event of eventType, as a
// failed statement of an ingest call would.
func refuseEvents(t *testing.T, s *Store, eventType string) {
	t.Helper()
	_, err := s.writer.ExecContext(t.Context(), `CREATE TRIGGER refuse_events BEFORE INSERT ON events
		WHEN NEW.event_type = '`+eventType+`' BEGIN SELECT RAISE(ABORT, 'refused by the test'); END`)
	require.NoError(t, err)
}

// TestIngestCallsThatOverlapCommitTogether: calls that queue while the
// writer is busy are written as one group, each with its own answer and
// its own deliveries; a call whose context ended while it waited is not
// written, and the calls beside it are.
func TestIngestCallsThatOverlapCommitTogether(t *testing.T) {
	t.Parallel()
	s := openWithEndpoint(t)
	ctx := t.Context()

	// Hold the writer so that the calls below queue up behind it.
	release := holdWriter(t, s)
	send := func(ctx context.Context, key string) <-chan ingestAnswer {
		return ingestAsync(ctx, s, store.EventIngestItem{
			ConsumerID: "c", EventType: "a.b", Payload: []byte(`{"k":"` + key + `"}`), IdempotencyKey: key,
		})
	}
	queued := func(n int) func() bool {
		return func() bool {
			s.groupMu.Lock()
			defer s.groupMu.Unlock()
			return len(s.groupQueue) == n
		}
	}
	// The first call leads: it takes the queue (itself) and waits for the
	// writer. The next three queue behind it, one of them soon cancelled.
	a := send(ctx, "a")
	require.Eventually(t, queued(0), 10*time.Second, time.Millisecond)
	b := send(ctx, "b")
	require.Eventually(t, queued(1), 10*time.Second, time.Millisecond)
	cancelled, cancel := context.WithCancel(ctx)
	c := send(cancelled, "c")
	require.Eventually(t, queued(2), 10*time.Second, time.Millisecond)
	d := send(ctx, "d")
	require.Eventually(t, queued(3), 10*time.Second, time.Millisecond)
	cancel()
	release()

	for key, ch := range map[string]<-chan ingestAnswer{"a": a, "b": b, "d": d} {
		got := <-ch
		require.NoError(t, got.err, key)
		require.Len(t, got.res, 1, key)
		require.False(t, got.res[0].Duplicate, key)
		require.Len(t, got.res[0].Deliveries, 1, key)
		ev, err := s.EventGet(ctx, got.res[0].Event.ID)
		require.NoError(t, err, key)
		require.Equal(t, `{"k":"`+key+`"}`, string(ev.Payload))
	}
	gotC := <-c
	require.ErrorIs(t, gotC.err, context.Canceled)
	page, err := s.EventList(ctx, &store.EventListParams{ConsumerID: "c"})
	require.NoError(t, err)
	require.Len(t, page.Items, 3, "the cancelled call wrote nothing")
	for _, ev := range page.Items {
		require.NotEqual(t, "c", ev.IdempotencyKey)
	}

	// The group is done and the lead released: a lone call goes at once,
	// and a key used in the group is a duplicate.
	again := <-send(ctx, "b")
	require.NoError(t, again.err)
	require.True(t, again.res[0].Duplicate)
	s.groupMu.Lock()
	require.False(t, s.groupBusy)
	require.Empty(t, s.groupQueue)
	s.groupMu.Unlock()
}

// TestCheckpointerCopiesTheWALIntoTheFile: the writer checkpoints only
// once the WAL holds walFrames pages, so rows written below that reach the
// database file through the checkpointer; Close leaves the WAL empty.
func TestCheckpointerCopiesTheWALIntoTheFile(t *testing.T) {
	t.Parallel()
	path := migrated.Path(t)
	s, err := Open(t.Context(), path, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	require.NoError(t, s.Migrate(t.Context()))
	var autocheckpoint int
	require.NoError(t, s.writer.QueryRow("PRAGMA wal_autocheckpoint").Scan(&autocheckpoint))
	require.Equal(t, walFrames, autocheckpoint, "the writer leaves most checkpoints to the checkpointer")

	size := func(p string) int64 {
		fi, err := os.Stat(p)
		require.NoError(t, err)
		return fi.Size()
	}
	before := size(path)
	items := make([]store.EventIngestItem, 500)
	for i := range items {
		items[i] = store.EventIngestItem{ConsumerID: "c", EventType: "a.b", Payload: []byte(`{"pad":"` + strings.Repeat("x", 1000) + `"}`)}
	}
	_, err = s.EventIngest(t.Context(), &store.EventIngestParams{Events: items})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return size(path) > before+400*1024 }, 10*time.Second, 10*time.Millisecond,
		"the events reach the database file")
	require.NoError(t, s.Close())
	if fi, err := os.Stat(path + "-wal"); err == nil {
		require.Zero(t, fi.Size(), "the last checkpoint truncates the WAL")
	} else {
		require.ErrorIs(t, err, os.ErrNotExist)
	}

	s, err = Open(t.Context(), path, nil)
	require.NoError(t, err)
	defer s.Close()
	page, err := s.EventList(t.Context(), &store.EventListParams{ConsumerID: "c", Limit: 1000})
	require.NoError(t, err)
	require.Len(t, page.Items, 500)
}

// TestOutcomeWriteRidesTheNextGroup: an outcome write that comes while an
// ingest call waits for the next group commits in that group's
// transaction, one commit for both; a ride whose context ends before its
// group is not written, and the group commits without it; and a group
// whose call fails commits its other calls, and its rider alone.
func TestOutcomeWriteRidesTheNextGroup(t *testing.T) {
	t.Parallel()
	s := openWithEndpoint(t)
	ctx := t.Context()
	refuseEvents(t, s, "refused")
	ingest := func(ctx context.Context, eventType string) <-chan ingestAnswer {
		return ingestAsync(ctx, s, store.EventIngestItem{ConsumerID: "c", EventType: eventType, Payload: []byte(`{}`)})
	}
	// claimOne ingests an event and leases its delivery.
	claimOne := func() *store.ClaimedDelivery {
		got := <-ingest(ctx, "a.b")
		require.NoError(t, got.err)
		claimed, err := s.DeliveryClaim(ctx, &store.DeliveryClaimParams{Limit: 100, LeaseMargin: time.Minute})
		require.NoError(t, err)
		for _, c := range claimed {
			if c.Delivery.EventID == got.res[0].Event.ID {
				return c
			}
		}
		require.FailNow(t, "the event's delivery was not claimed")
		return nil
	}
	complete := func(ctx context.Context, c *store.ClaimedDelivery) <-chan error {
		ch := make(chan error, 1)
		go func() {
			_, err := s.DeliveryCompleteMany(ctx, &store.DeliveryCompleteManyParams{Outcomes: []store.DeliveryOutcome{{
				Lease:   store.Lease{DeliveryID: c.Delivery.ID, LeaseToken: c.LeaseToken},
				Attempt: herald.Attempt{Number: 1, StatusCode: 200},
				Status:  herald.StatusDelivered,
			}}})
			ch <- err
		}()
		return ch
	}
	status := func(c *store.ClaimedDelivery) herald.Status {
		d, err := s.DeliveryGet(ctx, c.Delivery.ID)
		require.NoError(t, err)
		return d.Status
	}
	waitFor := func(cond func() bool) {
		require.Eventually(t, func() bool {
			s.groupMu.Lock()
			defer s.groupMu.Unlock()
			return cond()
		}, 10*time.Second, time.Millisecond)
	}
	// queueUp holds the writer, has a first ingest call lead a group of its
	// own, waiting for the writer, and the calls of eventTypes queue behind
	// it; then the outcome write of c, with ctx, comes. release lets the
	// writer go.
	queueUp := func(ctx context.Context, c *store.ClaimedDelivery, eventTypes ...string) (calls []<-chan ingestAnswer, ride <-chan error, release func()) {
		release = holdWriter(t, s)
		calls = append(calls, ingest(t.Context(), "a.b"))
		waitFor(func() bool { return s.groupBusy && len(s.groupQueue) == 0 })
		for i, et := range eventTypes {
			calls = append(calls, ingest(t.Context(), et))
			waitFor(func() bool { return len(s.groupQueue) == i+1 })
		}
		ride = complete(ctx, c)
		waitFor(func() bool { return len(s.groupRides) == 1 })
		return calls, ride, release
	}

	t.Run("Rides", func(t *testing.T) {
		c := claimOne()
		calls, ride, release := queueUp(ctx, c, "a.b")
		before := s.commits.Load()
		release()
		for _, call := range calls {
			require.NoError(t, (<-call).err)
		}
		require.NoError(t, <-ride)
		require.Equal(t, herald.StatusDelivered, status(c))
		require.Equal(t, int64(3), s.commits.Load()-before,
			"the holder's, the first group's, and one for the second group and its rider")
	})

	t.Run("RideWhoseContextEnded", func(t *testing.T) {
		c := claimOne()
		rideCtx, cancel := context.WithCancel(ctx)
		calls, ride, release := queueUp(rideCtx, c, "a.b")
		cancel()
		release()
		for _, call := range calls {
			require.NoError(t, (<-call).err, "the group commits without its rider")
		}
		require.ErrorIs(t, <-ride, context.Canceled)
		require.Equal(t, herald.StatusDelivering, status(c), "the outcome was not written")
	})

	t.Run("GroupWhoseCallFails", func(t *testing.T) {
		c := claimOne()
		calls, ride, release := queueUp(ctx, c, "a.b", "refused", "a.b")
		release()
		for i, call := range calls {
			got := <-call
			if i == 2 {
				require.ErrorContains(t, got.err, "refused by the test")
				continue
			}
			require.NoError(t, got.err, "call %d", i)
			_, err := s.EventGet(ctx, got.res[0].Event.ID)
			require.NoError(t, err, "call %d committed", i)
		}
		require.NoError(t, <-ride)
		require.Equal(t, herald.StatusDelivered, status(c), "the rider was written alone")
	})
}
