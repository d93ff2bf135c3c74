package client

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"

	"github.com/heraldhooks/herald/internal/wire"
)

// EventSend sends one event (POST /v1/events). The payload is sent as its
// exact bytes; it must be valid JSON, checked here because it is spliced
// into the request as it is.
func (c *Client) EventSend(ctx context.Context, p *EventParams) (*IngestResult, error) {
	if p == nil {
		return nil, errors.New("send event: no event")
	}
	if len(p.Payload) == 0 {
		return nil, errors.New("send event: the payload is empty; it must be JSON")
	}
	if !json.Valid(p.Payload) {
		return nil, errors.New("send event: the payload is not valid JSON")
	}
	eventType := p.EventType
	head, err := marshalBody(wire.EventRequest{
		ConsumerID: nonEmpty(p.ConsumerID), EventType: &eventType, IdempotencyKey: nonEmpty(p.IdempotencyKey),
	})
	if err != nil {
		return nil, err
	}
	// encoding/json would compact a json.RawMessage; splice it in instead,
	// so the server keeps the bytes the caller gave.
	body := append(head[:len(head)-1:len(head)-1], `,"payload":`...)
	body = append(body, p.Payload...)
	body = append(body, '}')
	var out IngestResult
	if err := c.call(ctx, http.MethodPost, "/v1/events", nil, body, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// EventList lists events, newest first.
func (c *Client) EventList(ctx context.Context, p *EventListParams) (*Page[Event], error) {
	if p == nil {
		p = &EventListParams{}
	}
	q := url.Values{}
	setIf(q, "consumer_id", p.ConsumerID)
	setIf(q, "event_type", p.EventType)
	setTime(q, "since", p.Since)
	setTime(q, "until", p.Until)
	return list[Event](ctx, c, "/v1/events", q, p.ListOptions)
}

// EventGet fetches one event with its payload and deliveries.
func (c *Client) EventGet(ctx context.Context, id string) (*Event, error) {
	pid, err := pathID(id)
	if err != nil {
		return nil, err
	}
	var ev Event
	if err := c.call(ctx, http.MethodGet, "/v1/events/"+pid, nil, nil, &ev); err != nil {
		return nil, err
	}
	return &ev, nil
}

// EventReplay brings the event's terminal deliveries (of p.Status, or of
// every terminal status when "") back to pending (with p.DryRun, only
// counts them). p may be nil.
func (c *Client) EventReplay(ctx context.Context, id string, p *EventReplayParams) (*Replayed, error) {
	pid, err := pathID(id)
	if err != nil {
		return nil, err
	}
	var body []byte
	if p != nil && (p.Status != "" || p.DryRun || p.Rate != 0) {
		if body, err = marshalBody(wire.EventReplayRequest{Status: nonEmpty(p.Status), ReplayOptions: replayOptions(p.DryRun, p.Rate)}); err != nil {
			return nil, err
		}
	}
	var out Replayed
	if err := c.call(ctx, http.MethodPost, "/v1/events/"+pid+"/replay", nil, body, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
