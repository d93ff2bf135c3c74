package cli_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestPortal(t *testing.T) {
	t.Parallel()

	t.Run("LinkAndRevoke", func(t *testing.T) {
		t.Parallel()
		e := setupAPI(t)
		r := e.exec("", "portal", "link", "--consumer", "cust_42", "--ttl", "1h")
		require.NoError(t, r.e, r.err)
		require.Regexp(t, `^`+strings.ReplaceAll(e.url, ".", `\.`)+`/portal/[A-Za-z0-9_-]{43}$`, field(t, r.out, "url"))
		require.NotEmpty(t, field(t, r.out, "expires"))

		q := e.exec("", "portal", "link", "--consumer", "cust_42", "-q")
		require.NoError(t, q.e, q.err)
		require.Len(t, lines(q.out), 1)
		require.True(t, strings.HasPrefix(q.out, e.url+"/portal/"), q.out)

		rv := e.exec("", "portal", "revoke", "--consumer", "cust_42")
		require.NoError(t, rv.e, rv.err)
		require.Equal(t, "ended 2 portal links and sessions of cust_42\n", rv.out)
	})

	t.Run("Refusals", func(t *testing.T) {
		t.Parallel()
		e := setupAPI(t)
		r := e.exec("", "portal", "link")
		require.ErrorContains(t, r.e, "--consumer is required")
		r = e.exec("", "portal", "link", "--consumer", "cust_42", "--ttl", "10s")
		require.ErrorContains(t, r.e, "invalid_ttl")

		k := e.exec("", "keys", "create", "--name", "c", "--scope", "consumer", "--consumer", "cust_42", "-q")
		require.NoError(t, k.e, k.err)
		denied := e.withKey(strings.TrimSpace(k.out), "portal", "link", "--consumer", "cust_42")
		require.ErrorContains(t, denied.e, "forbidden")
		denied = e.withKey(strings.TrimSpace(k.out), "portal", "revoke", "--consumer", "cust_42")
		require.ErrorContains(t, denied.e, "forbidden")
	})
}
