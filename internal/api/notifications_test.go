package api_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhooks/herald"
)

type notificationsOut struct {
	ConsumerID string     `json:"consumer_id"`
	Email      *string    `json:"email"`
	UpdatedAt  *time.Time `json:"updated_at"`
}

func TestConsumerNotifications(t *testing.T) {
	t.Parallel()

	t.Run("SetReadAndClear", func(t *testing.T) {
		t.Parallel()
		e := setup(t)
		var got notificationsOut
		e.do("GET", "/v1/consumers/cust_42/notifications", nil).must(http.StatusOK, &got)
		require.Equal(t, notificationsOut{ConsumerID: "cust_42"}, got, "never set: email and updated_at null")
		r := e.do("GET", "/v1/consumers/cust_42/notifications", nil)
		require.JSONEq(t, `{"consumer_id":"cust_42","email":null,"updated_at":null}`, string(r.body))

		e.do("PUT", "/v1/consumers/cust_42/notifications", `{"email":"ops@example.com"}`).must(http.StatusOK, &got)
		require.Equal(t, "ops@example.com", *got.Email)
		require.True(t, got.UpdatedAt.Equal(e.clock.Now()), "updated_at %v", got.UpdatedAt)
		got = notificationsOut{}
		e.do("GET", "/v1/consumers/cust_42/notifications", nil).must(http.StatusOK, &got)
		require.Equal(t, "ops@example.com", *got.Email)

		for _, clear := range []string{`{"email":null}`, `{"email":""}`} {
			e.do("PUT", "/v1/consumers/cust_42/notifications", `{"email":"ops@example.com"}`).must(http.StatusOK, nil)
			e.clock.Advance(time.Minute)
			got = notificationsOut{}
			e.do("PUT", "/v1/consumers/cust_42/notifications", clear).must(http.StatusOK, &got)
			require.Nil(t, got.Email, clear)
			require.True(t, got.UpdatedAt.Equal(e.clock.Now()), "cleared at %v", got.UpdatedAt)
			got = notificationsOut{}
			e.do("GET", "/v1/consumers/cust_42/notifications", nil).must(http.StatusOK, &got)
			require.Nil(t, got.Email, clear)
		}
	})

	t.Run("InvalidAddressChangesNothing", func(t *testing.T) {
		t.Parallel()
		e := setup(t)
		e.do("PUT", "/v1/consumers/cust_42/notifications", `{"email":"ops@example.com"}`).must(http.StatusOK, nil)
		for _, body := range []string{
			`{"email":"Ops <evil@example.com>"}`, `{"email":"a@example.com, b@example.com"}`,
			`{"email":"ops@example.com\r\nBcc: evil@example.com"}`, `{"email":"not an address"}`,
			`{"email":"` + strings.Repeat("a", 250) + `@example.com"}`, `{}`,
		} {
			msg := e.do("PUT", "/v1/consumers/cust_42/notifications", body).apiErr(http.StatusBadRequest, "invalid_email")
			require.Contains(t, msg, "email", body)
		}
		e.do("PUT", "/v1/consumers/cust_42/notifications", `{"email":1}`).apiErr(http.StatusBadRequest, "invalid_type")
		e.do("PUT", "/v1/consumers/cust_42/notifications", `{"email":"ops@example.com","cc":"x@example.com"}`).
			apiErr(http.StatusBadRequest, "unknown_field")
		var got notificationsOut
		e.do("GET", "/v1/consumers/cust_42/notifications", nil).must(http.StatusOK, &got)
		require.Equal(t, "ops@example.com", *got.Email, "nothing refused was stored")
	})

	t.Run("ConsumerKeyReachesItsOwnOnly", func(t *testing.T) {
		t.Parallel()
		e := setup(t)
		key := e.createKey("consumer", "cust_a")
		e.do("PUT", "/v1/consumers/cust_b/notifications", `{"email":"b@example.com"}`).must(http.StatusOK, nil)
		var got notificationsOut
		e.doKey(key.Key, "PUT", "/v1/consumers/cust_a/notifications", `{"email":"a@example.com"}`).must(http.StatusOK, &got)
		require.Equal(t, "a@example.com", *got.Email)
		e.doKey(key.Key, "GET", "/v1/consumers/cust_b/notifications", nil).apiErr(http.StatusNotFound, "not_found")
		e.doKey(key.Key, "PUT", "/v1/consumers/cust_b/notifications", `{"email":"evil@example.com"}`).apiErr(http.StatusNotFound, "not_found")
		e.do("GET", "/v1/consumers/cust_b/notifications", nil).must(http.StatusOK, &got)
		require.Equal(t, "b@example.com", *got.Email)
	})
}

// TestOperatorDisableNotifies: an operator's disable of an enabled
// endpoint is handed to Notify (for mail); a consumer's own disable, or
// one of an endpoint already disabled, is not.
func TestOperatorDisableNotifies(t *testing.T) {
	t.Parallel()
	var (
		mu  sync.Mutex
		got []herald.Notification
	)
	e := setup(t, func(o *options) {
		o.notify = func(n herald.Notification) { mu.Lock(); got = append(got, n); mu.Unlock() }
	})
	ep := e.createEndpoint(map[string]any{"consumer_id": "cust_a", "url": "https://a.example.com/hooks"})
	e.do("POST", "/v1/endpoints/"+ep.ID+"/disable", `{"reason":"abuse"}`).must(http.StatusOK, nil)
	e.do("POST", "/v1/endpoints/"+ep.ID+"/disable", nil).must(http.StatusOK, nil) // already disabled
	e.do("POST", "/v1/endpoints/"+ep.ID+"/enable", nil).must(http.StatusOK, nil)
	key := e.createKey("consumer", "cust_a")
	e.doKey(key.Key, "POST", "/v1/endpoints/"+ep.ID+"/disable", nil).must(http.StatusOK, nil)

	mu.Lock()
	defer mu.Unlock()
	require.Len(t, got, 1)
	require.Equal(t, herald.NotifyEndpointDisabled, got[0].EventType)
	require.Equal(t, "cust_a", got[0].ConsumerID)
	var p herald.EndpointDisabledPayload
	require.NoError(t, json.Unmarshal(got[0].Payload, &p))
	require.Equal(t, ep.ID, p.EndpointID)
	require.Equal(t, "https://a.example.com/hooks", p.URL)
	require.Equal(t, "disabled by the operator: abuse", p.Reason)
	require.True(t, p.DisabledAt.Equal(e.clock.Now()))
}
