package herald

import (
	"encoding/json"
	"strings"
	"time"
)

// Notifications are events Herald emits about its own deliveries, into the
// same pipeline as the operator's events, for the consumer that owns the
// endpoint: any endpoint of that consumer subscribed to "herald.*" (or to
// the exact type) receives them, signed and retried like any other event.
// They are opt-in: an endpoint subscribed to "*" does not get them.
const (
	NotifyEndpointFailing   = "herald.endpoint.failing"
	NotifyEndpointDisabled  = "herald.endpoint.disabled"
	NotifyEndpointRecovered = "herald.endpoint.recovered"
	NotifyDeliveryDead      = "herald.delivery.dead"
	// TestEventType is the type of a test event, which Herald sends to one
	// endpoint when asked (POST /v1/endpoints/{id}/test), whatever the
	// endpoint's filter, so a receiver can be tried without waiting for a
	// real event.
	TestEventType = "herald.test"
	// NotifyPrefix starts every notification type.
	NotifyPrefix = "herald."
)

// IsNotification reports whether an event type is one Herald emits. The
// outcome of a delivery of a notification never emits another
// notification, so a failing notification endpoint cannot loop.
func IsNotification(eventType string) bool {
	return strings.HasPrefix(eventType, NotifyPrefix)
}

// EndpointFailingPayload is the payload of herald.endpoint.failing, emitted
// once per failure streak, at its third consecutive failure.
type EndpointFailingPayload struct {
	EndpointID          string    `json:"endpoint_id"`
	ConsumerID          string    `json:"consumer_id"`
	URL                 string    `json:"url"`
	ConsecutiveFailures int       `json:"consecutive_failures"`
	FailingSince        time.Time `json:"failing_since"`
	LastStatusCode      int       `json:"last_status_code,omitempty"`
	LastError           string    `json:"last_error,omitempty"`
}

// EndpointDisabledPayload is the payload of herald.endpoint.disabled, emitted
// when Herald disables an endpoint itself (410 Gone, or auto-disable).
type EndpointDisabledPayload struct {
	EndpointID string    `json:"endpoint_id"`
	ConsumerID string    `json:"consumer_id"`
	URL        string    `json:"url"`
	Reason     string    `json:"reason"`
	DisabledAt time.Time `json:"disabled_at"`
}

// EndpointRecoveredPayload is the payload of herald.endpoint.recovered,
// emitted at the first success after a streak that emitted
// herald.endpoint.failing.
type EndpointRecoveredPayload struct {
	EndpointID     string    `json:"endpoint_id"`
	ConsumerID     string    `json:"consumer_id"`
	URL            string    `json:"url"`
	FailedAttempts int       `json:"failed_attempts"`
	FailingSince   time.Time `json:"failing_since"`
	RecoveredAt    time.Time `json:"recovered_at"`
}

// TestEventPayload is the payload of herald.test.
type TestEventPayload struct {
	Message    string `json:"message"`
	EndpointID string `json:"endpoint_id"`
	ConsumerID string `json:"consumer_id"`
}

// NewTestEventPayload is the payload of a test event for the endpoint id of
// consumer.
func NewTestEventPayload(consumer, id string) TestEventPayload {
	return TestEventPayload{
		Message:    "This is a test event from Herald. Verify its signature, answer 2xx, and it shows as delivered.",
		EndpointID: id, ConsumerID: consumer,
	}
}

// DeliveryDeadPayload is the payload of herald.delivery.dead.
type DeliveryDeadPayload struct {
	DeliveryID     string `json:"delivery_id"`
	EventID        string `json:"event_id"`
	EventType      string `json:"event_type"`
	EndpointID     string `json:"endpoint_id"`
	ConsumerID     string `json:"consumer_id"`
	DeadReason     string `json:"dead_reason"`
	AttemptCount   int    `json:"attempt_count"`
	LastStatusCode int    `json:"last_status_code,omitempty"`
	LastError      string `json:"last_error,omitempty"`
}

// Notification is a notification event to ingest for ConsumerID.
type Notification struct {
	ConsumerID string
	EventType  string
	Payload    []byte
}

// NewNotification encodes payload as the notification's JSON. The payload
// types above are plain structs, so encoding cannot fail.
func NewNotification(consumerID, eventType string, payload any) Notification {
	b, err := json.Marshal(payload)
	if err != nil {
		panic("herald: notification payload: " + err.Error())
	}
	return Notification{ConsumerID: consumerID, EventType: eventType, Payload: b}
}
