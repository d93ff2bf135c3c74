package sqlitestore

import (
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhooks/herald"
	"github.com/heraldhooks/herald/internal/store"
	"github.com/heraldhooks/herald/internal/testdb"
)

// openLister opens a store whose lister runs every listEvery (an hour:
// only when the test calls listUnlisted), with one endpoint for each of
// the consumers c1 and c2, returned by consumer.
func openLister(t *testing.T, listEvery time.Duration) (*Store, map[string]string) {
	t.Helper()
	s, err := Open(t.Context(), migrated.Path(t), slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	s.listEvery = listEvery
	require.NoError(t, s.Migrate(t.Context()))
	endpoints := map[string]string{}
	for _, c := range []string{"c1", "c2"} {
		endpoints[c] = leasingEndpoint(t, s, c, 0).ID
	}
	return s, endpoints
}

// ingestOne ingests an event of consumer and returns its delivery's id.
func ingestOne(t *testing.T, s *Store, consumer string, at time.Time) string {
	t.Helper()
	res, err := s.EventIngest(t.Context(), &store.EventIngestParams{
		Events: []store.EventIngestItem{{ConsumerID: consumer, EventType: "order.created", Payload: []byte(`{}`)}},
		Now:    at,
	})
	require.NoError(t, err)
	require.Len(t, res[0].Deliveries, 1)
	return res[0].Deliveries[0].ID
}

// count runs a count(*) query on the writer.
func count(t *testing.T, s *Store, query string, args ...any) int {
	t.Helper()
	var n int
	require.NoError(t, s.writer.QueryRowContext(t.Context(), query, args...).Scan(&n))
	return n
}

// listedDeliveries lists an endpoint's deliveries page by page, limit a
// page, newest first.
func listedDeliveries(t *testing.T, s *Store, p store.DeliveryListParams, limit int) []string {
	t.Helper()
	var ids []string
	p.Limit = limit
	for {
		page, err := s.DeliveryList(t.Context(), &p)
		require.NoError(t, err)
		for _, d := range page.Items {
			ids = append(ids, d.ID)
		}
		if page.NextCursor == "" {
			return ids
		}
		p.Cursor = page.NextCursor
	}
}

// TestNewRowsAreListedInPasses: an ingest writes no entry of a listing; the reads by consumer and endpoint find the new rows all the
// same, in order, across pages that span listed and unlisted rows; a pass
// lists them all, in batches; the lister makes passes by itself.
func TestNewRowsAreListedInPasses(t *testing.T) {
	t.Parallel()
	s, endpoints := openLister(t, time.Hour)
	ctx := t.Context()
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

	var mine []string // c1's deliveries, oldest first
	for i := range 3 {
		mine = append(mine, ingestOne(t, s, "c1", at.Add(time.Duration(i)*time.Second)))
	}
	ingestOne(t, s, "c2", at)
	require.Equal(t, 4, count(t, s, `SELECT count(*) FROM unlisted_deliveries`))
	require.Equal(t, 4, count(t, s, `SELECT count(*) FROM unlisted_events`))
	for _, listing := range []string{"consumer_events", "endpoint_deliveries", "consumer_deliveries"} {
		require.Zero(t, count(t, s, `SELECT count(*) FROM `+listing), "an ingest writes no entry of a listing: %s", listing)
	}

	newestFirst := func(ids []string) []string {
		out := make([]string, len(ids))
		for i, id := range ids {
			out[len(ids)-1-i] = id
		}
		return out
	}
	check := func() {
		t.Helper()
		want := newestFirst(mine)
		require.Equal(t, want, listedDeliveries(t, s, store.DeliveryListParams{EndpointID: endpoints["c1"]}, 2))
		require.Equal(t, want, listedDeliveries(t, s, store.DeliveryListParams{ConsumerID: "c1"}, 2))
		require.Equal(t, want, listedDeliveries(t, s, store.DeliveryListParams{ConsumerID: "c1", Status: herald.StatusPending}, 50))
		events, err := s.EventList(ctx, &store.EventListParams{ConsumerID: "c1", Limit: 50})
		require.NoError(t, err)
		require.Len(t, events.Items, len(mine))
		stats, err := s.Stats(ctx, &store.StatsParams{ConsumerID: "c1", Now: at})
		require.NoError(t, err)
		require.Equal(t, int64(len(mine)), stats.ByStatus[herald.StatusPending])
		n, err := s.DeliveryReplayMany(ctx, &store.DeliveryReplayManyParams{EndpointID: endpoints["c1"], DryRun: true, Now: at})
		require.NoError(t, err)
		require.Zero(t, n, "none is terminal")
	}
	check()

	listed, err := s.listUnlisted(ctx, 3)
	require.NoError(t, err)
	require.Equal(t, int64(8), listed, "four events and four deliveries, in batches of up to three")
	require.Zero(t, count(t, s, `SELECT count(*) FROM unlisted_deliveries`))
	require.Zero(t, count(t, s, `SELECT count(*) FROM unlisted_events`))
	require.Equal(t, 3, count(t, s, `SELECT count(*) FROM endpoint_deliveries WHERE owner = ?`, endpoints["c1"]))
	require.Equal(t, 3, count(t, s, `SELECT count(*) FROM consumer_deliveries WHERE owner = 'c1'`))
	require.Equal(t, 3, count(t, s, `SELECT count(*) FROM consumer_events WHERE owner = 'c1'`))
	check()

	// Two more: pages of two now span the unlisted and the listed rows.
	for i := range 2 {
		mine = append(mine, ingestOne(t, s, "c1", at.Add(time.Duration(10+i)*time.Second)))
	}
	check()

	// The lister lists by itself, every listEvery.
	s2, _ := openLister(t, 10*time.Millisecond)
	ingestOne(t, s2, "c1", at)
	require.Eventually(t, func() bool {
		return count(t, s2, `SELECT count(*) FROM unlisted_deliveries`) == 0 &&
			count(t, s2, `SELECT count(*) FROM unlisted_events`) == 0 &&
			count(t, s2, `SELECT count(*) FROM endpoint_deliveries`) == 1
	}, 10*time.Second, 10*time.Millisecond)
}

// TestPurgeTakesListingEntries: a purge deletes the listings' entries of
// the rows it deletes, listed or still queued, and the listings then hold
// no entry without its row.
func TestPurgeTakesListingEntries(t *testing.T) {
	t.Parallel()
	s, endpoints := openLister(t, time.Hour)
	ctx := t.Context()
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

	ingestOne(t, s, "c1", at)
	ingestOne(t, s, "c2", at)
	listed, err := s.listUnlisted(ctx, listBatch)
	require.NoError(t, err)
	require.Equal(t, int64(4), listed)
	ingestOne(t, s, "c1", at) // queued
	_, err = s.writer.ExecContext(ctx, `UPDATE deliveries SET status = 'delivered', due_at = NULL, delivered_at = ?1, updated_at = ?1`, micros(at))
	require.NoError(t, err)
	kept := ingestOne(t, s, "c1", at.Add(2*time.Hour)) // too new to go

	for {
		res, err := s.EventPurge(ctx, &store.EventPurgeParams{Retention: time.Hour, Now: at.Add(2 * time.Hour), Limit: 2})
		require.NoError(t, err)
		if res.Done {
			break
		}
	}
	require.Equal(t, 1, count(t, s, `SELECT count(*) FROM deliveries`))
	for _, table := range []string{"consumer_events", "endpoint_deliveries", "consumer_deliveries"} {
		require.Zero(t, count(t, s, `SELECT count(*) FROM `+table), table)
	}
	require.Equal(t, 1, count(t, s, `SELECT count(*) FROM unlisted_events`))
	require.Equal(t, 1, count(t, s, `SELECT count(*) FROM unlisted_deliveries WHERE item = ?`, kept))

	listed, err = s.listUnlisted(ctx, listBatch)
	require.NoError(t, err)
	require.Equal(t, int64(2), listed)
	require.Equal(t, []string{kept}, listedDeliveries(t, s, store.DeliveryListParams{EndpointID: endpoints["c1"]}, 50))
}

// TestListingMigrationListsEveryRow: a database that 0019's lister left
// with rows listed and rows not yet listed has them all in the listings
// after migration 0020, once each, and its queues start empty.
func TestListingMigrationListsEveryRow(t *testing.T) {
	t.Parallel()
	s, err := Open(t.Context(), testdb.SQLitePath(t), slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	ctx := t.Context()
	migrateBelow(t, s, 20)
	addLaterEndpointColumns(t, s)
	ep := leasingEndpoint(t, s, "c1", 0)
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	var mine []string
	for i := range 4 {
		mine = append([]string{ingestOne(t, s, "c1", at.Add(time.Duration(i)*time.Second))}, mine...)
	}
	// 0019's lister had listed the first two, not the others.
	for _, table := range []string{"events", "deliveries"} {
		_, err := s.writer.ExecContext(ctx, `UPDATE `+table+` SET unlisted = 1 WHERE rowid > 2`)
		require.NoError(t, err)
		require.Equal(t, 2, count(t, s, `SELECT count(*) FROM `+table+` WHERE unlisted = 1`))
	}

	migrateRest(t, s)
	require.Equal(t, 4, count(t, s, `SELECT count(*) FROM consumer_events WHERE owner = 'c1'`))
	require.Equal(t, 4, count(t, s, `SELECT count(*) FROM endpoint_deliveries WHERE owner = ?`, ep.ID))
	require.Equal(t, 4, count(t, s, `SELECT count(*) FROM consumer_deliveries WHERE owner = 'c1'`))
	require.Zero(t, count(t, s, `SELECT count(*) FROM unlisted_events`))
	require.Zero(t, count(t, s, `SELECT count(*) FROM unlisted_deliveries`))
	require.Equal(t, mine, listedDeliveries(t, s, store.DeliveryListParams{EndpointID: ep.ID}, 3))
	require.Equal(t, mine, listedDeliveries(t, s, store.DeliveryListParams{ConsumerID: "c1"}, 3))
}

// BenchmarkListPass: a pass of the lister over a second's rows at 1,000
// events a second, each event of one of 100 consumers with an endpoint
// each, a 1 KiB payload, beside a history of earlier passes. us/row is
// the writer's time for each row listed (an event or a delivery), and
// hold-ms a transaction's (up to listBatch rows).
func BenchmarkListPass(b *testing.B) {
	s, err := Open(b.Context(), migrated.Path(b), slog.New(slog.DiscardHandler))
	require.NoError(b, err)
	b.Cleanup(func() { require.NoError(b, s.Close()) })
	s.listEvery = time.Hour
	require.NoError(b, s.Migrate(b.Context()))
	ctx := b.Context()
	const consumers, perPass = 100, 1000
	for c := range consumers {
		leasingEndpoint(b, s, fmt.Sprintf("c%d", c), 0)
	}
	payload := []byte(`{"data":"` + strings.Repeat("x", 1000) + `"}`)
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	fill := func() {
		for i := 0; i < perPass; i += 100 {
			items := make([]store.EventIngestItem, 100)
			for j := range items {
				items[j] = store.EventIngestItem{ConsumerID: fmt.Sprintf("c%d", (i+j)%consumers), EventType: "order.created", Payload: payload}
			}
			_, err := s.EventIngest(ctx, &store.EventIngestParams{Events: items, Now: at})
			require.NoError(b, err)
		}
	}
	for range 20 { // history
		fill()
		_, err := s.listUnlisted(ctx, listBatch)
		require.NoError(b, err)
	}
	var rows int64
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		fill()
		b.StartTimer()
		n, err := s.listUnlisted(ctx, listBatch)
		require.NoError(b, err)
		require.Equal(b, int64(2*perPass), n)
		rows += n
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(rows), "us/row")
	b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N)/float64(2*perPass/listBatch+2), "hold-ms")
	b.ReportMetric(0, "ns/op")
}
