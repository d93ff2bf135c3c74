package pgstore

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhooks/herald/internal/store"
)

// TestCachedEndpointsFollowChanges: a node fans out from the endpoints
// it read, kept here for an hour, yet every ingest sees the endpoint
// changes another node committed before it began (on the test clock,
// which gives every change the same updated_at): an endpoint created,
// its event types changed, disabled, enabled again, its secret rotated
// (which a delivery leased at ingest carries), deleted. The ingest that
// meets a change is written again, reading the endpoints, and answers as
// if it had read them first.
func TestCachedEndpointsFollowChanges(t *testing.T) {
	t.Parallel()
	nodes := openNodes(t, 2)
	a, b := nodes[0], nodes[1]
	a.endpoints.ttl = time.Hour
	ctx := t.Context()
	first := createEndpoint(t, b, "c")

	// fanOut ingests one event of type a.b for c on a and returns the
	// endpoints it went to.
	fanOut := func() []string {
		t.Helper()
		res, err := a.EventIngest(ctx, &store.EventIngestParams{Events: []store.EventIngestItem{
			{ConsumerID: "c", EventType: "a.b", Payload: []byte(`{}`)},
		}})
		require.NoError(t, err)
		var eps []string
		for _, r := range res[0].Deliveries {
			d, err := a.DeliveryGet(ctx, r.ID)
			require.NoError(t, err, "committed")
			require.Equal(t, r.EndpointID, d.EndpointID)
			eps = append(eps, r.EndpointID)
		}
		slices.Sort(eps)
		return eps
	}
	require.Equal(t, []string{first.ID}, fanOut(), "read")
	require.Equal(t, []string{first.ID}, fanOut(), "remembered")

	second := createEndpoint(t, b, "c")
	both := []string{first.ID, second.ID}
	slices.Sort(both)
	require.Equal(t, both, fanOut(), "created on the other node")
	require.Equal(t, both, fanOut())

	second.EventTypes = []string{"x.*"}
	_, err := b.EndpointUpdate(ctx, &store.EndpointUpdateParams{Endpoint: second, Now: t0})
	require.NoError(t, err)
	require.Equal(t, []string{first.ID}, fanOut(), "event types changed")

	_, err = b.EndpointSetEnabled(ctx, &store.EndpointSetEnabledParams{ID: first.ID, Enabled: false, Now: t0})
	require.NoError(t, err)
	require.Empty(t, fanOut(), "disabled")
	_, err = b.EndpointSetEnabled(ctx, &store.EndpointSetEnabledParams{ID: first.ID, Enabled: true, Now: t0})
	require.NoError(t, err)
	require.Equal(t, []string{first.ID}, fanOut(), "enabled again")

	// A delivery leased at ingest carries the endpoint as it is now.
	k := setTaker(t, a, 10)
	require.Equal(t, []string{first.ID}, fanOut())
	_, err = b.EndpointRotateSecret(ctx, &store.EndpointRotateSecretParams{
		ID: first.ID, NewSecret: "whsec_bmV3IHNlY3JldA==", Now: t0,
	})
	require.NoError(t, err)
	require.Equal(t, []string{first.ID}, fanOut(), "secret rotated")
	leased := k.Taken()
	require.Len(t, leased, 2, "both leased at ingest")
	require.Equal(t, "whsec_bmV3IHNlY3JldA==", leased[1].Endpoint.Secret, "the secret as rotated")
	a.SetTaker(nil)

	require.NoError(t, b.EndpointDelete(ctx, &store.EndpointDeleteParams{ID: first.ID, Now: t0}))
	require.Empty(t, fanOut(), "deleted")
}

