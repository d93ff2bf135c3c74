package api

import (
	"fmt"
	"net/http"
	"time"

	"github.com/heraldhooks/herald"
	"github.com/heraldhooks/herald/internal/logkey"
	"github.com/heraldhooks/herald/internal/store"
	"github.com/heraldhooks/herald/internal/wire"
)

// allStatuses lists every delivery status, for answers that count each.
func allStatuses() []herald.Status {
	return []herald.Status{
		herald.StatusPending, herald.StatusDelivering, herald.StatusDelivered,
		herald.StatusDead, herald.StatusCancelled,
	}
}

// stats serves GET /v1/stats?consumer_id=&counts=:
//
//	{"deliveries": {"pending": 3, "delivering": 1, "delivered": 120, "dead": 2, "cancelled": 0},
//	 "dead_letter_depth": 2, "due_now": 3, "oldest_due_age_seconds": 12.5}
//
// dead_letter_depth is the number of dead deliveries (the ones a replay can
// bring back); due_now counts pending deliveries whose time has come, and
// oldest_due_age_seconds is how long the oldest of them has waited (0 when
// none). With consumer_id, every figure counts that consumer's deliveries
// alone; a consumer key's call always does (AccessConsumerQuery).
//
// Counting deliveries by status costs every delivery kept; counts=false
// leaves "deliveries" out, and the rest costs the due queue and the dead
// deliveries only (the dashboard's overview asks so).
func (s *Server) stats(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	if err := checkQuery(q, "consumer_id", "counts"); err != nil {
		return err
	}
	queueOnly := false
	switch q.Get("counts") {
	case "", "true":
	case "false":
		queueOnly = true
	default:
		return badRequest("invalid_counts", "counts must be true (count deliveries by status, the default) or false (leave the counts out)")
	}
	st, err := s.store.Stats(r.Context(), &store.StatsParams{ConsumerID: q.Get("consumer_id"), QueueOnly: queueOnly, Now: s.storeNow()})
	if err != nil {
		return fmt.Errorf("stats: %w", err)
	}
	out := wire.Stats{
		DeadLetterDepth:     st.DeadLetters,
		DueNow:              st.DueNow,
		OldestDueAgeSeconds: st.OldestDueAge.Seconds(),
	}
	if !queueOnly {
		out.Deliveries = make(map[string]int64, len(allStatuses()))
		for _, status := range allStatuses() {
			out.Deliveries[string(status)] = st.ByStatus[status]
		}
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// seriesWindows are the windows GET /v1/stats/series answers, with their
// steps.
var seriesWindows = map[string]struct {
	window, step time.Duration
	stepName     string
}{
	"1h":  {time.Hour, time.Minute, "1m"},
	"24h": {24 * time.Hour, 15 * time.Minute, "15m"},
}

// statsSeries serves GET /v1/stats/series?window=1h|24h (operator only):
// the activity and the queue's depth of the last hour in 60 one-minute
// points, or of the last day in 96 fifteen-minute points, oldest first,
// ending with the last whole minute. Every node writes the activity and
// the depth samples to the database and reads them from there, so every
// node answers the same.
func (s *Server) statsSeries(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	if err := checkQuery(q, "window"); err != nil {
		return err
	}
	name := q.Get("window")
	if name == "" {
		name = "1h"
	}
	win, ok := seriesWindows[name]
	if !ok {
		return badRequest("invalid_window", "window must be 1h (60 points of a minute) or 24h (96 points of 15 minutes)")
	}
	p := &store.ActivitySeriesParams{Window: win.window, Step: win.step, Now: s.storeNow()}
	points, err := s.store.ActivitySeries(r.Context(), p)
	if err != nil {
		return fmt.Errorf("stats series: %w", err)
	}
	// The depth is read over the very window of the activity: without a
	// Now, each read asks the database clock, which may have passed into
	// the next minute in between.
	dp := &store.DepthSeriesParams{Window: p.Window, Step: p.Step, Now: p.Now}
	if n := len(points); n > 0 {
		dp.Now = points[n-1].At.Add(win.step)
	}
	depth, err := s.store.DepthSeries(r.Context(), dp)
	if err != nil {
		return fmt.Errorf("stats series: %w", err)
	}
	out := wire.StatsSeries{Window: name, Step: win.stepName, Points: make([]wire.StatsPoint, len(points))}
	for i := range points {
		out.Points[i] = toStatsPoint(&points[i], win.step)
		if i < len(depth) && depth[i].At.Equal(points[i].At) && depth[i].Sampled {
			addDepth(&out.Points[i], &depth[i].Depth)
		}
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// toStatsPoint turns one step's activity into its answer.
func toStatsPoint(p *store.ActivityPoint, step time.Duration) wire.StatsPoint {
	out := wire.StatsPoint{
		At:                  p.At.UTC(),
		Attempts:            p.Attempts,
		Succeeded:           p.Succeeded,
		Failed:              p.Failed,
		Retries:             p.Retries,
		Exhausted:           p.Exhausted,
		DeliveriesPerSecond: float64(p.Attempts) / step.Seconds(),
	}
	if p.Attempts > 0 {
		rate := float64(p.Succeeded) / float64(p.Attempts)
		out.SuccessRate = &rate
	}
	if ms, ok := p.LatencyQuantile(0.5); ok {
		out.LatencyP50MS = &ms
	}
	if ms, ok := p.LatencyQuantile(0.95); ok {
		out.LatencyP95MS = &ms
	}
	return out
}

// addDepth gives a point the depth sampled in its step.
func addDepth(out *wire.StatsPoint, d *store.Depth) {
	due, dead, oldest := d.DueNow, d.Dead, d.OldestDueAge.Seconds()
	out.DueNow, out.Dead, out.OldestDueSeconds = &due, &dead, &oldest
}

// healthz serves GET /healthz: 200 while the process is up. No key needed.
func (s *Server) healthz(w http.ResponseWriter, r *http.Request) error {
	writeJSON(w, http.StatusOK, wire.Status{Status: "ok"})
	return nil
}

// openAPI serves GET /openapi.json: the OpenAPI 3.1 description of this
// API (openapi.json at the module root). No key needed.
func (s *Server) openAPI(w http.ResponseWriter, r *http.Request) error {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	w.Write(herald.OpenAPI)
	return nil
}

// readyz serves GET /readyz: 200 when the database answers, 503 when not.
// No key needed.
func (s *Server) readyz(w http.ResponseWriter, r *http.Request) error {
	ctx, cancel := pingContext(r.Context())
	defer cancel()
	if err := s.store.Ping(ctx); err != nil {
		s.log.Warn("readiness check failed: database does not answer", logkey.Error, err)
		writeErr(w, http.StatusServiceUnavailable, "not_ready", "the database does not answer")
		return nil
	}
	writeJSON(w, http.StatusOK, wire.Status{Status: "ok"})
	return nil
}
