package web_test

import (
	"net/http"
	"net/url"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/heraldhooks/herald/internal/store"
)

// TestDashboardDeadLeaseLost: a delivery whose lease was lost too often
// (store.LeaseLossesEnd) is in the dead-letter queue with reason
// lease_lost, through the API and on the dashboard's dead letters, with
// what the reason means, and a replay brings it back.
func TestDashboardDeadLeaseLost(t *testing.T) {
	t.Parallel()
	e := setupUI(t)
	c := e.browser(t)
	csrf := e.signIn(t, c, operatorKey)
	op := e.srv.Client()
	json := map[string]string{"Content-Type": "application/json"}
	a := call(t, op, http.MethodPost, e.srv.URL+"/v1/endpoints", operatorKey, `{"consumer_id":"cust_42","url":"http://127.0.0.1:9/hook"}`, json)
	require.Equal(t, http.StatusCreated, a.status, a.body)
	a = call(t, op, http.MethodPost, e.srv.URL+"/v1/events", operatorKey, `{"consumer_id":"cust_42","event_type":"order.created","payload":{}}`, json)
	require.Equal(t, http.StatusAccepted, a.status, a.body)
	dlv := regexp.MustCompile(`"id":"(dlv_[^"]+)"`).FindStringSubmatch(a.body)[1]

	// Two nodes take it and die before writing an outcome; the claim that
	// finds the second lease lost ends it.
	now := e.clock.Now()
	for range 3 {
		got, err := e.st.DeliveryClaim(t.Context(), &store.DeliveryClaimParams{Limit: 10, Now: now, MaxLeaseLosses: 2})
		require.NoError(t, err)
		if len(got) == 0 {
			break
		}
		now = got[0].LeaseExpiresAt
	}

	a = call(t, op, http.MethodGet, e.srv.URL+"/v1/deliveries?status=dead", operatorKey, "", nil)
	require.Equal(t, http.StatusOK, a.status, a.body)
	require.Contains(t, a.body, `"id":"`+dlv+`"`)
	require.Contains(t, a.body, `"dead_reason":"lease_lost"`)

	a = call(t, c, http.MethodGet, e.srv.URL+"/ui/dead", "", "", nil)
	require.Equal(t, http.StatusOK, a.status)
	require.Contains(t, a.body, dlv)
	require.Regexp(t, `<span class="badge dead" title="Its lease was lost [^"]+">lease_lost</span>`, a.body)
	require.Contains(t, a.body, `formaction="/ui/deliveries/`+dlv+`/replay"`)

	a = form(t, c, e.srv.URL+"/ui/deliveries/"+dlv+"/replay", url.Values{"csrf_token": {csrf}}, nil)
	require.Equal(t, http.StatusSeeOther, a.status)
	a = call(t, op, http.MethodGet, e.srv.URL+"/v1/deliveries/"+dlv, operatorKey, "", nil)
	require.Contains(t, a.body, `"status":"pending"`)
	require.Contains(t, a.body, `"dead_reason":null`)
}
