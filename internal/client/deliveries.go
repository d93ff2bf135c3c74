package client

import (
	"context"
	"net/http"
	"net/url"
)

// DeliveryList lists deliveries, newest first.
func (c *Client) DeliveryList(ctx context.Context, p *DeliveryListParams) (*Page[Delivery], error) {
	if p == nil {
		p = &DeliveryListParams{}
	}
	q := url.Values{}
	setIf(q, "status", p.Status)
	setIf(q, "endpoint_id", p.EndpointID)
	setIf(q, "consumer_id", p.ConsumerID)
	setIf(q, "event_id", p.EventID)
	return list[Delivery](ctx, c, "/v1/deliveries", q, p.ListOptions)
}

// DeliveryGet fetches one delivery.
func (c *Client) DeliveryGet(ctx context.Context, id string) (*Delivery, error) {
	return c.deliveryCall(ctx, http.MethodGet, id, "")
}

// DeliveryAttempts lists a delivery's attempts, oldest first.
func (c *Client) DeliveryAttempts(ctx context.Context, id string, opts ListOptions) (*Page[Attempt], error) {
	pid, err := pathID(id)
	if err != nil {
		return nil, err
	}
	return list[Attempt](ctx, c, "/v1/deliveries/"+pid+"/attempts", nil, opts)
}

// DeliveryReplay brings a terminal delivery back to pending, due now, with
// a fresh attempt budget.
func (c *Client) DeliveryReplay(ctx context.Context, id string) (*Delivery, error) {
	return c.deliveryCall(ctx, http.MethodPost, id, "/replay")
}

// DeliveryCancel cancels a pending or delivering delivery.
func (c *Client) DeliveryCancel(ctx context.Context, id string) (*Delivery, error) {
	return c.deliveryCall(ctx, http.MethodPost, id, "/cancel")
}

func (c *Client) deliveryCall(ctx context.Context, method, id, suffix string) (*Delivery, error) {
	pid, err := pathID(id)
	if err != nil {
		return nil, err
	}
	var d Delivery
	if err := c.call(ctx, method, "/v1/deliveries/"+pid+suffix, nil, nil, &d); err != nil {
		return nil, err
	}
	return &d, nil
}

// StatsSeries fetches the activity of the last hour ("1h", 60 points of a
// minute) or day ("24h", 96 points of 15 minutes): GET /v1/stats/series.
func (c *Client) StatsSeries(ctx context.Context, window string) (*StatsSeries, error) {
	var s StatsSeries
	if err := c.call(ctx, http.MethodGet, "/v1/stats/series", url.Values{"window": {window}}, nil, &s); err != nil {
		return nil, err
	}
	return &s, nil
}

// Stats fetches delivery counts and queue depths.
func (c *Client) Stats(ctx context.Context) (*Stats, error) {
	var s Stats
	if err := c.call(ctx, http.MethodGet, "/v1/stats", nil, nil, &s); err != nil {
		return nil, err
	}
	return &s, nil
}
