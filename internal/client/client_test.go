package client_test

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhooks/herald/internal/api"
	"github.com/heraldhooks/herald/internal/client"
	"github.com/heraldhooks/herald/internal/store/sqlitestore"
	"github.com/heraldhooks/herald/internal/store/sqlitestore/sqlitetest"
)

const testKey = "hk_client_test_key_0123456789"

// setup serves the real API over a fresh SQLite store. wrap, when given,
// sits in front of the API (to shrink pages, say).
func setup(t *testing.T, wrap func(http.Handler) http.Handler) *client.Client {
	t.Helper()
	ctx := context.Background()
	st, err := sqlitestore.Open(ctx, sqlitetest.Path(t), nil)
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	require.NoError(t, st.Migrate(ctx))
	var h http.Handler = api.New(api.Config{Store: st, APIKeyHash: sha256.Sum256([]byte(testKey))})
	if wrap != nil {
		h = wrap(h)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	c, err := client.New(srv.URL, testKey, client.Options{})
	require.NoError(t, err)
	return c
}

// smallPages caps every list page at n items (the server's default page
// too), so following next_cursor can be tested without thousands of rows.
func smallPages(n int) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			q := r.URL.Query()
			if l, err := strconv.Atoi(q.Get("limit")); err != nil || l > n {
				q.Set("limit", strconv.Itoa(n))
				r.URL.RawQuery = q.Encode()
			}
			next.ServeHTTP(w, r)
		})
	}
}

func ptr[T any](v T) *T { return &v }

func TestParseBaseURL(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in, want, err string
	}{
		{in: "http://127.0.0.1:8080", want: "http://127.0.0.1:8080"},
		{in: "127.0.0.1:8080", want: "http://127.0.0.1:8080"},
		{in: "https://herald.example.com/", want: "https://herald.example.com"},
		{in: "https://example.com/herald/", want: "https://example.com/herald"},
		{in: "", err: "empty"},
		{in: "ftp://example.com", err: "http or https"},
		{in: "http://", err: "no host"},
		{in: "http://example.com/?a=b", err: "only scheme"},
	} {
		t.Run(tc.in, func(t *testing.T) {
			t.Parallel()
			u, err := client.ParseBaseURL(tc.in)
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, u.String())
		})
	}
}

