package api

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/heraldhooks/herald/internal/auth"
)

// TestRouteWithoutScopeRuleIsRefused: New will not mount a route whose
// scope rule is missing or does not fit its path, so no call can skip the
// decision.
func TestRouteWithoutScopeRuleIsRefused(t *testing.T) {
	t.Parallel()
	h := func(http.ResponseWriter, *http.Request) error { return nil }
	for _, tc := range []struct {
		name string
		rt   Route
		want string
	}{
		{"Undeclared", Route{"GET", "/v1/widgets", accessUndeclared, h}, "declares no scope rule"},
		{"OutOfRange", Route{"GET", "/v1/widgets", accessEnd, h}, "declares no scope rule"},
		{"PublicUnderV1", Route{"GET", "/v1/widgets", AccessPublic, h}, "public"},
		{"KeyedOutsideV1", Route{"GET", "/status", AccessOperator, h}, "public"},
		{"OwnerRuleWithoutID", Route{"GET", "/v1/widgets", AccessEndpoint, h}, "{id}"},
		{"IDWithoutOwnerRule", Route{"GET", "/v1/endpoints/{id}/widgets", AccessConsumerQuery, h}, "{id}"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := checkRoute(tc.rt)
			require.Error(t, err)
			require.Contains(t, err.Error(), tc.want)
		})
	}
	for _, rt := range (&Server{}).routes() {
		require.NoError(t, checkRoute(rt))
	}
}

// TestConsumerBody: a consumer key's body gets its consumer written in
// where it names none, keeping every other byte, so the handler judges the
// body as it was sent; another consumer anywhere is forbidden.
func TestConsumerBody(t *testing.T) {
	t.Parallel()
	p := auth.Consumer("c1", "key_1")
	for _, tc := range []struct{ name, in, want string }{
		{"Absent", `{"url":"u"}`, `{"consumer_id":"c1","url":"u"}`},
		{"AbsentFromEmpty", `{ }`, `{"consumer_id":"c1" }`},
		{"LeadingSpace", ` {"url":"u"}`, ` {"consumer_id":"c1","url":"u"}`},
		{"Null", `{"url":"u", "consumer_id": null }`, `{"url":"u", "consumer_id": "c1" }`},
		{"OwnKept", `{"consumer_id":"c1","url":"u"}`, `{"consumer_id":"c1","url":"u"}`},
		{"DuplicatesKeptForTheHandler", `{"url":"u","url":"v"}`, `{"consumer_id":"c1","url":"u","url":"v"}`},
		{"OtherSpellingOfOwnKept", `{"Consumer_ID":"c1"}`, `{"consumer_id":"c1","Consumer_ID":"c1"}`},
		{"NotAStringKept", `{"consumer_id":7}`, `{"consumer_id":7}`},
		{"EmptyKeptForTheHandler", `{"consumer_id":""}`, `{"consumer_id":""}`},
		{"NotAnObjectKept", `[1]`, `[1]`},
		{"BrokenKept", `{"url":`, `{"url":`},
		{"TrailingKept", `{} {}`, `{} {}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := httptest.NewRequest("POST", "/v1/endpoints", strings.NewReader(tc.in))
			r2, err := consumerBody(r, p)
			require.NoError(t, err)
			got, err := io.ReadAll(r2.Body)
			require.NoError(t, err)
			require.Equal(t, tc.want, string(got))
			require.Equal(t, int64(len(got)), r2.ContentLength)
		})
	}
	for _, in := range []string{
		`{"consumer_id":"c2"}`, `{"url":"u","CONSUMER_ID":"c2"}`, `{"consumer_id":"c1","consumer_id":"c2"}`,
		`{"consumer_id":"c2","consumer_id":"c1"}`, `{"consumer_id":"C1"}`,
	} {
		_, err := consumerBody(httptest.NewRequest("POST", "/v1/endpoints", strings.NewReader(in)), p)
		var ae *apiError
		require.ErrorAs(t, err, &ae, in)
		require.Equal(t, http.StatusForbidden, ae.status, in)
		require.Equal(t, "forbidden", ae.code)
	}
}
