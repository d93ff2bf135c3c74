package client

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"

	"github.com/heraldhooks/herald/internal/wire"
)

// NoticeAddress is where a consumer's notices are mailed.
type NoticeAddress struct {
	wire.NoticeAddress
	// Raw is the answer's JSON as the server sent it.
	Raw json.RawMessage `json:"-"`
}

func (n *NoticeAddress) setRaw(b json.RawMessage) { n.Raw = b }

// NoticeAddressGet reads consumer's notice address (GET
// /v1/consumers/{consumer_id}/notifications).
func (c *Client) NoticeAddressGet(ctx context.Context, consumer string) (*NoticeAddress, error) {
	var out NoticeAddress
	if err := c.call(ctx, http.MethodGet, noticeAddressPath(consumer), nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// NoticeAddressSet sets consumer's notice address; "" clears
// it (PUT /v1/consumers/{consumer_id}/notifications). A new address is
// pending and mailed a confirmation link; confirmed (operator keys only)
// sets it confirmed at once.
func (c *Client) NoticeAddressSet(ctx context.Context, consumer, email string, confirmed bool) (*NoticeAddress, error) {
	req := wire.NoticeAddressRequest{Email: &email}
	if confirmed {
		req.Confirmed = &confirmed
	}
	body, err := marshalBody(req)
	if err != nil {
		return nil, err
	}
	var out NoticeAddress
	if err := c.call(ctx, http.MethodPut, noticeAddressPath(consumer), nil, body, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// NoticeAddressConfirm confirms consumer's pending address with
// the token of the link mailed to it (POST
// /v1/consumers/{consumer_id}/notifications/confirm).
func (c *Client) NoticeAddressConfirm(ctx context.Context, consumer, token string) (*NoticeAddress, error) {
	body, err := marshalBody(wire.NoticeAddressConfirmRequest{Token: token})
	if err != nil {
		return nil, err
	}
	var out NoticeAddress
	if err := c.call(ctx, http.MethodPost, noticeAddressPath(consumer)+"/confirm", nil, body, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

func noticeAddressPath(consumer string) string {
	return "/v1/consumers/" + url.PathEscape(consumer) + "/notifications"
}
