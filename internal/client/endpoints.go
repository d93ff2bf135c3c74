package client

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"time"

	"github.com/heraldhooks/herald/internal/wire"
)

// EndpointCreate registers an endpoint (POST /v1/endpoints). Only URL is
// required; the answer holds the secret the server made.
func (c *Client) EndpointCreate(ctx context.Context, p *EndpointParams) (*Endpoint, error) {
	if p == nil || p.URL == nil {
		return nil, errors.New("create endpoint: a URL is required")
	}
	body, err := endpointBody(p)
	if err != nil {
		return nil, err
	}
	var ep Endpoint
	if err := c.call(ctx, http.MethodPost, "/v1/endpoints", nil, body, &ep); err != nil {
		return nil, err
	}
	return &ep, nil
}

// EndpointList lists endpoints, of one consumer when p.ConsumerID is set.
func (c *Client) EndpointList(ctx context.Context, p *EndpointListParams) (*Page[Endpoint], error) {
	if p == nil {
		p = &EndpointListParams{}
	}
	q := url.Values{}
	setIf(q, "consumer_id", p.ConsumerID)
	return list[Endpoint](ctx, c, "/v1/endpoints", q, p.ListOptions)
}

// EndpointGet fetches one endpoint.
func (c *Client) EndpointGet(ctx context.Context, id string) (*Endpoint, error) {
	return c.endpointCall(ctx, http.MethodGet, id, "", nil)
}

// EndpointUpdate changes the settings set in p (PATCH); the others stay.
func (c *Client) EndpointUpdate(ctx context.Context, id string, p *EndpointParams) (*Endpoint, error) {
	if p == nil {
		p = &EndpointParams{}
	}
	body, err := endpointBody(p)
	if err != nil {
		return nil, err
	}
	return c.endpointCall(ctx, http.MethodPatch, id, "", body)
}

// EndpointDelete deletes an endpoint; its live deliveries are cancelled and
// its history stays.
func (c *Client) EndpointDelete(ctx context.Context, id string) error {
	pid, err := pathID(id)
	if err != nil {
		return err
	}
	_, err = c.do(ctx, http.MethodDelete, "/v1/endpoints/"+pid, nil, nil)
	return err
}

// EndpointRotateSecret gives the endpoint a new secret (secret, or one the
// server makes when ""); the old one keeps signing for a while.
func (c *Client) EndpointRotateSecret(ctx context.Context, id, secret string) (*Endpoint, error) {
	var body []byte
	if secret != "" {
		var err error
		if body, err = marshalBody(wire.RotateSecretRequest{Secret: &secret}); err != nil {
			return nil, err
		}
	}
	return c.endpointCall(ctx, http.MethodPost, id, "/rotate-secret", body)
}

// EndpointEnable enables an endpoint.
func (c *Client) EndpointEnable(ctx context.Context, id string) (*Endpoint, error) {
	return c.endpointCall(ctx, http.MethodPost, id, "/enable", nil)
}

// EndpointDisable disables an endpoint, with an optional reason; its live
// deliveries go dead and can be replayed once it is enabled again.
func (c *Client) EndpointDisable(ctx context.Context, id, reason string) (*Endpoint, error) {
	var body []byte
	if reason != "" {
		var err error
		if body, err = marshalBody(wire.DisableRequest{Reason: &reason}); err != nil {
			return nil, err
		}
	}
	return c.endpointCall(ctx, http.MethodPost, id, "/disable", body)
}

// EndpointTest sends a test event (type herald.test) to the endpoint
// only (POST /v1/endpoints/{id}/test); the answer names the event and its
// one delivery.
func (c *Client) EndpointTest(ctx context.Context, id string) (*IngestResult, error) {
	pid, err := pathID(id)
	if err != nil {
		return nil, err
	}
	var out IngestResult
	if err := c.call(ctx, http.MethodPost, "/v1/endpoints/"+pid+"/test", nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// EndpointReplay brings the endpoint's terminal deliveries that match p
// back to pending (with p.DryRun, only counts them).
func (c *Client) EndpointReplay(ctx context.Context, id string, p *ReplayParams) (*Replayed, error) {
	pid, err := pathID(id)
	if err != nil {
		return nil, err
	}
	var req wire.EndpointReplayRequest
	if p != nil {
		req = wire.EndpointReplayRequest{Status: nonEmpty(p.Status), ReplayOptions: replayOptions(p.DryRun, p.Rate)}
		if !p.Since.IsZero() {
			req.Since = nonEmpty(p.Since.UTC().Format(time.RFC3339Nano))
		}
		if !p.Until.IsZero() {
			req.Until = nonEmpty(p.Until.UTC().Format(time.RFC3339Nano))
		}
	}
	body, err := marshalBody(req)
	if err != nil {
		return nil, err
	}
	var out Replayed
	if err := c.call(ctx, http.MethodPost, "/v1/endpoints/"+pid+"/replay", nil, body, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

func (c *Client) endpointCall(ctx context.Context, method, id, suffix string, body []byte) (*Endpoint, error) {
	pid, err := pathID(id)
	if err != nil {
		return nil, err
	}
	var ep Endpoint
	if err := c.call(ctx, method, "/v1/endpoints/"+pid+suffix, nil, body, &ep); err != nil {
		return nil, err
	}
	return &ep, nil
}

// setIf sets a query parameter when v is not empty.
func setIf(q url.Values, name, v string) {
	if v != "" {
		q.Set(name, v)
	}
}

// nonEmpty is s, or nil (left out of a request) when s is "".
func nonEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// setTime sets a query parameter to t in RFC 3339 when t is not zero.
func setTime(q url.Values, name string, t time.Time) {
	if !t.IsZero() {
		q.Set(name, t.UTC().Format(time.RFC3339Nano))
	}
}
