package api

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
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
