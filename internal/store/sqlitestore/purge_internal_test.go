package sqlitestore

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestPurgeQueriesUseTheirIndexes: a purge batch walks the events by their
// creation index, in its order, and reaches deliveries, attempts and the
// listings' entries by theirs: no batch scans a table of the history (the
// queues of unlisted rows it reads whole, a second's worth).
func TestPurgeQueriesUseTheirIndexes(t *testing.T) {
	t.Parallel()
	s := openInternal(t)

	plan := queryPlan(t, s, purgeScanQuery, int64(10), int64(0), "", 500)
	require.Contains(t, plan, "SEARCH e USING COVERING INDEX events_created_id ((created_at,id)>(?,?) AND created_at<?)",
		"the batch starts where the last one stopped")
	require.Contains(t, plan, "SEARCH d USING INDEX deliveries_event (event_id=?)")
	require.NotContains(t, plan, "TEMP B-TREE", "the index gives the order")
	require.NotContains(t, plan, "SCAN e")
	require.NotContains(t, plan, "SCAN d")

	for _, q := range []string{purgeAttemptsQuery, purgeDeliveriesQuery, purgeEventsQuery} {
		plan := queryPlan(t, s, q, `["evt_x"]`)
		require.NotRegexp(t, `SCAN (attempts|deliveries|events|d)\b`, plan, q)
	}
	require.Contains(t, queryPlan(t, s, purgeAttemptsQuery, `["evt_x"]`), "attempts_delivery")
	// A listing's entries are found by their key, never by a walk of the
	// listing; the queues are read whole (a second's worth).
	for _, q := range []string{purgeEndpointDeliveriesQuery, purgeConsumerDeliveriesQuery, purgeListedEventsQuery} {
		plan := queryPlan(t, s, q, `["evt_x"]`)
		require.Regexp(t, `^SEARCH \w+ USING PRIMARY KEY \(owner=\? AND item=\?\)`, plan)
		require.NotContains(t, plan, "SCAN d")
	}
}
