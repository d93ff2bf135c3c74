package api

import (
	"strings"
	"time"
	"unicode/utf8"

	"github.com/heraldhooks/herald"
	"github.com/heraldhooks/herald/internal/sender"
	"github.com/heraldhooks/herald/internal/wire"
)

// This file holds the conversions from domain types to the answers' shapes,
// which are defined once, in internal/wire, for the server, the client and
// the OpenAPI check alike. Times are RFC 3339 in UTC, durations Go duration
// strings.

// orderingNone is how an answer (and a request) names herald.OrderingNone,
// whose Go value is the empty string.
const orderingNone = "none"

func toHealthJSON(h *herald.EndpointHealth) wire.EndpointHealth {
	out := wire.EndpointHealth{
		BreakerState:        string(h.BreakerState),
		ConsecutiveFailures: h.ConsecutiveFailures,
		FailingSince:        utcPtr(h.FailingSince),
		LastSuccessAt:       utcPtr(h.LastSuccessAt),
		LastFailureAt:       utcPtr(h.LastFailureAt),
		ProbeAt:             utcPtr(h.ProbeAt),
		PausedUntil:         utcPtr(h.PausedUntil),
		RateFactor:          h.RateFactor,
		SuccessRate1h:       h.SuccessRate1h,
		Attempts1h:          h.Attempts1h,
	}
	// An endpoint never tried may carry the zero health: show it as
	// herald.NewEndpointHealth, which is what it means.
	if out.BreakerState == "" {
		out.BreakerState = string(herald.BreakerClosed)
	}
	if out.RateFactor <= 0 {
		out.RateFactor = 1
	}
	return out
}

// withFigures fills out's figures computed on request, which h carries
// (store.EndpointFigures): the queue and the health score.
func withFigures(out *wire.Endpoint, enabled bool, h *herald.EndpointHealth) {
	out.Health.Attempts1h = h.Attempts1h
	out.Health.SuccessRate1h = h.SuccessRate1h
	inFlight, due, dead := h.InFlight, h.Due, h.Dead
	out.Health.InFlight, out.Health.Due, out.Health.Dead = &inFlight, &due, &dead
	out.Health.Score = nil
	if score, ok := herald.HealthScore(enabled, *h); ok {
		out.Health.Score = &score
	}
}

// toEndpointJSON is ep in an answer: every setting, effective defaults
// included. Its secret (or for ed25519 its public key) is set by showKeys;
// Server.endpointAnswer adds the previous public key.
func toEndpointJSON(ep *herald.Endpoint) wire.Endpoint {
	out := wire.Endpoint{
		ID:                       ep.ID,
		ConsumerID:               ep.ConsumerID,
		URL:                      ep.URL,
		Description:              ep.Description,
		EventTypes:               ep.EventTypes,
		Filter:                   nonEmpty(ep.Filter),
		TracePropagation:         !ep.NoTracePropagation,
		PreviousSecretExpiresAt:  utcPtr(ep.PreviousSecretExpiresAt),
		Enabled:                  ep.Enabled,
		DisabledReason:           ep.DisabledReason,
		Timeout:                  wire.Duration(ep.Timeout),
		RetryClientErrors:        ep.RetryClientErrors,
		MaxInFlight:              ep.MaxInFlight,
		SignatureScheme:          string(ep.SignatureScheme),
		Headers:                  ep.Headers,
		Ordering:                 string(ep.Ordering),
		AutoDisableAfterFailures: ep.AutoDisableAfterFailures,
		AutoDisableAfter:         wire.Duration(ep.AutoDisableAfter),
		Health:                   toHealthJSON(&ep.Health),
		CreatedAt:                ep.CreatedAt.UTC(),
		UpdatedAt:                ep.UpdatedAt.UTC(),
	}
	showKeys(&out, ep)
	if ep.ClientCertificate != "" {
		out.ClientCertificate = ep.ClientCertificate
		if info, err := sender.DescribeClientCertificate(ep.ClientCertificate); err == nil {
			out.ClientCertificateExpiresAt = &info.NotAfter
		}
	}
	if out.EventTypes == nil {
		out.EventTypes = []string{}
	}
	if out.Headers == nil {
		out.Headers = map[string]string{}
	}
	if out.Timeout == 0 {
		out.Timeout = wire.Duration(herald.DefaultTimeout)
	}
	if out.MaxInFlight == 0 {
		out.MaxInFlight = herald.DefaultMaxInFlight
	}
	if out.SignatureScheme == "" {
		out.SignatureScheme = string(herald.SchemeStandard)
	}
	if ep.Ordering == herald.OrderingNone {
		out.Ordering = orderingNone
	}
	if out.AutoDisableAfterFailures <= 0 {
		out.AutoDisableAfterFailures = herald.DefaultAutoDisableAfterFailures
	}
	if ep.AutoDisableAfter <= 0 {
		out.AutoDisableAfter = wire.Duration(herald.DefaultAutoDisableAfter)
	}
	switch {
	case ep.RetryExponential != nil:
		p := ep.RetryExponential
		out.RetryPolicy = &wire.RetryPolicy{
			Type: retryPolicyExponential, Base: wire.Duration(p.Base), Factor: p.Factor,
			Cap: wire.Duration(p.Cap), Attempts: p.Attempts,
		}
	case len(ep.RetrySchedule) > 0:
		out.RetrySchedule = toDurations(ep.RetrySchedule)
	default:
		out.RetrySchedule = toDurations(herald.DefaultRetrySchedule)
	}
	if ep.RateLimit != nil {
		out.RateLimit = &wire.RateLimit{PerSecond: ep.RateLimit.PerSecond, Burst: ep.RateLimit.Burst}
	}
	return out
}

