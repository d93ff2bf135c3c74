package client

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/heraldhooks/herald/internal/wire"
)

// FilterTest is the answer of POST /v1/endpoints/{id}/filter-test.
type FilterTest struct {
	wire.FilterTestAnswer
	// Raw is the answer's JSON as the server sent it.
	Raw json.RawMessage `json:"-"`
}

func (f *FilterTest) setRaw(b json.RawMessage) { f.Raw = b }

// EndpointFilterTest runs a filter (the endpoint's own when filter is nil)
// over the last 100 events of the endpoint's consumer, newest first, and
// says which would pass.
func (c *Client) EndpointFilterTest(ctx context.Context, id string, filter *string) (*FilterTest, error) {
	pid, err := pathID(id)
	if err != nil {
		return nil, err
	}
	body, err := marshalBody(wire.FilterTestRequest{Filter: filter})
	if err != nil {
		return nil, err
	}
	var out FilterTest
	if err := c.call(ctx, http.MethodPost, "/v1/endpoints/"+pid+"/filter-test", nil, body, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
