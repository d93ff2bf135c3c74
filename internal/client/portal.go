package client

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"time"

	"github.com/heraldhooks/herald/internal/wire"
)

// PortalLink is a one-time link to the consumer portal.
type PortalLink struct {
	wire.PortalSession
	// Raw is the link's JSON as the server sent it.
	Raw json.RawMessage `json:"-"`
}

func (l *PortalLink) setRaw(b json.RawMessage) { l.Raw = b }

// PortalSessionCreate makes a one-time portal link for consumer (POST
// /v1/consumers/{consumer_id}/portal-sessions, operator keys only). ttl is
// how long the link opens; zero leaves the server's default (15m).
func (c *Client) PortalSessionCreate(ctx context.Context, consumer string, ttl time.Duration) (*PortalLink, error) {
	var body []byte
	if ttl != 0 {
		var err error
		text := ttl.String()
		if body, err = marshalBody(wire.PortalSessionRequest{TTL: &text}); err != nil {
			return nil, err
		}
	}
	var l PortalLink
	if err := c.call(ctx, http.MethodPost, "/v1/consumers/"+url.PathEscape(consumer)+"/portal-sessions", nil, body, &l); err != nil {
		return nil, err
	}
	return &l, nil
}

// PortalSessionRevoke ends every portal link and session of consumer at
// once and returns how many there were.
func (c *Client) PortalSessionRevoke(ctx context.Context, consumer string) (int, error) {
	raw, err := c.do(ctx, http.MethodDelete, "/v1/consumers/"+url.PathEscape(consumer)+"/portal-sessions", nil, nil)
	if err != nil {
		return 0, err
	}
	var out wire.PortalRevoked
	if err := json.Unmarshal(raw, &out); err != nil {
		return 0, err
	}
	return out.Revoked, nil
}
