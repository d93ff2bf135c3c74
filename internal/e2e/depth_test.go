package e2e

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhooks/herald/internal/store/pgstore/pgtest"
)

// TestDepthIsTheSameOnEveryNode: two nodes on one PostgreSQL, each running
// its depth sampler at the same second of the minute (both started at
// 12:00:00 on their clocks), sample each minute once between them, and
// both answer GET /v1/stats/series with the same depth: the queue as it
// was in each minute sampled, null in the minute under way.
func TestDepthIsTheSameOnEveryNode(t *testing.T) {
	t.Parallel()
	db := pgtest.URL(t)
	noDispatch := func(o *options) { o.noDispatch = true }
	nodes := []*env{setup(t, db, noDispatch), setup(t, db, noDispatch)}
	for _, n := range nodes {
		n.runSampler() // 12:00: an empty queue
	}
	a := nodes[0]
	a.createEndpoint(map[string]any{"consumer_id": "acme", "url": "https://a.example.com/hooks"})
	a.send("acme", "order.created", `{"n":1}`)
	a.send("acme", "order.created", `{"n":2}`)
	for range 2 { // 12:01 sampled with the two events due for a minute; then 12:02
		for _, n := range nodes {
			n.tick(time.Minute)
		}
	}

	type point struct {
		At               time.Time `json:"at"`
		DueNow           *int64    `json:"due_now"`
		OldestDueSeconds *float64  `json:"oldest_due_seconds"`
		Dead             *int64    `json:"dead"`
	}
	series := func(n *env) []point {
		var s struct {
			Points []point `json:"points"`
		}
		var raw json.RawMessage
		n.must(http.StatusOK, "GET", "/v1/stats/series", nil, &raw)
		require.NoError(t, json.Unmarshal(raw, &s))
		require.Len(t, s.Points, 60)
		return s.Points
	}
	got := series(a)
	require.Equal(t, got, series(nodes[1]), "every node answers the same")
	at := func(p point) string { return p.At.UTC().Format("15:04") }
	require.Equal(t, "12:01", at(got[59]))
	require.NotNil(t, got[59].DueNow)
	require.Equal(t, int64(2), *got[59].DueNow)
	require.Equal(t, 60.0, *got[59].OldestDueSeconds)
	require.Equal(t, int64(0), *got[59].Dead)
	require.Equal(t, "12:00", at(got[58]))
	require.NotNil(t, got[58].DueNow, "12:00 sampled when the nodes started")
	require.Equal(t, int64(0), *got[58].DueNow)
	require.Nil(t, got[57].DueNow, "11:59: no node ran")
}
