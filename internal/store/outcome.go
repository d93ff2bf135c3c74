package store

import (
	"fmt"
	"time"

	"github.com/heraldhooks/herald"
	"github.com/heraldhooks/herald/internal/breaker"
)

// This file holds the rules of DeliveryCompleteMany that both backends
// follow: which outcomes a call accepts, what an applied outcome does to
// its endpoint (its health, a disable, the herald.* notifications), and
// what the call then owes the dispatchers and the activity. They are pure;
// a backend reads the rows they need and writes what they decide.

// CheckOutcomes refuses a batch with an outcome whose status is not
// delivered, pending or dead, before anything is written.
func CheckOutcomes(outcomes []DeliveryOutcome) error {
	for i := range outcomes {
		switch o := &outcomes[i]; o.Status {
		case herald.StatusDelivered, herald.StatusPending, herald.StatusDead:
		default:
			return fmt.Errorf("outcome %d of %s: status %q is not delivered, pending or dead", i, o.DeliveryID, o.Status)
		}
	}
	return nil
}

// RetriesSoon says whether an applied outcome puts its delivery back to
// pending due within SoonRetry: idle dispatchers are then woken at once.
func RetriesSoon(outcomes []DeliveryOutcome, applied []bool) bool {
	for i := range outcomes {
		o := &outcomes[i]
		if applied[i] && o.Status == herald.StatusPending && o.RetryIn < SoonRetry {
			return true
		}
	}
	return false
}

// OutcomeActivity is the activity of a batch of outcomes, applied or not:
// a backend writes it once for the whole call.
func OutcomeActivity(outcomes []DeliveryOutcome, applied []bool) *Activity {
	var a Activity
	for i := range outcomes {
		a.AddOutcome(&outcomes[i], applied[i])
	}
	return &a
}

// DeliveryFacts are what a backend reads of the delivery an applied
// outcome ends or retries, for its notifications.
type DeliveryFacts struct {
	EventID    string
	EventType  string
	ConsumerID string
	// AttemptCount is the delivery's attempt count after the outcome.
	AttemptCount int
}

// OutcomeEffects are what one applied outcome does to its endpoint.
type OutcomeEffects struct {
	// Health is the endpoint's health after the outcome.
	Health herald.EndpointHealth
	// Disable, when not empty, is why the endpoint is to be disabled now;
	// it is set only for an endpoint that is enabled.
	Disable string
	// Notifications are the herald.* events the outcome emits, in the
	// order ObserveOutcome gives.
	Notifications []herald.Notification
}

// OutcomeNeedsWindow says whether ObserveOutcome needs the breaker
// window of ep's attempts for outcome o: only a failure while the
// breaker is closed and the streak alone would not open it. A backend
// counts the window only then; otherwise ObserveOutcome ignores it.
func OutcomeNeedsWindow(cfg breaker.Config, ep *herald.Endpoint, o *DeliveryOutcome) bool {
	return o.Status != herald.StatusDelivered && cfg.NeedsWindow(&ep.Health)
}

// ObserveOutcome is the one rule of what an applied outcome o of a
// delivery (d) to endpoint ep, whose health is ep.Health, does beyond its
// delivery, at now: the breaker observes it (w is the window
// OutcomeNeedsWindow asks for), the endpoint is disabled if the outcome
// asks for it (o.DisableEndpoint, a 410) or the new health calls for it
// (auto-disable), and the notifications follow, always in this order:
//
//  1. herald.endpoint.failing, at the failure that makes a streak;
//  2. herald.endpoint.recovered, at the success that ends one;
//  3. herald.delivery.dead, when the outcome ends the delivery dead;
//  4. herald.endpoint.disabled, when the endpoint is disabled now.
//
// The endpoint's news comes before the delivery's, and the disable last,
// as it is what the others led to (and it ends the endpoint's other
// deliveries too). The outcome of a notification's delivery emits none,
// so a failing notification endpoint cannot loop; it still counts in the
// health and may disable the endpoint. Every time in the payloads is in
// UTC, to the caller's precision, whatever zone now is in; a health
// without FailingSince gives the failing notice now as its start.
func ObserveOutcome(cfg breaker.Config, ep *herald.Endpoint, o *DeliveryOutcome, d DeliveryFacts, w breaker.Window, now time.Time) OutcomeEffects {
	now = now.UTC()
	res := breaker.Result{
		Success:    o.Status == herald.StatusDelivered,
		StatusCode: o.Attempt.StatusCode,
		Error:      o.Attempt.Error,
		PauseFor:   o.PauseFor,
		Throttled:  o.Throttled,
	}
	if !OutcomeNeedsWindow(cfg, ep, o) {
		w = breaker.Window{}
	}
	h, fx := cfg.Observe(ep, ep.Health, res, w, now)
	out := OutcomeEffects{Health: h}
	if ep.Enabled {
		out.Disable = o.DisableEndpoint
		if out.Disable == "" {
			out.Disable = fx.Disable
		}
	}
	if herald.IsNotification(d.EventType) {
		return out
	}
	note := func(consumer, eventType string, payload any) {
		out.Notifications = append(out.Notifications, herald.NewNotification(consumer, eventType, payload))
	}
	if fx.NotifyFailing {
		since := now
		if h.FailingSince != nil {
			since = h.FailingSince.UTC()
		}
		note(ep.ConsumerID, herald.NotifyEndpointFailing, herald.EndpointFailingPayload{
			EndpointID:          ep.ID,
			ConsumerID:          ep.ConsumerID,
			URL:                 ep.URL,
			ConsecutiveFailures: h.ConsecutiveFailures,
			FailingSince:        since,
			LastStatusCode:      o.Attempt.StatusCode,
			LastError:           herald.ConsumerError(o.Attempt.Error),
		})
	}
	if fx.NotifyRecovered {
		note(ep.ConsumerID, herald.NotifyEndpointRecovered, herald.EndpointRecoveredPayload{
			EndpointID:     ep.ID,
			ConsumerID:     ep.ConsumerID,
			URL:            ep.URL,
			FailedAttempts: fx.FailedAttempts,
			FailingSince:   fx.FailingSince.UTC(),
			RecoveredAt:    now,
		})
	}
	if o.Status == herald.StatusDead {
		note(d.ConsumerID, herald.NotifyDeliveryDead, herald.DeliveryDeadPayload{
			DeliveryID:     o.DeliveryID,
			EventID:        d.EventID,
			EventType:      d.EventType,
			EndpointID:     ep.ID,
			ConsumerID:     d.ConsumerID,
			DeadReason:     string(o.DeadReason),
			AttemptCount:   d.AttemptCount,
			LastStatusCode: o.Attempt.StatusCode,
			LastError:      herald.ConsumerError(o.Attempt.Error),
		})
	}
	if out.Disable != "" {
		note(ep.ConsumerID, herald.NotifyEndpointDisabled, herald.EndpointDisabledPayload{
			EndpointID: ep.ID,
			ConsumerID: ep.ConsumerID,
			URL:        ep.URL,
			Reason:     out.Disable,
			DisabledAt: now,
		})
	}
	return out
}

