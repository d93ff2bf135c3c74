package api

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/heraldhooks/herald"
	"github.com/heraldhooks/herald/internal/filter"
	"github.com/heraldhooks/herald/internal/store"
	"github.com/heraldhooks/herald/internal/wire"
)

// maxFilterLen bounds a filter's source: the cost limit bounds what it
// does, this what it takes to parse.
const maxFilterLen = 4 << 10

// filterTestEvents is how many of the consumer's latest events a filter
// test runs over.
const filterTestEvents = 100

// checkFilter compiles src as a filter would be at save: nil if it is
// one, else 400 invalid_filter naming the position and the reason.
func checkFilter(src string) (*filter.Program, error) {
	if len(src) > maxFilterLen {
		return nil, badRequest("invalid_filter", "filter must be at most %d bytes", maxFilterLen)
	}
	p, err := filter.Compile(src)
	var fe *filter.Error
	if errors.As(err, &fe) {
		return nil, badRequest("invalid_filter", "filter: %s", fe.Error())
	}
	if err != nil {
		return nil, fmt.Errorf("compile filter: %w", err)
	}
	return p, nil
}

// applyFilter sets the endpoint's filter from req: "" or null clears it;
// any other is compiled and cost-checked first.
func applyFilter(ep *herald.Endpoint, req *wire.EndpointRequest, isNull func(string) bool) error {
	switch {
	case isNull("filter"):
		ep.Filter = ""
	case req.Filter == nil:
	case *req.Filter == "":
		ep.Filter = ""
	default:
		if _, err := checkFilter(*req.Filter); err != nil {
			return err
		}
		ep.Filter = *req.Filter
	}
	return nil
}

// endpointFilterTest serves POST /v1/endpoints/{id}/filter-test with an
// optional {"filter": "..."} (the endpoint's own when absent): what the
// filter makes of each of the consumer's last 100 events, newest first,
// as fan-out would decide it (filter.Decide). It writes nothing.
func (s *Server) endpointFilterTest(w http.ResponseWriter, r *http.Request) error {
	var req wire.FilterTestRequest
	if _, err := decodeBody(w, r, maxSmallBody, true, &req); err != nil {
		return err
	}
	ep, err := s.getEndpoint(r, r.PathValue("id"))
	if err != nil {
		return err
	}
	src := ep.Filter
	if req.Filter != nil {
		src = *req.Filter
	}
	var prog *filter.Program
	if src != "" {
		if prog, err = checkFilter(src); err != nil {
			return err
		}
	}
	page, err := s.store.EventList(r.Context(), &store.EventListParams{ConsumerID: ep.ConsumerID, Limit: filterTestEvents})
	if err != nil {
		return fmt.Errorf("filter test: list events: %w", err)
	}
	out := wire.FilterTestAnswer{Data: make([]wire.FilterTestResult, 0, len(page.Items))}
	for _, ev := range page.Items {
		res := wire.FilterTestResult{EventID: ev.ID, EventType: ev.EventType, Pass: true}
		if prog != nil {
			pass, err := prog.Eval(&filter.Event{EventType: ev.EventType, ConsumerID: ev.ConsumerID, Payload: ev.Payload})
			res.Pass = pass && err == nil
			if err != nil {
				msg := err.Error()
				res.Error = &msg
			}
		}
		out.Data = append(out.Data, res)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// toSkipsJSON is an event's skips in its answer: an empty list when none.
func toSkipsJSON(skips []store.EventSkip) []wire.EventSkip {
	out := make([]wire.EventSkip, len(skips))
	for i, k := range skips {
		out[i] = wire.EventSkip{EndpointID: k.EndpointID, Reason: k.Reason}
	}
	return out
}

// nonEmpty is s, or nil (null on the wire) when it is "".
func nonEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
