package store

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/heraldhooks/herald"
)

// This file holds what a replay may touch, the rule both backends follow:
// a terminal delivery (delivered, dead or cancelled) whose endpoint is
// enabled, brought back to pending with a fresh attempt budget (its
// attempt log stays), due at the replay's now or, paced, ReplayDelay
// after it.

// CheckReplay says whether a delivery in status, whose endpoint is
// enabled or not (a deleted endpoint is not), may be replayed: a live
// delivery, or one its endpoint cannot take, gives ErrConflict.
func CheckReplay(status herald.Status, endpointEnabled bool) error {
	if !status.Terminal() {
		return fmt.Errorf("delivery is %s: %w", status, ErrConflict)
	}
	if !endpointEnabled {
		return fmt.Errorf("its endpoint is disabled or deleted: %w", ErrConflict)
	}
	return nil
}

// CheckReplayMany refuses, before anything is read, a replay that names
// neither an event nor an endpoint, asks for a status that is not
// terminal (no delivery would match), or a negative rate.
func CheckReplayMany(p *DeliveryReplayManyParams) error {
	switch {
	case p.EventID == "" && p.EndpointID == "":
		return errors.New("an event or an endpoint must be named")
	case p.Status != "" && !p.Status.Terminal():
		return fmt.Errorf("status %q is not terminal", p.Status)
	case p.Rate < 0:
		return fmt.Errorf("rate %g is negative", p.Rate)
	}
	return nil
}

// ReplayDelay is how long after the replay's now the i-th delivery (from
// 0, in creation order, then ingest order) a paced replay brings back is
// due, at rate deliveries a second: floor(i * 10^6 / rate) microseconds,
// the one formula the backends' SQL computes (in float8, as here); none
// without a rate.
func ReplayDelay(i int, rate float64) time.Duration {
	if rate <= 0 {
		return 0
	}
	return time.Duration(math.Floor(float64(i)*1e6/rate)) * time.Microsecond
}
