package client

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"

	"github.com/heraldhooks/herald/internal/wire"
)

// APIKey is an API key as the API shows it. Key, the key itself, is set
// only in the answer of APIKeyCreate: the server shows it that once.
// ConsumerID is "" for an operator key (null in the answer).
type APIKey struct {
	wire.APIKey
	// Raw is the key's JSON as the server sent it.
	Raw json.RawMessage `json:"-"`
}

func (k *APIKey) setRaw(b json.RawMessage) { k.Raw = b }

// APIKeyParams is the body of APIKeyCreate. ConsumerID is required for a
// consumer key and must be nil for an operator key.
type APIKeyParams = wire.APIKeyRequest

// APIKeyListParams filters APIKeyList: one consumer's keys when ConsumerID
// is set.
type APIKeyListParams struct {
	ConsumerID string
	ListOptions
}

// APIKeyCreate makes an API key (POST /v1/api-keys, operator keys only).
// The answer's Key is the only copy of the key the server ever shows.
func (c *Client) APIKeyCreate(ctx context.Context, p *APIKeyParams) (*APIKey, error) {
	if p == nil {
		return nil, errors.New("create API key: a name and a scope are required")
	}
	body, err := marshalBody(p)
	if err != nil {
		return nil, err
	}
	var k APIKey
	if err := c.call(ctx, http.MethodPost, "/v1/api-keys", nil, body, &k); err != nil {
		return nil, err
	}
	return &k, nil
}

// APIKeyList lists API keys, newest first, without the keys themselves.
func (c *Client) APIKeyList(ctx context.Context, p *APIKeyListParams) (*Page[APIKey], error) {
	if p == nil {
		p = &APIKeyListParams{}
	}
	q := url.Values{}
	setIf(q, "consumer_id", p.ConsumerID)
	return list[APIKey](ctx, c, "/v1/api-keys", q, p.ListOptions)
}

// APIKeyGet fetches one API key (not the key itself).
func (c *Client) APIKeyGet(ctx context.Context, id string) (*APIKey, error) {
	pid, err := pathID(id)
	if err != nil {
		return nil, err
	}
	var k APIKey
	if err := c.call(ctx, http.MethodGet, "/v1/api-keys/"+pid, nil, nil, &k); err != nil {
		return nil, err
	}
	return &k, nil
}

// APIKeyRevoke revokes an API key: it authenticates nothing from then on.
func (c *Client) APIKeyRevoke(ctx context.Context, id string) error {
	pid, err := pathID(id)
	if err != nil {
		return err
	}
	_, err = c.do(ctx, http.MethodDelete, "/v1/api-keys/"+pid, nil, nil)
	return err
}
