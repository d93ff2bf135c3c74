package store

import (
	"time"

	"github.com/heraldhooks/herald"
	"github.com/heraldhooks/herald/internal/breaker"
	"github.com/heraldhooks/herald/internal/ratelimit"
)

// ClaimAllowance is the one rule of how many deliveries a claim at now may
// start to ep, whose token bucket and in-flight count (leases not expired,
// across all nodes) are as the backend read them, and whether the first
// is the breaker's probe: none while the breaker blocks; at most one, the
// probe, once its open period is over; otherwise what the rate limit and
// in-flight cap allow (ratelimit.Allowance).
func ClaimAllowance(ep *herald.Endpoint, b ratelimit.Bucket, inFlight int, now time.Time) (n int, probe bool) {
	gate := breaker.GateAt(&ep.Health, now)
	if gate == breaker.Blocked {
		return 0, false
	}
	n = ratelimit.Allowance(ep, &ep.Health, b, inFlight, now)
	if gate == breaker.Probe {
		return min(n, 1), true
	}
	return n, false
}

// ClaimWriteBack is what a claim writes back of an endpoint it started
// deliveries to.
type ClaimWriteBack struct {
	// Bucket is the token bucket spent by them, nil for an endpoint
	// without a rate limit (no bucket to keep).
	Bucket *ratelimit.Bucket
	// Health is, for a probe, the half-open health whose next probe may go
	// when this one's lease has run out (breaker.Probing); nil otherwise.
	Health *herald.EndpointHealth
}

// Empty says whether the claim writes nothing back.
func (w ClaimWriteBack) Empty() bool { return w.Bucket == nil && w.Health == nil }

// AfterClaim is what a claim at now that started taken deliveries to ep
// (probe as ClaimAllowance said; leaseExpiry the probe's lease) writes back,
// from the bucket b as read.
func AfterClaim(ep *herald.Endpoint, b ratelimit.Bucket, taken int, probe bool, leaseExpiry, now time.Time) ClaimWriteBack {
	var w ClaimWriteBack
	if taken == 0 {
		return w
	}
	if ep.RateLimit != nil && ep.RateLimit.PerSecond > 0 {
		spent := ratelimit.Take(ep, &ep.Health, b, taken, now)
		w.Bucket = &spent
	}
	if probe {
		h := breaker.Probing(ep.Health, leaseExpiry)
		w.Health = &h
	}
	return w
}

// LeaseLossesEnd is the one rule of bounded redelivery: a claim that takes
// a delivery from an expired lease (it was still delivering: the node
// holding it died or froze before writing an outcome) counts one more
// lost lease, and once losses, counted so, reach limit (0 means
// herald.DefaultMaxLeaseLosses) the claim ends the delivery dead
// (herald.DeadLeaseLost) instead of handing it out, so a payload that
// kills every node taking it is not taken for ever (invariant 2). A
// replay starts the count afresh.
func LeaseLossesEnd(losses, limit int) bool {
	if limit <= 0 {
		limit = herald.DefaultMaxLeaseLosses
	}
	return losses >= limit
}

// LeaseLostNotification is the herald.delivery.dead a claim emits for a
// delivery d of event ev it ended dead with herald.DeadLeaseLost, as
// ObserveOutcome emits one for an outcome that ends a delivery dead; none
// (false) for the delivery of a notification, so that nothing loops.
func LeaseLostNotification(d *herald.Delivery, ev *herald.Event) (herald.Notification, bool) {
	if herald.IsNotification(ev.EventType) {
		return herald.Notification{}, false
	}
	return herald.NewNotification(d.ConsumerID, herald.NotifyDeliveryDead, herald.DeliveryDeadPayload{
		DeliveryID:     d.ID,
		EventID:        ev.ID,
		EventType:      ev.EventType,
		EndpointID:     d.EndpointID,
		ConsumerID:     d.ConsumerID,
		DeadReason:     string(herald.DeadLeaseLost),
		AttemptCount:   d.AttemptCount,
		LastStatusCode: d.LastStatusCode,
		LastError:      herald.ConsumerError(d.LastError),
	}), true
}
