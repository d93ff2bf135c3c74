package store

import (
	"context"
	"time"
)

// ConsumerNotifications is where a consumer is told, by e-mail, that one
// of its endpoints is failing, was disabled or let a delivery die. A
// consumer that never set an address has the zero value (Email empty,
// UpdatedAt zero); one that cleared it has Email empty and UpdatedAt set.
type ConsumerNotifications struct {
	ConsumerID string
	// Email is one plain address (local@domain), or empty: no mail.
	Email     string
	UpdatedAt time.Time
}

// NoticeStore keeps the consumers' notification addresses and, per
// endpoint, when a notice was last mailed, so that every node together
// sends at most one mail per endpoint per interval.
type NoticeStore interface {
	// ConsumerNotificationsGet returns the consumer's settings; a consumer
	// never set answers the zero settings with its id, not ErrNotFound
	// (consumers are named by the operator, not registered).
	ConsumerNotificationsGet(ctx context.Context, consumerID string) (*ConsumerNotifications, error)
	// ConsumerNotificationsSet stores p.Email (empty clears it) with
	// UpdatedAt from Now, and returns what is stored.
	ConsumerNotificationsSet(ctx context.Context, p *ConsumerNotificationsSetParams) (*ConsumerNotifications, error)
	// NoticeReserve records that a notice about p.EndpointID is being
	// mailed at Now, unless one was recorded less than p.Interval before
	// Now: a conditional write, so of several nodes asking at once exactly
	// one gets it (ok). The reservation comes back to undo it with
	// NoticeRelease when the mail cannot be sent.
	NoticeReserve(ctx context.Context, p *NoticeReserveParams) (r NoticeReservation, ok bool, err error)
	// NoticeRelease undoes a reservation whose mail was not sent: the
	// endpoint's record goes back to what it was, unless another
	// reservation replaced it meanwhile (then nothing changes).
	NoticeRelease(ctx context.Context, r NoticeReservation) error
}

// ConsumerNotificationsSetParams sets (or, with Email empty, clears) a
// consumer's notification address. The caller validates the address.
type ConsumerNotificationsSetParams struct {
	ConsumerID string
	Email      string
	Now        time.Time
}

// NoticeReserveParams asks to mail a notice about EndpointID at Now
// (zero: the database clock), at most once per Interval.
type NoticeReserveParams struct {
	EndpointID string
	Interval   time.Duration
	Now        time.Time
}

// NoticeReservation is a granted NoticeReserve: SentAt is the time
// recorded, Previous the record it replaced (zero: none).
type NoticeReservation struct {
	EndpointID string
	SentAt     time.Time
	Previous   time.Time
}