// OutcomeBatch puts the applied outcomes of one DeliveryCompleteMany call
// through ObserveOutcome in the order given, each seeing the health the
// ones before it left, and gathers what the backend then writes: the
// endpoints whose health changed, those to disable and the notifications,
// each in the order the outcomes gave them. Once an outcome disables its
// endpoint, the endpoint's later outcomes in the call are not observed:
// its health starts afresh when it is enabled again, and it is sent
// nothing more.
type OutcomeBatch struct {
	cfg breaker.Config
	now time.Time
	// Changed are the endpoints the observed outcomes touched, in the
	// order first touched, each holding the health the last one left.
	Changed []*herald.Endpoint
	// Disable are the endpoints to disable, in order.
	Disable []EndpointDisable
	// Notifications are every observed outcome's, in order.
	Notifications []herald.Notification

	before   map[string]herald.EndpointHealth // as first observed
	disabled map[string]bool
}

// EndpointDisable is an endpoint an outcome disables, and why.
type EndpointDisable struct {
	ID     string
	Reason string
}

// NewOutcomeBatch starts the observations of one call, under the breaker
// thresholds cfg, at now (the call's time).
func NewOutcomeBatch(cfg breaker.Config, now time.Time) *OutcomeBatch {
	return &OutcomeBatch{cfg: cfg, now: now, before: map[string]herald.EndpointHealth{}, disabled: map[string]bool{}}
}

// Observes says whether an applied outcome of endpoint id is observed:
// not once an earlier outcome of the call disabled it.
func (b *OutcomeBatch) Observes(id string) bool { return !b.disabled[id] }

// NeedsWindow is OutcomeNeedsWindow under the batch's thresholds.
func (b *OutcomeBatch) NeedsWindow(ep *herald.Endpoint, o *DeliveryOutcome) bool {
	return OutcomeNeedsWindow(b.cfg, ep, o)
}

// Observe applies ObserveOutcome to ep, which it then holds the new
// health, and records what follows. The caller passes the same
// *herald.Endpoint for every outcome of one endpoint, and skips those
// Observes refuses.
func (b *OutcomeBatch) Observe(ep *herald.Endpoint, o *DeliveryOutcome, d DeliveryFacts, w breaker.Window) {
	if !b.Observes(ep.ID) {
		return
	}
	if _, seen := b.before[ep.ID]; !seen {
		b.before[ep.ID] = ep.Health
		b.Changed = append(b.Changed, ep)
	}
	fx := ObserveOutcome(b.cfg, ep, o, d, w, b.now)
	ep.Health = fx.Health
	if fx.Disable != "" {
		b.disabled[ep.ID] = true
		b.Disable = append(b.Disable, EndpointDisable{ID: ep.ID, Reason: fx.Disable})
	}
	b.Notifications = append(b.Notifications, fx.Notifications...)
}

// HealthWrites are the endpoints of Changed whose health is to be
// written: all but those whose health the call changed in nothing but a
// last success within LastSuccessPrecision of the one kept
// (OnlyARecentSuccess), which is then not written.
func (b *OutcomeBatch) HealthWrites() []*herald.Endpoint {
	var out []*herald.Endpoint
	for _, ep := range b.Changed {
		if !OnlyARecentSuccess(b.before[ep.ID], ep.Health, b.now) {
			out = append(out, ep)
		}
	}
	return out
}

// OnlyARecentSuccess is whether health after differs from health before
// in nothing but a last success within LastSuccessPrecision of the one
// before, at now.
func OnlyARecentSuccess(before, after herald.EndpointHealth, now time.Time) bool {
	if before.LastSuccessAt == nil || now.Sub(*before.LastSuccessAt) >= LastSuccessPrecision {
		return false
	}
	after.LastSuccessAt = before.LastSuccessAt
	return after.Normalized() == before.Normalized()
}

// NotificationItems are notifications as the events to ingest.
func NotificationItems(ns []herald.Notification) []EventIngestItem {
	items := make([]EventIngestItem, len(ns))
	for i, n := range ns {
		items[i] = EventIngestItem{ConsumerID: n.ConsumerID, EventType: n.EventType, Payload: n.Payload}
	}
	return items
}
