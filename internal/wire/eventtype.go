package wire

import (
	"encoding/json"
	"time"
)

// EventTypeRequest is the body of POST /v1/event-types. Schema and Example
// are any JSON (a schema is an object or a boolean); absent or null means
// none.
type EventTypeRequest struct {
	Name        *string         `json:"name,omitempty"`
	Description *string         `json:"description,omitempty"`
	Schema      json.RawMessage `json:"schema,omitempty"`
	Example     json.RawMessage `json:"example,omitempty"`
}

// EventTypeUpdateRequest is the body of PATCH /v1/event-types/{name}: the
// fields given replace the entry's; null removes a schema or an example.
type EventTypeUpdateRequest struct {
	Description *string         `json:"description,omitempty"`
	Schema      json.RawMessage `json:"schema,omitempty"`
	Example     json.RawMessage `json:"example,omitempty"`
}

// EventType is an entry of the event type catalog in an answer. Schema and
// Example are null when the entry has none. BuiltIn marks Herald's own
// herald.* notification types, which are read-only and have no times
// (null).
type EventType struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Schema      json.RawMessage `json:"schema"`
	Example     json.RawMessage `json:"example"`
	BuiltIn     bool            `json:"built_in"`
	CreatedAt   *time.Time      `json:"created_at"`
	UpdatedAt   *time.Time      `json:"updated_at"`
}
