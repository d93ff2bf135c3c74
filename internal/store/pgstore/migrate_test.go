package pgstore

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/heraldhooks/herald"
	"github.com/heraldhooks/herald/internal/store"
	"github.com/heraldhooks/herald/internal/testdb"
)

// TestMigrateProtection checks what migration 0002 makes of rows written
// under 0001: endpoints start healthy, and existing deliveries are
// numbered in creation order, with new ones numbered after them.
func TestMigrateProtection(t *testing.T) {
	t.Parallel()
	s := openUnmigrated(t)
	ctx := t.Context()
	all, err := migrations()
	require.NoError(t, err)
	require.Equal(t, 1, all[0].Version)
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `CREATE TABLE schema_migrations (
			version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())`); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, all[0].SQL); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, "INSERT INTO schema_migrations (version, name) VALUES (1, $1)", all[0].Name)
		return err
	})
	require.NoError(t, err)

	// Rows as 0001 wrote them; the ids do not follow creation order.
	for _, q := range []string{`
		INSERT INTO endpoints (id, consumer_id, url, description, event_types, secret, enabled,
			timeout_ns, retry_client_errors, max_in_flight, signature_scheme, created_at, updated_at)
		VALUES ('ep_old', 'c1', 'https://example.com/hook', '', '{*}', 'whsec_dGVzdA==', true,
			10000000000, false, 0, 'standard', $1, $1)`, `
		INSERT INTO events (id, consumer_id, event_type, payload, created_at)
		VALUES ('evt_old', 'c1', 'order.created', '{}', $1)`, `
		INSERT INTO deliveries (id, event_id, endpoint_id, consumer_id, event_type, status,
			due_at, created_at, updated_at)
		VALUES
			('dlv_c', 'evt_old', 'ep_old', 'c1', 'order.created', 'pending', $1::timestamptz, $1::timestamptz + interval '1 second', $1),
			('dlv_a', 'evt_old', 'ep_old', 'c1', 'order.created', 'pending', $1::timestamptz, $1::timestamptz + interval '3 second', $1),
			('dlv_b', 'evt_old', 'ep_old', 'c1', 'order.created', 'delivered', NULL, $1::timestamptz + interval '2 second', $1)`,
	} {
		_, err = s.pool.Exec(ctx, q, t0)
		require.NoError(t, err)
	}

	require.NoError(t, s.Migrate(ctx))

	ep, err := s.EndpointGet(ctx, "ep_old")
	require.NoError(t, err)
	require.Equal(t, herald.NewEndpointHealth(), ep.Health)
	require.Equal(t, herald.OrderingNone, ep.Ordering)
	h, err := s.EndpointHealthGet(ctx, &store.EndpointHealthGetParams{ID: "ep_old", Now: t0})
	require.NoError(t, err)
	require.Equal(t, herald.BreakerClosed, h.BreakerState)

	fresh := ingest(t, s, "c1", 1)[0].Deliveries[0].ID
	rows, err := s.pool.Query(ctx, "SELECT id FROM deliveries ORDER BY seq")
	require.NoError(t, err)
	order, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.Equal(t, []string{"dlv_c", "dlv_b", "dlv_a", fresh}, order)

	// The old endpoint's deliveries are claimed as any others.
	got := claimAt(t, s, 10, t0.Add(time.Minute))
	require.Len(t, got, 3, "two old pending ones and the new one")
	require.Equal(t, herald.BreakerClosed, got[0].Endpoint.Health.BreakerState)
}

// openUnmigrated opens a store on a fresh, empty schema.
func openUnmigrated(t *testing.T) *Store {
	t.Helper()
	s, err := Open(t.Context(), testdb.PostgresURL(t), nil)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	return s
}

