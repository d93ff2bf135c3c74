package client

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/heraldhooks/herald/internal/wire"
)

// EventType is an entry of the event type catalog as the API shows it.
// Schema and Example are JSON null when the entry has none; BuiltIn marks
// Herald's own herald.* notification types.
type EventType struct {
	wire.EventType
	// Raw is the entry's JSON as the server sent it.
	Raw json.RawMessage `json:"-"`
}

func (e *EventType) setRaw(b json.RawMessage) { e.Raw = b }

// EventTypeParams is the body of EventTypeCreate.
type EventTypeParams = wire.EventTypeRequest

// EventTypeUpdateParams is the body of EventTypeUpdate: the fields set
// change; a Schema or Example of JSON null removes it.
type EventTypeUpdateParams = wire.EventTypeUpdateRequest

// EventTypeCreate adds an event type to the catalog (POST /v1/event-types,
// operator keys only).
func (c *Client) EventTypeCreate(ctx context.Context, p *EventTypeParams) (*EventType, error) {
	if p == nil || p.Name == nil {
		return nil, errors.New("create event type: a name is required")
	}
	body, err := marshalBody(p)
	if err != nil {
		return nil, err
	}
	var e EventType
	if err := c.call(ctx, http.MethodPost, "/v1/event-types", nil, body, &e); err != nil {
		return nil, err
	}
	return &e, nil
}

// EventTypeList lists the catalog in name order, Herald's own types among
// the operator's.
func (c *Client) EventTypeList(ctx context.Context, opts ListOptions) (*Page[EventType], error) {
	return list[EventType](ctx, c, "/v1/event-types", nil, opts)
}

// EventTypeGet fetches one entry of the catalog.
func (c *Client) EventTypeGet(ctx context.Context, name string) (*EventType, error) {
	pn, err := pathID(name)
	if err != nil {
		return nil, err
	}
	var e EventType
	if err := c.call(ctx, http.MethodGet, "/v1/event-types/"+pn, nil, nil, &e); err != nil {
		return nil, err
	}
	return &e, nil
}

// EventTypeUpdate changes the fields of p set on the entry named name.
func (c *Client) EventTypeUpdate(ctx context.Context, name string, p *EventTypeUpdateParams) (*EventType, error) {
	pn, err := pathID(name)
	if err != nil {
		return nil, err
	}
	if p == nil {
		p = &EventTypeUpdateParams{}
	}
	body, err := marshalBody(p)
	if err != nil {
		return nil, err
	}
	var e EventType
	if err := c.call(ctx, http.MethodPatch, "/v1/event-types/"+pn, nil, body, &e); err != nil {
		return nil, err
	}
	return &e, nil
}

// EventTypeDelete removes an entry from the catalog; events of the type
// are accepted unchecked from then on.
func (c *Client) EventTypeDelete(ctx context.Context, name string) error {
	pn, err := pathID(name)
	if err != nil {
		return err
	}
	_, err = c.do(ctx, http.MethodDelete, "/v1/event-types/"+pn, nil, nil)
	return err
}
