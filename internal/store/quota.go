package store

import (
	"context"
	"slices"
	"time"
)

// Kinds of consumer quota: what a consumer's key or portal session can
// make Herald do that costs more than a request, counted per consumer in
// the database so that the limit holds across every node.
const (
	// QuotaTestEvent counts test events (POST /v1/endpoints/{id}/test)
	// across all the consumer's endpoints.
	QuotaTestEvent = "test_event"
	// QuotaConfirmationMail counts confirmation mails, whatever the
	// address they go to.
	QuotaConfirmationMail = "confirmation_mail"
)

// QuotaStore keeps, per consumer and kind, when the consumer last spent
// its quota, so that a limit such as "10 test events a minute" holds over
// every node sharing the database.
type QuotaStore interface {
	// ConsumerQuotaTake spends one of the consumer's p.Limit per p.Window
	// of p.Kind at Now (zero: the database clock), as QuotaSpend decides,
	// under a lock on the consumer's row of that kind: of several nodes
	// asking at once, no more than the limit are granted. A refusal
	// changes nothing and says when one more would be granted.
	ConsumerQuotaTake(ctx context.Context, p *ConsumerQuotaTakeParams) (QuotaTaken, error)
}

// ConsumerQuotaTakeParams asks for one of ConsumerID's Limit per Window
// of Kind.
type ConsumerQuotaTakeParams struct {
	ConsumerID string
	Kind       string
	Limit      int
	Window     time.Duration
	Now        time.Time
}

// QuotaTaken is what ConsumerQuotaTake decided: OK, or not before
// RetryAt.
type QuotaTaken struct {
	OK      bool
	RetryAt time.Time
	// Now is the time the decision was made at (the database clock's
	// when Now was zero), so that the caller can say how long to wait.
	Now time.Time
}

// QuotaSpend is the rule of a consumer quota, a sliding window: spent are
// the times the quota was spent (oldest first), of which those within
// window before now count. With fewer than limit counted, one more is
// spent at now (ok) and kept holds the counted ones and now; otherwise
// nothing is spent and retryAt is when the oldest that blocks leaves the
// window. Unlike a window that restarts on the hour, no burst of twice
// the limit fits across a boundary. Times after now (another node's
// clock ahead) count as spent. Both backends store kept as they get it.
func QuotaSpend(spent []time.Time, limit int, window time.Duration, now time.Time) (kept []time.Time, retryAt time.Time, ok bool) {
	kept = make([]time.Time, 0, min(len(spent), limit)+1)
	for _, t := range spent {
		if t.After(now.Add(-window)) {
			kept = append(kept, t)
		}
	}
	slices.SortFunc(kept, func(a, b time.Time) int { return a.Compare(b) })
	if limit <= 0 {
		return kept, now.Add(window), false
	}
	if len(kept) >= limit {
		return kept, kept[len(kept)-limit].Add(window), false
	}
	return append(kept, now), time.Time{}, true
}
