package e2e

import (
	"context"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhooks/herald/internal/syncbuf"
)

// runPurger starts the node's purger (the one serve runs, wired to its
// metrics) until the test ends. It counts as a node for tick and settle:
// idle when it sleeps on the test clock between passes.
func (e *env) runPurger() {
	e.t.Helper()
	require.NotNil(e.t, e.app.Purger, "the default retention runs a purger")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	e.nodes.Add(1)
	go func() {
		defer close(done)
		_ = e.app.Purger.Run(ctx)
	}()
	e.t.Cleanup(func() {
		cancel()
		<-done
	})
	waitFor(e.t, "the purger's first pass", e.idle)
}

// TestRetentionPurgesEndedHistory runs a node with the default retention
// (30 days) on the test clock: a delivered and a dead delivery, and an
// event still retrying, all made on day 0. Thirty-one days on, the purger
// has deleted the two that ended (with their attempts, and the dead one's
// notification event), the dead-letter queue is empty, the event still
// retrying is whole, and herald_purged_rows_total counts what went.
func TestRetentionPurgesEndedHistory(t *testing.T) {
	t.Parallel()
	backends(t, func(t *testing.T, db string) {
		log := &syncbuf.Buffer{}
		e := setup(t, db, func(o *options) { o.logger = slog.New(slog.NewTextHandler(log, nil)) })
		e.runPurger()

		ok := newReceiver(t, e.clock, nil)
		bad := newReceiver(t, e.clock, func(_ int, _ *http.Request, w http.ResponseWriter) {
			w.WriteHeader(http.StatusBadRequest)
		})
		down := newReceiver(t, e.clock, func(_ int, _ *http.Request, w http.ResponseWriter) {
			w.WriteHeader(http.StatusServiceUnavailable)
		})
		e.createEndpoint(map[string]any{"consumer_id": "ok", "url": ok.URL})
		e.createEndpoint(map[string]any{"consumer_id": "bad", "url": bad.URL})
		e.createEndpoint(map[string]any{"consumer_id": "down", "url": down.URL})

		delivered := e.send("ok", "order.created", `{"n":1}`)
		dead := e.send("bad", "order.created", `{"n":2}`)
		retrying := e.send("down", "order.created", `{"n":3}`)
		e.waitStatus(delivered.Deliveries[0].ID, "delivered")
		e.waitStatus(dead.Deliveries[0].ID, "dead")
		down.waitHits(t, 1)
		e.waitStatus(retrying.Deliveries[0].ID, "pending")
		e.settle()

		s := e.waitMetrics("the dead letter to be seen", func(s scrape) bool {
			return s.get(`herald_dead_letter_depth`) == 1
		})
		for _, table := range []string{"events", "deliveries", "attempts"} {
			require.Zero(t, s.get(`herald_purged_rows_total{table="`+table+`"}`), table)
		}

		// A day short of the retention past the ends, nothing goes.
		e.tick(29 * 24 * time.Hour)
		e.must(http.StatusOK, "GET", "/v1/events/"+delivered.ID, nil, nil)
		e.must(http.StatusOK, "GET", "/v1/deliveries/"+dead.Deliveries[0].ID, nil, nil)
		require.Zero(t, e.metrics().get(`herald_purged_rows_total{table="events"}`))
		require.NotContains(t, log.String(), "purged history")

		// Past it, the purger's next pass deletes what ended.
		e.tick(2 * 24 * time.Hour)
		e.settle()
		for _, gone := range []string{
			"/v1/events/" + delivered.ID, "/v1/deliveries/" + delivered.Deliveries[0].ID,
			"/v1/events/" + dead.ID, "/v1/deliveries/" + dead.Deliveries[0].ID,
		} {
			e.must(http.StatusNotFound, "GET", gone, nil, nil)
		}
		e.must(http.StatusOK, "GET", "/v1/events/"+retrying.ID, nil, nil)
		d := e.delivery(retrying.Deliveries[0].ID)
		require.Equal(t, "pending", d.Status, "still retrying: its event stays")
		// Its attempts stay. It is still retrying, so another attempt may
		// land between the two reads: attempts only grow, and a purge that
		// took any would leave fewer than the count read first.
		require.GreaterOrEqual(t, len(e.attempts(d.ID)), d.AttemptCount)
		require.Positive(t, d.AttemptCount)

		s = e.waitMetrics("the dead letter to be gone", func(s scrape) bool {
			return s.get(`herald_dead_letter_depth`) == 0
		})
		// The dead delivery's herald.delivery.dead notification (no
		// endpoint subscribes) ended when it was made, and went too.
		require.Equal(t, 3.0, s.get(`herald_purged_rows_total{table="events"}`))
		require.Equal(t, 2.0, s.get(`herald_purged_rows_total{table="deliveries"}`))
		require.Equal(t, 2.0, s.get(`herald_purged_rows_total{table="attempts"}`))
		require.Contains(t, log.String(), `msg="purged history past retention" events=3 deliveries=2 attempts=2`)
	})
}
