package wire

import "time"

// ConsumerNotificationsRequest is the body of PUT
// /v1/consumers/{consumer_id}/notifications: the address Herald mails
// notices about the consumer's endpoints to. Email is required; null or
// "" clears it.
type ConsumerNotificationsRequest struct {
	Email *string `json:"email"`
}

// ConsumerNotifications answers GET and PUT
// /v1/consumers/{consumer_id}/notifications. Email is null when no address
// is set; UpdatedAt is null when none was ever set.
type ConsumerNotifications struct {
	ConsumerID string     `json:"consumer_id"`
	Email      *string    `json:"email"`
	UpdatedAt  *time.Time `json:"updated_at"`
}
