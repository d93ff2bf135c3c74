package store

import (
	"fmt"

	"github.com/heraldhooks/herald"
)

// EndpointCounts are what a backend counts of an endpoint for the figures
// computed on request (EndpointHealthGet, EndpointFigures); FillRecent and
// Fill turn them into the figures, the same way on both backends.
type EndpointCounts struct {
	// Attempts and Successes are the attempts of the hour up to now
	// (attempted_at in (now - 1 h, now]) and those answered with a 2xx.
	Attempts, Successes int
	// InFlight, Due and Dead are the endpoint's queue: deliveries leased
	// now, due now, and dead. Each is counted up to a limit.
	InFlight, Due, Dead int
}

// FillRecent sets h's Attempts1h and SuccessRate1h: the share of the
// hour's attempts that succeeded, nil when there were none.
func (c EndpointCounts) FillRecent(h *herald.EndpointHealth) {
	h.Attempts1h = c.Attempts
	h.SuccessRate1h = nil
	if c.Attempts > 0 {
		rate := float64(c.Successes) / float64(c.Attempts)
		h.SuccessRate1h = &rate
	}
}

// Fill sets every figure of h: FillRecent's, and the queue's, Due no more
// than limit (EndpointFiguresParams.CountLimit), which a backend counting
// it in more than one range may pass.
func (c EndpointCounts) Fill(h *herald.EndpointHealth, limit int) {
	c.FillRecent(h)
	h.InFlight = c.InFlight
	h.Due = min(c.Due, limit)
	h.Dead = c.Dead
}

// Check refuses to read the figures of more than MaxListLimit endpoints
// at once.
func (p *EndpointFiguresParams) Check() error {
	if len(p.IDs) > MaxListLimit {
		return fmt.Errorf("%d endpoints asked, at most %d", len(p.IDs), MaxListLimit)
	}
	return nil
}
