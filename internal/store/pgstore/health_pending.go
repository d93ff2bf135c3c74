package pgstore

import (
	"context"
	"errors"

	"github.com/heraldhooks/herald"
	"github.com/heraldhooks/herald/internal/store"
)

// EndpointHealthGet is being written; this file goes when it lands.
func (s *Store) EndpointHealthGet(ctx context.Context, p *store.EndpointHealthParams) (*herald.EndpointHealth, error) {
	return nil, errors.New("endpoint health: not yet available")
}