func TestEndpoints(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	t.Run("CreateGetUpdate", func(t *testing.T) {
		t.Parallel()
		c := setup(t, nil)
		ep, err := c.EndpointCreate(ctx, &client.EndpointParams{
			URL: ptr("https://example.com/hooks"), ConsumerID: ptr("c1"), Description: ptr("orders"),
			EventTypes:    []string{"order.*"},
			RetrySchedule: []client.Duration{0, client.Duration(30 * time.Second), client.Duration(5 * time.Minute)},
			Timeout:       ptr(client.Duration(5 * time.Second)),
			RateLimit:     &client.RateLimit{PerSecond: 50, Burst: 100},
			Headers:       map[string]string{"X-Team": "a"},
		})
		require.NoError(t, err)
		require.Regexp(t, `^ep_`, ep.ID)
		require.Regexp(t, `^whsec_`, ep.Secret)
		require.Equal(t, []client.Duration{0, client.Duration(30 * time.Second), client.Duration(5 * time.Minute)}, ep.RetrySchedule)
		require.Equal(t, "5s", ep.Timeout.String())
		require.JSONEq(t, string(ep.Raw), mustRaw(t, c, ep.ID))

		got, err := c.EndpointGet(ctx, ep.ID)
		require.NoError(t, err)
		require.Equal(t, ep.URL, got.URL)
		require.Equal(t, &client.RateLimit{PerSecond: 50, Burst: 100}, got.RateLimit)

		// Only what is set changes; Reset sends null (back to the default).
		up, err := c.EndpointUpdate(ctx, ep.ID, &client.EndpointParams{MaxInFlight: ptr(3), Reset: []string{"rate_limit"}})
		require.NoError(t, err)
		require.Equal(t, 3, up.MaxInFlight)
		require.Nil(t, up.RateLimit)
		require.Equal(t, "orders", up.Description)
		require.Equal(t, []string{"order.*"}, up.EventTypes)
		require.Equal(t, ep.Timeout, up.Timeout)
	})
	t.Run("FollowsPages", func(t *testing.T) {
		t.Parallel()
		c := setup(t, smallPages(2))
		var ids []string
		for range 5 {
			ep, err := c.EndpointCreate(ctx, &client.EndpointParams{URL: ptr("https://example.com/hooks")})
			require.NoError(t, err)
			ids = append(ids, ep.ID)
		}
		one, err := c.EndpointList(ctx, nil)
		require.NoError(t, err)
		require.Len(t, one.Data, 2, "one page by default")
		require.NotEmpty(t, one.NextCursor)

		all, err := c.EndpointList(ctx, &client.EndpointListParams{ListOptions: client.ListOptions{All: true}})
		require.NoError(t, err)
		require.Len(t, all.Data, 5)
		require.Len(t, all.RawData, 5)
		require.Empty(t, all.NextCursor)
		got := map[string]bool{}
		for _, ep := range all.Data {
			got[ep.ID] = true
		}
		for _, id := range ids {
			require.True(t, got[id], id)
		}

		three, err := c.EndpointList(ctx, &client.EndpointListParams{ListOptions: client.ListOptions{Limit: 3}})
		require.NoError(t, err)
		require.Len(t, three.Data, 3, "two pages, the second cut to what is left")
		require.NotEmpty(t, three.NextCursor)
		rest, err := c.EndpointList(ctx, &client.EndpointListParams{ListOptions: client.ListOptions{All: true, Cursor: three.NextCursor}})
		require.NoError(t, err)
		require.Len(t, rest.Data, 2)

		// The combined page marshals in the API's list shape.
		b, err := json.Marshal(all)
		require.NoError(t, err)
		var shape struct {
			Data       []map[string]any `json:"data"`
			NextCursor *string          `json:"next_cursor"`
		}
		require.NoError(t, json.Unmarshal(b, &shape))
		require.Len(t, shape.Data, 5)
		require.NotNil(t, shape.NextCursor)
	})
}

// mustRaw fetches the endpoint's JSON with a plain GET.
func mustRaw(t *testing.T, c *client.Client, id string) string {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, c.BaseURL()+"/v1/endpoints/"+id, nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+testKey)
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	var ep map[string]any
	require.NoError(t, json.NewDecoder(res.Body).Decode(&ep))
	// The queue's figures and score are GET one endpoint's alone: other
	// answers leave them null.
	health, ok := ep["health"].(map[string]any)
	require.True(t, ok)
	for _, k := range []string{"in_flight", "due", "dead", "score"} {
		require.Contains(t, health, k)
		health[k] = nil
	}
	raw, err := json.Marshal(ep)
	require.NoError(t, err)
	return string(raw)
}

