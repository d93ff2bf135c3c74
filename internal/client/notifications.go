package client

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"

	"github.com/heraldhooks/herald/internal/wire"
)

// ConsumerNotifications is where a consumer's notices are mailed.
type ConsumerNotifications struct {
	wire.ConsumerNotifications
	// Raw is the answer's JSON as the server sent it.
	Raw json.RawMessage `json:"-"`
}

func (n *ConsumerNotifications) setRaw(b json.RawMessage) { n.Raw = b }

// ConsumerNotificationsGet reads consumer's notification address (GET
// /v1/consumers/{consumer_id}/notifications).
func (c *Client) ConsumerNotificationsGet(ctx context.Context, consumer string) (*ConsumerNotifications, error) {
	var out ConsumerNotifications
	if err := c.call(ctx, http.MethodGet, notificationsPath(consumer), nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ConsumerNotificationsSet sets consumer's notification address; "" clears
// it (PUT /v1/consumers/{consumer_id}/notifications). A new address is
// pending and mailed a confirmation link; confirmed (operator keys only)
// sets it confirmed at once.
func (c *Client) ConsumerNotificationsSet(ctx context.Context, consumer, email string, confirmed bool) (*ConsumerNotifications, error) {
	req := wire.ConsumerNotificationsRequest{Email: &email}
	if confirmed {
		req.Confirmed = &confirmed
	}
	body, err := marshalBody(req)
	if err != nil {
		return nil, err
	}
	var out ConsumerNotifications
	if err := c.call(ctx, http.MethodPut, notificationsPath(consumer), nil, body, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ConsumerNotificationsConfirm confirms consumer's pending address with
// the token of the link mailed to it (POST
// /v1/consumers/{consumer_id}/notifications/confirm).
func (c *Client) ConsumerNotificationsConfirm(ctx context.Context, consumer, token string) (*ConsumerNotifications, error) {
	body, err := marshalBody(wire.ConfirmNotificationsRequest{Token: token})
	if err != nil {
		return nil, err
	}
	var out ConsumerNotifications
	if err := c.call(ctx, http.MethodPost, notificationsPath(consumer)+"/confirm", nil, body, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

func notificationsPath(consumer string) string {
	return "/v1/consumers/" + url.PathEscape(consumer) + "/notifications"
}
