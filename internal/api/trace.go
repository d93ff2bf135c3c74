package api

import (
	"context"
	"net/http"

	"github.com/heraldhooks/herald"
	"github.com/heraldhooks/herald/internal/edge"
	"github.com/heraldhooks/herald/internal/store"
	"github.com/heraldhooks/herald/internal/wire"
)

// serveTraced serves r inside the span of its call (trace.StartRequest):
// named by the route pattern that matched, continuing the caller's
// traceparent, ended with the status answered.
func (s *Server) serveTraced(w http.ResponseWriter, r *http.Request) {
	_, pattern := s.mux.Handler(r)
	ctx, end := s.trace.StartRequest(r, pattern)
	sw := &edge.StatusRecorder{ResponseWriter: w}
	defer func() { end(sw.Status()) }()
	s.serve(sw, r.WithContext(ctx))
}

// ingest writes items (store.EventIngest) inside the ingest's span, whose
// context each item carries to its deliveries' attempts; off, nothing is
// added to them.
func (s *Server) ingest(ctx context.Context, items []store.EventIngestItem) ([]store.EventIngestResult, error) {
	ctx, end := s.trace.StartIngest(ctx, len(items))
	if stored := s.trace.Context(ctx); stored != nil {
		for i := range items {
			items[i].TraceContext = stored
		}
	}
	results, err := s.store.EventIngest(ctx, &store.EventIngestParams{Events: items, Now: s.storeNow()})
	end(err)
	return results, err
}

// applyTracePropagation sets whether the endpoint's webhooks carry the
// traceparent header: false opts out, true or null (the default) opts in.
func applyTracePropagation(ep *herald.Endpoint, req *wire.EndpointRequest, isNull func(string) bool) {
	if isNull("trace_propagation") {
		ep.NoTracePropagation = false
	} else if req.TracePropagation != nil {
		ep.NoTracePropagation = !*req.TracePropagation
	}
}
