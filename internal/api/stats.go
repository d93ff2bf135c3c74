package api

import (
	"fmt"
	"net/http"

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

// stats serves GET /v1/stats?consumer_id=:
//
//	{"deliveries": {"pending": 3, "delivering": 1, "delivered": 120, "dead": 2, "cancelled": 0},
//	 "dead_letter_depth": 2, "due_now": 3, "oldest_due_age_seconds": 12.5}
//
// dead_letter_depth is the number of dead deliveries (the ones a replay can
// bring back); due_now counts pending deliveries whose time has come, and
// oldest_due_age_seconds is how long the oldest of them has waited (0 when
// none). With consumer_id, every figure counts that consumer's deliveries
// alone; a consumer key's call always does (AccessConsumerQuery).
func (s *Server) stats(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	if err := checkQuery(q, "consumer_id"); err != nil {
		return err
	}
	st, err := s.store.Stats(r.Context(), &store.StatsParams{ConsumerID: q.Get("consumer_id"), Now: s.storeNow()})
	if err != nil {
		return fmt.Errorf("stats: %w", err)
	}
	out := wire.Stats{
		Deliveries:          make(map[string]int64, len(allStatuses())),
		DeadLetterDepth:     st.ByStatus[herald.StatusDead],
		DueNow:              st.DueNow,
		OldestDueAgeSeconds: st.OldestDueAge.Seconds(),
	}
	for _, status := range allStatuses() {
		out.Deliveries[string(status)] = st.ByStatus[status]
	}
	writeJSON(w, http.StatusOK, out)
	return nil
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