// TestConfirmationMigrationKeepsAddressesConfirmed: an address set before
// migration 0016 stays confirmed (at the time it was set), so an upgrade
// does not stop its mail; a cleared one confirms nothing.
func TestConfirmationMigrationKeepsAddressesConfirmed(t *testing.T) {
	t.Parallel()
	s := openUnmigrated(t)
	ctx := t.Context()
	migrateBelow(t, s, 16)
	_, err := s.pool.Exec(ctx, `INSERT INTO consumer_notifications VALUES ('c', 'ops@example.com', $1), ('d', '', $1)`, t0)
	require.NoError(t, err)

	require.NoError(t, s.Migrate(ctx))
	c, err := s.NoticeAddressGet(ctx, "c")
	require.NoError(t, err)
	require.True(t, c.Confirmed())
	require.True(t, c.ConfirmedAt.Equal(t0), "confirmed at %v", c.ConfirmedAt)
	require.True(t, c.ConfirmationSentAt.IsZero())
	d, err := s.NoticeAddressGet(ctx, "d")
	require.NoError(t, err)
	require.False(t, d.Confirmed())
}

// TestMigrateEndpointSorts checks what migration 0015 makes of rows
// written before it: the dead deliveries are counted per endpoint, and a
// breaker opened before it ranks its endpoint first by health; and, of
// migration 0018's, that they are listed dead (dead_deliveries).
func TestMigrateEndpointSorts(t *testing.T) {
	t.Parallel()
	s := openUnmigrated(t)
	ctx := t.Context()
	migrateBelow(t, s, 15)
	addLaterEndpointColumns(t, s)

	// a: three dead of c1's; b: one dead of c2's; c: c1's too, its three
	// deliveries pending and its breaker open.
	a := createEndpoint(t, s, "c1")
	c := createEndpoint(t, s, "c1")
	b := createEndpoint(t, s, "c2")
	ingestBefore(t, s, 3, a, c)
	ingestBefore(t, s, 1, b)
	_, err := s.pool.Exec(ctx, `UPDATE deliveries SET status = 'dead', dead_reason = 'exhausted', due_at = NULL
		WHERE endpoint_id IN ($1, $2)`, a.ID, b.ID)
	require.NoError(t, err)
	_, err = s.pool.Exec(ctx, `UPDATE endpoints SET health = health || '{"breaker_state": "open"}' WHERE id = $1`, c.ID)
	require.NoError(t, err)

	migrateRest(t, s)
	deadPage, err := s.DeliveryList(ctx, &store.DeliveryListParams{Status: herald.StatusDead})
	require.NoError(t, err)
	require.Len(t, deadPage.Items, 4, "the dead deliveries written before are listed dead")
	list := func(sort store.EndpointSort, consumer string) []string {
		t.Helper()
		page, err := s.EndpointList(ctx, &store.EndpointListParams{Sort: sort, ConsumerID: consumer, Now: t0})
		require.NoError(t, err)
		var ids []string
		for _, ep := range page.Items {
			ids = append(ids, ep.ID)
		}
		return ids
	}
	require.Equal(t, []string{a.ID, b.ID, c.ID}, list(store.EndpointSortDead, ""))
	require.Equal(t, []string{a.ID, c.ID}, list(store.EndpointSortDead, "c1"))
	rest := []string{a.ID, b.ID}
	slices.Sort(rest)
	require.Equal(t, append([]string{c.ID}, rest...), list(store.EndpointSortHealth, ""))

	// The counts go on from there: a replay takes one of a's.
	rows, err := s.pool.Query(ctx, "SELECT id FROM deliveries WHERE endpoint_id = $1 LIMIT 2", a.ID)
	require.NoError(t, err)
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	for _, id := range ids {
		_, err := s.DeliveryReplay(ctx, &store.DeliveryReplayParams{ID: id, Now: t0})
		require.NoError(t, err)
	}
	var dead int64
	require.NoError(t, s.pool.QueryRow(ctx, "SELECT dead FROM endpoint_dead WHERE endpoint_id = $1", a.ID).Scan(&dead))
	require.EqualValues(t, 1, dead)
	require.Empty(t, deadMismatches(t, s))
}

