package client_test

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/heraldhooks/herald"
	"github.com/heraldhooks/herald/internal/client"
)

func TestEventTypes(t *testing.T) {
	t.Parallel()
	c := setup(t, smallPages(2))
	ctx := t.Context()

	made, err := c.EventTypeCreate(ctx, &client.EventTypeParams{
		Name: ptr("order.created"), Description: ptr("An order was placed."),
		Schema:  json.RawMessage(`{"type":"object","required":["order_id"]}`),
		Example: json.RawMessage(`{"order_id":"o_1"}`),
	})
	require.NoError(t, err)
	require.Equal(t, "order.created", made.Name)
	require.JSONEq(t, `{"order_id":"o_1"}`, string(made.Example))
	require.False(t, made.BuiltIn)
	require.NotNil(t, made.CreatedAt)

	_, err = c.EventTypeCreate(ctx, &client.EventTypeParams{Name: ptr("order.paid"), Schema: json.RawMessage(`{"$ref":"https://example.com/s.json"}`)})
	var apiErr *client.Error
	require.True(t, errors.As(err, &apiErr))
	require.Equal(t, "invalid_schema", apiErr.Code)

	all, err := c.EventTypeList(ctx, client.ListOptions{All: true})
	require.NoError(t, err)
	require.Len(t, all.Data, len(herald.NotificationTypes())+1, "pages of two, followed; the built-ins listed too")

	got, err := c.EventTypeGet(ctx, "order.created")
	require.NoError(t, err)
	require.Equal(t, made.EventType, got.EventType)

	upd, err := c.EventTypeUpdate(ctx, "order.created", &client.EventTypeUpdateParams{Schema: json.RawMessage("null")})
	require.NoError(t, err)
	require.Equal(t, "null", string(upd.Schema))
	require.Equal(t, "An order was placed.", upd.Description, "fields not set stay")

	require.NoError(t, c.EventTypeDelete(ctx, "order.created"))
	_, err = c.EventTypeGet(ctx, "order.created")
	require.True(t, errors.As(err, &apiErr))
	require.Equal(t, "not_found", apiErr.Code)
	_, err = c.EventTypeCreate(ctx, nil)
	require.ErrorContains(t, err, "name")
}
