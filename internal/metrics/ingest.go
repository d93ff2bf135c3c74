package metrics

import (
	"context"
	"errors"

	"github.com/heraldhooks/herald/internal/store"
)

// filterErrorReason is filter.ReasonFilterError, the skip of an endpoint
// whose filter could not be evaluated (metrics does not import filter,
// which would bring CEL into its imports for one word).
const filterErrorReason = "filter_error"

// errNoStats is a store answering Stats with neither stats nor an error.
var errNoStats = errors.New("store returned no stats")

// CountIngest returns st with its EventIngest counted into
// herald_events_ingested_total: every event the call committed, idempotent
// duplicates excluded; and the endpoints its filters could not be
// evaluated for into herald_filter_errors_total. The app gives the API this store, so the API counts
// what it accepted without knowing of metrics; everything else passes
// through untouched. Events the store ingests on its own (notifications)
// do not pass here and are not counted. It takes and returns the whole
// store.Store, unlike New, because it stands in for it.
func (m *Metrics) CountIngest(st store.Store) store.Store {
	return &ingestCounter{Store: st, m: m}
}

type ingestCounter struct {
	store.Store
	m *Metrics
}

func (s *ingestCounter) EventIngest(ctx context.Context, p *store.EventIngestParams) ([]store.EventIngestResult, error) {
	res, err := s.Store.EventIngest(ctx, p)
	if err != nil {
		return res, err
	}
	n, filterErrors := 0, 0
	for i := range res {
		if !res[i].Duplicate {
			n++
		}
		for _, k := range res[i].Skips {
			if k.Reason == filterErrorReason {
				filterErrors++
			}
		}
	}
	s.m.EventsIngested(n)
	s.m.FilterErrors(filterErrors)
	return res, nil
}
