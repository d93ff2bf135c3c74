package cli_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestNoticeAddress(t *testing.T) {
	t.Parallel()
	e := setupAPI(t)
	r := e.exec("", "consumers", "notifications", "get", "cust_42")
	require.NoError(t, r.e, r.err)
	require.Equal(t, "cust_42", field(t, r.out, "consumer"))
	require.Equal(t, "(none: no mail)", field(t, r.out, "email"))
	require.Equal(t, "never", field(t, r.out, "updated"))

	r = e.exec("", "consumers", "notifications", "set", "cust_42", "--email", "ops@example.com")
	require.NoError(t, r.e, r.err)
	require.Equal(t, "ops@example.com", field(t, r.out, "email"))
	// This server sends no mail: the address waits, and the output says why.
	require.Equal(t, "pending", field(t, r.out, "status"))
	require.Equal(t, "no (the server has no --smtp-url)", field(t, r.out, "mail"))
	require.Contains(t, field(t, r.out, "detail"), "Mail is not configured on this server")
	r = e.exec("", "consumers", "notifications", "confirm", "cust_42", "--token", "not-the-token")
	require.ErrorContains(t, r.e, "invalid_token")
	r = e.exec("", "consumers", "notifications", "confirm", "cust_42")
	require.ErrorContains(t, r.e, "--token is required")
	// The operator vouches for it.
	r = e.exec("", "consumers", "notifications", "set", "cust_42", "--email", "ops@example.com", "--confirmed")
	require.NoError(t, r.e, r.err)
	require.Equal(t, "confirmed", field(t, r.out, "status"))
	require.NotEmpty(t, field(t, r.out, "confirmed"))
	r = e.exec("", "consumers", "notifications", "get", "cust_42", "--json")
	require.NoError(t, r.e, r.err)
	require.Regexp(t, `"email":\s*"ops@example.com"`, r.out)

	r = e.exec("", "consumers", "notifications", "set", "cust_42", "--email", "Ops <ops@example.com>")
	require.ErrorContains(t, r.e, "invalid_email")
	r = e.exec("", "consumers", "notifications", "set", "cust_42")
	require.ErrorContains(t, r.e, "--email is required")

	r = e.exec("", "consumers", "notifications", "set", "cust_42", "--email", "")
	require.NoError(t, r.e, r.err)
	require.Equal(t, "(none: no mail)", field(t, r.out, "email"))
	require.NotEqual(t, "never", field(t, r.out, "updated"))

	// A consumer key reaches its own consumer only.
	k := e.exec("", "keys", "create", "--name", "c", "--scope", "consumer", "--consumer", "cust_42", "-q")
	require.NoError(t, k.e, k.err)
	key := strings.TrimSpace(k.out)
	own := e.withKey(key, "consumers", "notifications", "set", "cust_42", "--email", "me@example.com")
	require.NoError(t, own.e, own.err)
	require.Equal(t, "pending", field(t, own.out, "status"))
	vouch := e.withKey(key, "consumers", "notifications", "set", "cust_42", "--email", "me@example.com", "--confirmed")
	require.ErrorContains(t, vouch.e, "forbidden")
	other := e.withKey(key, "consumers", "notifications", "get", "cust_7")
	require.ErrorContains(t, other.e, "not_found")
}