// migrateBelow applies the migrations before version to s, each in its
// transaction and recorded as Migrate does, to set up a database as an
// older Herald left it.
func migrateBelow(t *testing.T, s *Store, version int) {
	t.Helper()
	ctx := t.Context()
	all, err := migrations()
	require.NoError(t, err)
	_, err = s.pool.Exec(ctx, `CREATE TABLE schema_migrations (
		version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())`)
	require.NoError(t, err)
	for _, m := range all {
		if m.Version >= version {
			break
		}
		err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, m.SQL); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, "INSERT INTO schema_migrations (version, name) VALUES ($1, $2)", m.Version, m.Name)
			return err
		})
		require.NoError(t, err, m.Name)
	}
}

// addLaterEndpointColumns gives an old schema (migrateBelow) the columns
// of endpoints that later migrations add, which today's store writes and
// reads: a test that writes through the store on it calls this first, and
// migrateRest drops them before migrating.
func addLaterEndpointColumns(t *testing.T, s *Store) {
	t.Helper()
	for _, col := range laterEndpointColumns {
		_, err := s.pool.Exec(t.Context(), `ALTER TABLE endpoints ADD COLUMN `+col)
		require.NoError(t, err)
	}
	for _, col := range laterEventColumns {
		_, err := s.pool.Exec(t.Context(), `ALTER TABLE events ADD COLUMN `+col)
		require.NoError(t, err)
	}
}

// laterEventColumns are the columns of events added after the versions
// migrateBelow stops at, which today's store reads.
var laterEventColumns = []string{
	"trace_context bytea", // 0029
}

// laterEndpointColumns are the columns of endpoints added after the
// versions migrateBelow stops at, with their types and defaults.
var laterEndpointColumns = []string{
	"client_certificate text NOT NULL DEFAULT ''",         // 0028
	"client_key text NOT NULL DEFAULT ''",                 // 0028
	"filter text NOT NULL DEFAULT ''",                     // 0027
	"no_trace_propagation boolean NOT NULL DEFAULT false", // 0029
}

// migrateRest drops the columns addLaterEndpointColumns added and applies the
// remaining migrations.
func migrateRest(t *testing.T, s *Store) {
	t.Helper()
	for _, col := range laterEndpointColumns {
		name, _, _ := strings.Cut(col, " ")
		_, err := s.pool.Exec(t.Context(), `ALTER TABLE endpoints DROP COLUMN `+name)
		require.NoError(t, err)
	}
	for _, col := range laterEventColumns {
		name, _, _ := strings.Cut(col, " ")
		_, err := s.pool.Exec(t.Context(), `ALTER TABLE events DROP COLUMN `+name)
		require.NoError(t, err)
	}
	require.NoError(t, s.Migrate(t.Context()))
}

// ingestBefore writes n events, each with a pending delivery to every
// endpoint of eps (of one consumer), as ingest does, in plain SQL: on a
// schema older than the code's, whose ingest writes the tables of later
// migrations.
func ingestBefore(t *testing.T, s *Store, n int, eps ...*herald.Endpoint) {
	t.Helper()
	for range n {
		ev := herald.NewID(herald.PrefixEvent, t0)
		_, err := s.pool.Exec(t.Context(), `INSERT INTO events (id, consumer_id, event_type, payload, created_at)
			VALUES ($1, $2, 'order.created', '{}', $3)`, ev, eps[0].ConsumerID, t0)
		require.NoError(t, err)
		for _, ep := range eps {
			_, err := s.pool.Exec(t.Context(), `INSERT INTO deliveries (id, event_id, endpoint_id, consumer_id,
				event_type, status, due_at, created_at, updated_at)
				VALUES ($1, $2, $3, $4, 'order.created', 'pending', $5, $5, $5)`,
				herald.NewID(herald.PrefixDelivery, t0), ev, ep.ID, ep.ConsumerID, t0)
			require.NoError(t, err)
		}
	}
}