func TestEvents(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	t.Run("PayloadKeptByteForByte", func(t *testing.T) {
		t.Parallel()
		c := setup(t, nil)
		_, err := c.EndpointCreate(ctx, &client.EndpointParams{URL: ptr("https://example.com/hooks"), ConsumerID: ptr("c1")})
		require.NoError(t, err)
		payload := `{"b": 1,   "a": [ 2, 3 ], "s": "<&>"}`
		res, err := c.EventSend(ctx, &client.EventParams{ConsumerID: "c1", EventType: "order.created", Payload: json.RawMessage(payload)})
		require.NoError(t, err)
		require.False(t, res.Duplicate)
		require.Len(t, res.Deliveries, 1)

		ev, err := c.EventGet(ctx, res.ID)
		require.NoError(t, err)
		require.Equal(t, payload, string(ev.Payload))
		require.Len(t, ev.Deliveries, 1)
		require.Equal(t, res.Deliveries[0].ID, ev.Deliveries[0].ID)
	})
	t.Run("IdempotencyKey", func(t *testing.T) {
		t.Parallel()
		c := setup(t, nil)
		p := &client.EventParams{EventType: "a.b", Payload: json.RawMessage(`{}`), IdempotencyKey: "k1"}
		first, err := c.EventSend(ctx, p)
		require.NoError(t, err)
		again, err := c.EventSend(ctx, p)
		require.NoError(t, err)
		require.True(t, again.Duplicate)
		require.Equal(t, first.ID, again.ID)
	})
	t.Run("PayloadThatIsNotJSONNeverLeaves", func(t *testing.T) {
		t.Parallel()
		c := setup(t, nil)
		// Spliced in as it is, this would set another consumer.
		_, err := c.EventSend(ctx, &client.EventParams{EventType: "a.b", Payload: json.RawMessage(`1,"consumer_id":"other"`)})
		require.ErrorContains(t, err, "not valid JSON")
		page, err := c.EventList(ctx, nil)
		require.NoError(t, err)
		require.Empty(t, page.Data)
	})
}

func TestErrors(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	t.Run("APIErrorCarriesCodeAndMessage", func(t *testing.T) {
		t.Parallel()
		c := setup(t, nil)
		_, err := c.DeliveryGet(ctx, "dlv_nope")
		var apiErr *client.Error
		require.ErrorAs(t, err, &apiErr)
		require.Equal(t, http.StatusNotFound, apiErr.StatusCode)
		require.Equal(t, "not_found", apiErr.Code)
		require.Equal(t, "not_found: "+apiErr.Message, err.Error())

		_, err = c.DeliveryList(ctx, &client.DeliveryListParams{Status: "nope"})
		require.ErrorAs(t, err, &apiErr)
		require.Equal(t, "invalid_status", apiErr.Code)
	})
	t.Run("WrongKeyIsUnauthorized", func(t *testing.T) {
		t.Parallel()
		good := setup(t, nil)
		c, err := client.New(good.BaseURL(), "wrong-key-0123456789", client.Options{})
		require.NoError(t, err)
		_, err = c.Stats(ctx)
		var apiErr *client.Error
		require.ErrorAs(t, err, &apiErr)
		require.True(t, apiErr.IsUnauthorized())
	})
	t.Run("AnswerThatIsNotHeraldsStillAnError", func(t *testing.T) {
		t.Parallel()
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "upstream down", http.StatusBadGateway)
		}))
		t.Cleanup(srv.Close)
		c, err := client.New(srv.URL, testKey, client.Options{})
		require.NoError(t, err)
		_, err = c.Stats(ctx)
		var apiErr *client.Error
		require.ErrorAs(t, err, &apiErr)
		require.Equal(t, "http_502", apiErr.Code)
		require.Contains(t, apiErr.Message, "upstream down")
	})
	t.Run("UnreachableNamesTheServer", func(t *testing.T) {
		t.Parallel()
		srv := httptest.NewServer(http.NotFoundHandler())
		srv.Close()
		c, err := client.New(srv.URL, testKey, client.Options{})
		require.NoError(t, err)
		_, err = c.Stats(ctx)
		var unreachable *client.UnreachableError
		require.ErrorAs(t, err, &unreachable)
		require.Equal(t, srv.URL, unreachable.URL)
		require.Contains(t, err.Error(), "cannot reach Herald at "+srv.URL)
	})
	t.Run("CancelledIsNotUnreachable", func(t *testing.T) {
		t.Parallel()
		c := setup(t, nil)
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		_, err := c.Stats(cctx)
		require.ErrorIs(t, err, context.Canceled)
		var unreachable *client.UnreachableError
		require.False(t, errors.As(err, &unreachable))
	})
}