// TestCachedEndpointsKeepDuplicatesApart: from remembered endpoints, an
// event whose idempotency key was taken gets no delivery, beside one new
// event in the same call that gets its own; both answers are as when the
// endpoints are read.
func TestCachedEndpointsKeepDuplicatesApart(t *testing.T) {
	t.Parallel()
	s := openNodes(t, 1)[0]
	s.endpoints.ttl = time.Hour
	ctx := t.Context()
	ep := createEndpoint(t, s, "c")
	old, err := s.EventIngest(ctx, &store.EventIngestParams{Events: []store.EventIngestItem{event("old")}})
	require.NoError(t, err)

	res, err := s.EventIngest(ctx, &store.EventIngestParams{Events: []store.EventIngestItem{event("old"), event("new")}})
	require.NoError(t, err)
	require.True(t, res[0].Duplicate)
	require.Equal(t, old[0].Event.ID, res[0].Event.ID)
	require.Equal(t, old[0].Deliveries, res[0].Deliveries)
	require.False(t, res[1].Duplicate)
	require.Len(t, res[1].Deliveries, 1)
	require.Equal(t, ep.ID, res[1].Deliveries[0].EndpointID)
	require.False(t, res[1].Event.CreatedAt.IsZero(), "created_at as written")
	page, err := s.DeliveryList(ctx, &store.DeliveryListParams{EndpointID: ep.ID})
	require.NoError(t, err)
	require.Len(t, page.Items, 2, "one delivery for each event")
}

// TestConfigVersionCoversTheConfiguration: config_version moves with a
// change of any column of endpoints but its state (migration 0022), and
// not with the state that outcome writes and claims change.
func TestConfigVersionCoversTheConfiguration(t *testing.T) {
	t.Parallel()
	s := openNodes(t, 1)[0]
	ctx := t.Context()
	ep := createEndpoint(t, s, "c")
	state := []string{"health", "blocked_until", "bucket_tokens", "bucket_at", "breaker_state",
		"last_failure_at", "config_version"}
	rows, err := s.pool.Query(ctx, `
		SELECT attname, format_type(atttypid, atttypmod), attgenerated <> ''
		FROM pg_attribute
		WHERE attrelid = 'endpoints'::regclass AND attnum > 0 AND NOT attisdropped
		ORDER BY attnum`)
	require.NoError(t, err)
	type column struct {
		name, typ string
		generated bool
	}
	var cols []column
	for rows.Next() {
		var c column
		require.NoError(t, rows.Scan(&c.name, &c.typ, &c.generated))
		cols = append(cols, c)
	}
	require.NoError(t, rows.Err())
	version := func() int64 {
		t.Helper()
		var v int64
		require.NoError(t, s.pool.QueryRow(ctx, "SELECT config_version FROM endpoints WHERE id = $1", ep.ID).Scan(&v))
		return v
	}
	// A value of each type unlike any the endpoint holds.
	changed := map[string]string{
		"text": "'changed'", "text[]": "ARRAY['changed']", "boolean": "NOT %s",
		"bigint": "coalesce(%s, 0) + 1", "integer": "coalesce(%s, 0) + 1",
		"double precision": "coalesce(%s, 0) + 1", "bigint[]": "ARRAY[7]::bigint[]",
		"jsonb": `'{"changed": true}'::jsonb`, "timestamp with time zone": "coalesce(%s, now()) + interval '1 second'",
	}
	checked := 0
	for _, c := range cols {
		if c.generated || c.name == "id" || c.name == "config_version" {
			continue
		}
		expr, ok := changed[c.typ]
		require.True(t, ok, "column %s of type %s: add a changed value", c.name, c.typ)
		expr = strings.ReplaceAll(expr, "%s", c.name)
		before := version()
		_, err := s.pool.Exec(ctx, "UPDATE endpoints SET "+c.name+" = "+expr+" WHERE id = $1", ep.ID)
		require.NoError(t, err, c.name)
		if slices.Contains(state, c.name) {
			require.Equal(t, before, version(), "%s is state: config_version stays", c.name)
		} else {
			require.Equal(t, before+1, version(), "%s is configuration: config_version moves", c.name)
			checked++
		}
	}
	require.GreaterOrEqual(t, checked, 20)
	before := version()
	_, err = s.pool.Exec(ctx, "UPDATE endpoints SET url = url WHERE id = $1", ep.ID)
	require.NoError(t, err)
	require.Equal(t, before, version(), "a write that changes nothing")
}
