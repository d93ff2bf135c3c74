package store

import (
	"context"
	"errors"
	"time"
)

// NoticeAddress is where a consumer is told, by e-mail, that one
// of its endpoints is failing, was disabled or let a delivery die. A
// consumer that never set an address has the zero value (Email empty,
// UpdatedAt zero); one that cleared it has Email empty and UpdatedAt set.
//
// An address is mailed notices only once confirmed: a new address is
// pending until someone who reads it opens the confirmation link Herald
// mailed there (or an operator sets it confirmed), so that no one can
// point Herald's mail at a stranger.
type NoticeAddress struct {
	ConsumerID string
	// Email is one plain address (local@domain), or empty: no mail.
	Email     string
	UpdatedAt time.Time
	// ConfirmedAt is when Email was confirmed; zero while it is pending.
	ConfirmedAt time.Time
	// ConfirmationSentAt is when the live confirmation token of Email was
	// issued (its mail sent), ConfirmationExpiresAt when that token stops
	// working; both zero when none was issued for this address.
	ConfirmationSentAt    time.Time
	ConfirmationExpiresAt time.Time
}

// Confirmed reports whether notices may be mailed to the address: there is
// one, and it was confirmed.
func (c *NoticeAddress) Confirmed() bool {
	return c.Email != "" && !c.ConfirmedAt.IsZero()
}

// Errors of NoticeAddressConfirm.
var (
	// ErrConfirmationUsed: the token confirmed its address already.
	ErrConfirmationUsed = errors.New("the confirmation link was used already")
	// ErrConfirmationExpired: the token was not used before it expired.
	ErrConfirmationExpired = errors.New("the confirmation link has expired")
)

// NoticeStore keeps the consumers' notice addresses and, per
// endpoint, when a notice was last mailed, so that every node together
// sends at most one mail per endpoint per interval.
type NoticeStore interface {
	// NoticeAddressGet returns the consumer's settings; a consumer
	// never set answers the zero settings with its id, not ErrNotFound
	// (consumers are named by the operator, not registered).
	NoticeAddressGet(ctx context.Context, consumerID string) (*NoticeAddress, error)
	// NoticeAddressSet stores p.Email (empty clears it) with
	// UpdatedAt from Now, and returns what is stored. A new address starts
	// pending (or confirmed at Now with p.Confirmed) with no confirmation
	// token; the address already stored keeps its state, its token and
	// its UpdatedAt (p.Confirmed still confirms it when pending).
	NoticeAddressSet(ctx context.Context, p *NoticeAddressSetParams) (*NoticeAddress, error)
	// NoticeAddressIssue records a confirmation token (its hash)
	// for p.Email, valid for p.TTL from Now, when the consumer's address
	// is still p.Email, is pending, and had no token issued less than
	// p.Every before Now: a conditional write, so of several nodes asking
	// at once one issues (ok), and the others, and a resend asked too
	// soon, are refused. A new token replaces the one before. It returns
	// the settings as they are after the call.
	NoticeAddressIssue(ctx context.Context, p *NoticeAddressIssueParams) (cn *NoticeAddress, ok bool, err error)
	// NoticeAddressUnissue withdraws the token of p.TokenHash
	// whose mail could not be sent (the address is pending with no token,
	// so a resend may follow at once), unless another token replaced it
	// or the address changed (then nothing changes).
	NoticeAddressUnissue(ctx context.Context, p *NoticeAddressUnissueParams) error
	// NoticeAddressConfirm confirms the consumer's address whose
	// live token has the hash p.TokenHash, at Now, and returns the
	// settings. A token of another consumer, or one replaced by a newer
	// token or a change of address, is ErrNotFound; one that confirmed
	// its address already ErrConfirmationUsed; one past its expiry
	// ErrConfirmationExpired.
	NoticeAddressConfirm(ctx context.Context, p *NoticeAddressConfirmParams) (*NoticeAddress, error)
	// NoticeReserve records that a notice about p.EndpointID is being
	// mailed at Now, unless one was recorded less than p.Interval before
	// Now: a conditional write, so of several nodes asking at once exactly
	// one gets it (ok). The reservation comes back to undo it with
	// NoticeRelease when the mail cannot be sent.
	NoticeReserve(ctx context.Context, p *NoticeReserveParams) (r NoticeReservation, ok bool, err error)
	// NoticeRelease undoes a reservation whose mail was not sent: the
	// endpoint's record goes back to what it was, unless another
	// reservation replaced it meanwhile (then nothing changes).
	NoticeRelease(ctx context.Context, p *NoticeReleaseParams) error
}

// NoticeAddressSetParams sets (or, with Email empty, clears) a
// consumer's notice address. The caller validates the address.
type NoticeAddressSetParams struct {
	ConsumerID string
	Email      string
	// Confirmed sets the address confirmed without a confirmation mail:
	// an operator's word that the address is the consumer's.
	Confirmed bool
	Now       time.Time
}

// NoticeAddressIssueParams issues a confirmation token for Email.
type NoticeAddressIssueParams struct {
	ConsumerID string
	Email      string
	// TokenHash is the SHA-256 of the token mailed (auth.Hash); the token
	// itself is never stored.
	TokenHash [32]byte
	TTL       time.Duration
	// Every is the least time between two tokens for one address.
	Every time.Duration
	Now   time.Time
}

// NoticeAddressUnissueParams withdraws the token of TokenHash.
type NoticeAddressUnissueParams struct {
	ConsumerID string
	TokenHash  [32]byte
}

// NoticeAddressConfirmParams confirms with the token of TokenHash.
type NoticeAddressConfirmParams struct {
	ConsumerID string
	TokenHash  [32]byte
	Now        time.Time
}

// NoticeReserveParams asks to mail a notice about EndpointID at Now
// (zero: the database clock), at most once per Interval.
type NoticeReserveParams struct {
	EndpointID string
	Interval   time.Duration
	Now        time.Time
}

// NoticeReleaseParams names the reservation NoticeRelease undoes.
type NoticeReleaseParams struct {
	Reservation NoticeReservation
}

// NoticeReservation is a granted NoticeReserve: SentAt is the time
// recorded, Previous the record it replaced (zero: none).
type NoticeReservation struct {
	EndpointID string
	SentAt     time.Time
	Previous   time.Time
}
