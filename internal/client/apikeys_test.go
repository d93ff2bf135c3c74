package client_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/heraldhooks/herald/internal/client"
)

func TestAPIKeys(t *testing.T) {
	t.Parallel()
	c := setup(t, smallPages(2))
	ctx := t.Context()

	op, err := c.APIKeyCreate(ctx, &client.APIKeyParams{Name: ptr("deploys"), Scope: ptr("operator")})
	require.NoError(t, err)
	require.Regexp(t, `^key_`, op.ID)
	require.Equal(t, "operator", op.Scope)
	require.Empty(t, op.ConsumerID, "null for an operator key")
	require.Regexp(t, `^hk_`, op.Key)
	require.Equal(t, op.Key[:12], op.Prefix)
	require.Contains(t, string(op.Raw), `"consumer_id":null`)

	var made []string
	for _, consumer := range []string{"c1", "c1", "c2"} {
		k, err := c.APIKeyCreate(ctx, &client.APIKeyParams{Name: ptr("for " + consumer), Scope: ptr("consumer"), ConsumerID: ptr(consumer)})
		require.NoError(t, err)
		require.Equal(t, consumer, k.ConsumerID)
		made = append(made, k.ID)
	}

	got, err := c.APIKeyGet(ctx, made[0])
	require.NoError(t, err)
	require.Equal(t, "for c1", got.Name)
	require.Empty(t, got.Key, "shown only when made")
	require.Nil(t, got.LastUsedAt)

	all, err := c.APIKeyList(ctx, &client.APIKeyListParams{ListOptions: client.ListOptions{All: true}})
	require.NoError(t, err)
	require.Len(t, all.Data, 4, "two pages of two, followed")
	// Ids made within one millisecond have no order among them.
	ofC1, err := c.APIKeyList(ctx, &client.APIKeyListParams{ConsumerID: "c1"})
	require.NoError(t, err)
	require.ElementsMatch(t, made[:2], []string{ofC1.Data[0].ID, ofC1.Data[1].ID})

	require.NoError(t, c.APIKeyRevoke(ctx, made[0]))
	_, err = c.APIKeyGet(ctx, made[0])
	var apiErr *client.Error
	require.True(t, errors.As(err, &apiErr))
	require.Equal(t, "not_found", apiErr.Code)

	_, err = c.APIKeyCreate(ctx, &client.APIKeyParams{Name: ptr("x"), Scope: ptr("consumer")})
	require.True(t, errors.As(err, &apiErr))
	require.Equal(t, "invalid_consumer_id", apiErr.Code)
	require.Error(t, c.APIKeyRevoke(ctx, " "))
	_, err = c.APIKeyCreate(ctx, nil)
	require.True(t, strings.Contains(err.Error(), "name"))
}
