package wire

import "time"

// NoticeAddressRequest is the body of PUT
// /v1/consumers/{consumer_id}/notifications: the address Herald mails
// notices about the consumer's endpoints to. Email is required; null or
// "" clears it. Confirmed true (operator keys only) sets the address
// confirmed without a confirmation mail.
type NoticeAddressRequest struct {
	Email     *string `json:"email"`
	Confirmed *bool   `json:"confirmed,omitempty"`
}

// Statuses of a notice address.
const (
	// NoticeAddressPending: the address waits for its confirmation;
	// nothing is mailed to it.
	NoticeAddressPending = "pending"
	// NoticeAddressConfirmed: notices are mailed to the address.
	NoticeAddressConfirmed = "confirmed"
)

// NoticeAddress answers GET and PUT
// /v1/consumers/{consumer_id}/notifications. Email is null when no address
// is set; UpdatedAt is null when none was ever set. Status is pending or
// confirmed (null without an address); the confirmation times are null
// when they have not happened. MailEnabled says whether this server mails
// at all (--smtp-url), and Detail says in a sentence where the address
// stands and what comes next.
type NoticeAddress struct {
	ConsumerID            string     `json:"consumer_id"`
	Email                 *string    `json:"email"`
	UpdatedAt             *time.Time `json:"updated_at"`
	Status                *string    `json:"status"`
	ConfirmedAt           *time.Time `json:"confirmed_at"`
	ConfirmationSentAt    *time.Time `json:"confirmation_sent_at"`
	ConfirmationExpiresAt *time.Time `json:"confirmation_expires_at"`
	MailEnabled           bool       `json:"mail_enabled"`
	Detail                string     `json:"detail"`
}

// NoticeAddressConfirmRequest is the body of POST
// /v1/consumers/{consumer_id}/notifications/confirm: the token of the
// confirmation link mailed to the address.
type NoticeAddressConfirmRequest struct {
	Token string `json:"token"`
}
