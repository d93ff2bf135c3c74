package herald

import (
	"encoding/json"
	"time"
)

// EventTypeEntry is one entry of the event type catalog: an event type the
// operator publishes, with what it means, an example payload and,
// optionally, a JSON Schema (draft 2020-12) that every payload of the type
// must satisfy at ingest. The catalog lists what customers may subscribe
// to; a type without an entry is still accepted, unchecked.
type EventTypeEntry struct {
	// Name is the event type (ValidateEventType); names under NotifyPrefix
	// are Herald's own notifications and are built in, never stored.
	Name        string
	Description string
	// Schema is the JSON Schema as given, nil when the type has none.
	Schema json.RawMessage
	// Example is an example payload as given, nil when there is none.
	Example json.RawMessage
	// BuiltIn marks Herald's own notification types (NotificationTypes):
	// listed with the catalog, read-only.
	BuiltIn   bool
	CreatedAt time.Time
	UpdatedAt time.Time
}

// NotificationTypes lists Herald's own event types (its notifications and
// herald.test) as catalog entries, in name order: each with a description
// and an example payload, so that a customer choosing what to subscribe to
// sees them beside the operator's types.
func NotificationTypes() []EventTypeEntry {
	since := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	example := func(payload any) json.RawMessage {
		return NewNotification("cust_42", "", payload).Payload
	}
	out := []EventTypeEntry{
		{
			Name:        NotifyDeliveryDead,
			Description: "A delivery to one of your endpoints went dead: its attempts ran out, the endpoint refused it, or the endpoint was disabled.",
			Example: example(DeliveryDeadPayload{DeliveryID: "dlv_01", EventID: "evt_01", EventType: "order.created",
				EndpointID: "ep_01", ConsumerID: "cust_42", DeadReason: string(DeadExhausted), AttemptCount: 7, LastStatusCode: 500}),
		},
		{
			Name:        NotifyEndpointDisabled,
			Description: "Herald disabled one of your endpoints: it answered 410 Gone, or failed for too long.",
			Example: example(EndpointDisabledPayload{EndpointID: "ep_01", ConsumerID: "cust_42",
				URL: "https://example.com/hooks", Reason: "gone", DisabledAt: since.Add(time.Hour)}),
		},
		{
			Name:        NotifyEndpointFailing,
			Description: "One of your endpoints failed three times in a row; sent once per failure streak.",
			Example: example(EndpointFailingPayload{EndpointID: "ep_01", ConsumerID: "cust_42",
				URL: "https://example.com/hooks", ConsecutiveFailures: 3, FailingSince: since, LastStatusCode: 503}),
		},
		{
			Name:        NotifyEndpointRecovered,
			Description: "One of your endpoints that was failing delivered again.",
			Example: example(EndpointRecoveredPayload{EndpointID: "ep_01", ConsumerID: "cust_42",
				URL: "https://example.com/hooks", FailedAttempts: 3, FailingSince: since, RecoveredAt: since.Add(time.Hour)}),
		},
		{
			Name:        TestEventType,
			Description: "A test event, sent to one endpoint when you ask for it (the portal's \"Send test event\" or POST /v1/endpoints/{id}/test), whatever the endpoint subscribes to.",
			Example:     example(NewTestEventPayload("cust_42", "ep_01")),
		},
	}
	for i := range out {
		out[i].BuiltIn = true
	}
	return out
}
