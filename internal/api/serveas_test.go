package api_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/heraldhooks/herald/internal/api"
	"github.com/heraldhooks/herald/internal/auth"
	"github.com/heraldhooks/herald/internal/clock"
	"github.com/heraldhooks/herald/internal/store/sqlitestore"
	"github.com/heraldhooks/herald/internal/store/sqlitestore/sqlitetest"
)

func TestCall(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, err := sqlitestore.Open(ctx, sqlitetest.Path(t), nil)
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	require.NoError(t, st.Migrate(ctx))
	srv := api.New(api.Config{
		Store: st, Clock: clock.NewTest(start), APIKeyHash: sha256.Sum256([]byte(testKey)), AllowPrivateNetworks: true,
	})

	t.Run("OperatorActsWithoutAKey", func(t *testing.T) {
		t.Parallel()
		var ep struct {
			ID         string `json:"id"`
			ConsumerID string `json:"consumer_id"`
		}
		err := srv.Call(ctx, auth.Operator(""), http.MethodPost, "/v1/endpoints",
			map[string]any{"consumer_id": "acme", "url": "http://127.0.0.1:9/hook"}, &ep)
		require.NoError(t, err)
		require.NotEmpty(t, ep.ID)
		require.Equal(t, "acme", ep.ConsumerID)

		var got struct {
			ID string `json:"id"`
		}
		require.NoError(t, srv.Call(ctx, auth.Operator(""), http.MethodGet, "/v1/endpoints/"+ep.ID, nil, &got))
		require.Equal(t, ep.ID, got.ID)

		// Another consumer's principal meets the API's scope rule: 404.
		err = srv.Call(ctx, auth.Consumer("globex", ""), http.MethodGet, "/v1/endpoints/"+ep.ID, nil, &got)
		var ce *api.CallError
		require.True(t, errors.As(err, &ce), "err: %v", err)
		require.Equal(t, http.StatusNotFound, ce.Status)
		require.Equal(t, "not_found", ce.Code)
	})

	t.Run("ErrorsCarryTheAPIsCode", func(t *testing.T) {
		t.Parallel()
		err := srv.Call(ctx, auth.Operator(""), http.MethodPost, "/v1/endpoints", map[string]any{"url": "nope"}, nil)
		var ce *api.CallError
		require.True(t, errors.As(err, &ce), "err: %v", err)
		require.Equal(t, http.StatusBadRequest, ce.Status)
		require.NotEmpty(t, ce.Message)
	})

	t.Run("UnknownPathIs404", func(t *testing.T) {
		t.Parallel()
		err := srv.Call(ctx, auth.Operator(""), http.MethodGet, "/v1/nothing-here", nil, nil)
		var ce *api.CallError
		require.True(t, errors.As(err, &ce))
		require.Equal(t, http.StatusNotFound, ce.Status)
	})

	t.Run("AuthenticateNamesTheOperator", func(t *testing.T) {
		t.Parallel()
		p, err := srv.Authenticate(ctx, testKey)
		require.NoError(t, err)
		require.True(t, p.IsOperator())
		_, err = srv.Authenticate(ctx, "hk_wrong")
		require.ErrorIs(t, err, auth.ErrInvalidKey)
	})
}