func toDurations(ds []time.Duration) []wire.Duration {
	out := make([]wire.Duration, len(ds))
	for i, d := range ds {
		out[i] = wire.Duration(d)
	}
	return out
}

// toDeliveryJSON is d as the API shows it; to a consumer (a consumer key,
// the portal), its last error as herald.ConsumerError has it.
func toDeliveryJSON(d *herald.Delivery, consumer bool) wire.Delivery {
	lastError := d.LastError
	if consumer {
		lastError = herald.ConsumerError(lastError)
	}
	return wire.Delivery{
		ID:             d.ID,
		EventID:        d.EventID,
		EndpointID:     d.EndpointID,
		ConsumerID:     d.ConsumerID,
		EventType:      d.EventType,
		Status:         string(d.Status),
		AttemptCount:   d.AttemptCount,
		NextAttemptAt:  utcPtr(d.NextAttemptAt),
		LastStatusCode: d.LastStatusCode,
		LastError:      lastError,
		DeadReason:     string(d.DeadReason),
		CreatedAt:      d.CreatedAt.UTC(),
		UpdatedAt:      d.UpdatedAt.UTC(),
		DeliveredAt:    utcPtr(d.DeliveredAt),
	}
}

func toDeliveriesJSON(ds []*herald.Delivery, consumer bool) []wire.Delivery {
	out := make([]wire.Delivery, 0, len(ds))
	for _, d := range ds {
		out = append(out, toDeliveryJSON(d, consumer))
	}
	return out
}

// toAttemptJSON is a as the API shows it; to a consumer, its error as
// herald.ConsumerError has it.
func toAttemptJSON(a *herald.Attempt, consumer bool) wire.Attempt {
	msg := a.Error
	if consumer {
		msg = herald.ConsumerError(msg)
	}
	return wire.Attempt{
		ID:           a.ID,
		DeliveryID:   a.DeliveryID,
		EndpointID:   a.EndpointID,
		Number:       a.Number,
		AttemptedAt:  a.AttemptedAt.UTC(),
		DurationMS:   a.Duration.Milliseconds(),
		StatusCode:   a.StatusCode,
		ResponseBody: responseText(a.Response),
		Error:        msg,
	}
}

// responseText turns kept response bytes into valid UTF-8 of at most
// herald.MaxResponseBodyKeep bytes, cut at a character boundary.
func responseText(b []byte) string {
	s := strings.ToValidUTF8(string(b), "\uFFFD")
	if len(s) <= herald.MaxResponseBodyKeep {
		return s
	}
	s = s[:herald.MaxResponseBodyKeep]
	for len(s) > 0 && !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s
}

// toAPIKeyJSON is k in an answer, without the key itself, which only the
// answer that made it carries (wire.APIKey.Key).
func toAPIKeyJSON(k *herald.APIKey) wire.APIKey {
	return wire.APIKey{
		ID:         k.ID,
		Name:       k.Name,
		Scope:      string(k.Scope),
		ConsumerID: k.ConsumerID,
		Prefix:     k.Prefix,
		CreatedAt:  k.CreatedAt.UTC(),
		LastUsedAt: utcPtr(k.LastUsedAt),
	}
}

func utcPtr(t *time.Time) *time.Time {
	if t == nil || t.IsZero() {
		return nil
	}
	u := t.UTC()
	return &u
}
