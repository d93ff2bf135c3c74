package cli_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// apiKeyJSON is the part of an API key answer the tests read.
type apiKeyJSON struct {
	ID         string  `json:"id"`
	Name       string  `json:"name"`
	Scope      string  `json:"scope"`
	ConsumerID *string `json:"consumer_id"`
	Key        string  `json:"key"`
	Prefix     string  `json:"prefix"`
	LastUsedAt *string `json:"last_used_at"`
}

// withKey runs herald with HERALD_API_KEY set to key instead of the
// operator key.
func (e *apiEnv) withKey(key string, args ...string) result {
	e.t.Helper()
	other := &apiEnv{t: e.t, url: e.url, store: e.store, env: map[string]string{"HERALD_SERVER": e.url, "HERALD_API_KEY": key}}
	return other.exec("", args...)
}

func TestKeysCreate(t *testing.T) {
	t.Parallel()

	t.Run("ShowsTheKeyOnceAndItWorks", func(t *testing.T) {
		t.Parallel()
		e := setupAPI(t)
		r := e.exec("", "keys", "create", "--name", "cust_42 integration", "--scope", "consumer", "--consumer", "cust_42")
		require.NoError(t, r.e, r.err)
		require.Regexp(t, `^key_[0-9a-z]{26}$`, field(t, r.out, "id"))
		require.Equal(t, "cust_42 integration", field(t, r.out, "name"))
		require.Equal(t, "consumer", field(t, r.out, "scope"))
		require.Equal(t, "cust_42", field(t, r.out, "consumer"))
		key := field(t, r.out, "key")
		require.Regexp(t, `^hk_[A-Za-z0-9_-]{43}$`, key)
		require.Equal(t, key[:12], field(t, r.out, "prefix"))
		require.Equal(t, "-", field(t, r.out, "last used"))
		require.Contains(t, r.err, "shown only now")

		// The key reaches its consumer's data, and only that.
		e.createEndpoint("--consumer", "cust_42")
		other := e.createEndpoint("--consumer", "cust_7")
		used := e.withKey(key, "endpoints", "list", "-q")
		require.NoError(t, used.e, used.err)
		require.Len(t, lines(used.out), 1)
		require.NotContains(t, used.out, other)
		made := e.withKey(key, "endpoints", "create", "--url", "https://example.com/mine", "-q")
		require.NoError(t, made.e, made.err)
		var ep endpointJSON
		e.runJSON(&ep, "endpoints", "get", strings.TrimSpace(made.out))
		require.Equal(t, "cust_42", ep.ConsumerID, "a consumer key's endpoint is its consumer's")
		denied := e.withKey(key, "endpoints", "get", other)
		require.ErrorContains(t, denied.e, "not_found")
		denied = e.withKey(key, "events", "send", "--type", "a", "--payload", "{}")
		require.ErrorContains(t, denied.e, "forbidden")
	})

	t.Run("QuietPrintsTheKey", func(t *testing.T) {
		t.Parallel()
		e := setupAPI(t)
		key := strings.TrimSpace(e.run("keys", "create", "--name", "deploys", "--scope", "operator", "-q"))
		require.Regexp(t, `^hk_[A-Za-z0-9_-]{43}$`, key)
		r := e.withKey(key, "keys", "list", "-q")
		require.NoError(t, r.e, "an operator key made here may list keys: %s", r.err)
		require.Len(t, lines(r.out), 1)
	})

	t.Run("JSONIsTheAPIAnswer", func(t *testing.T) {
		t.Parallel()
		e := setupAPI(t)
		var k apiKeyJSON
		e.runJSON(&k, "keys", "create", "--name", "deploys", "--scope", "operator")
		require.Regexp(t, `^key_`, k.ID)
		require.Equal(t, "operator", k.Scope)
		require.Nil(t, k.ConsumerID)
		require.Regexp(t, `^hk_`, k.Key)
		require.Equal(t, k.Key[:12], k.Prefix)
	})

	t.Run("FlagsCheckedBeforeAnyCall", func(t *testing.T) {
		t.Parallel()
		e := setupAPI(t)
		for _, tc := range []struct {
			args []string
			want string
		}{
			{[]string{"--scope", "operator"}, "--name is required"},
			{[]string{"--name", "x"}, "--scope must be"},
			{[]string{"--name", "x", "--scope", "admin"}, "--scope must be"},
			{[]string{"--name", "x", "--scope", "consumer"}, "--consumer is required"},
			{[]string{"--name", "x", "--scope", "operator", "--consumer", "c1"}, "--consumer is for --scope consumer only"},
		} {
			require.ErrorContains(t, e.fail(append([]string{"keys", "create"}, tc.args...)...), tc.want, tc.args)
		}
		require.Empty(t, lines(e.run("keys", "list", "-q")), "nothing was made")
	})

	t.Run("EnvironmentTwins", func(t *testing.T) {
		t.Parallel()
		e := setupAPI(t)
		e.env["HERALD_SCOPE"] = "consumer"
		e.env["HERALD_CONSUMER"] = "cust_9"
		var k apiKeyJSON
		e.runJSON(&k, "keys", "create", "--name", "from the environment")
		require.Equal(t, "consumer", k.Scope)
		require.Equal(t, "cust_9", *k.ConsumerID)
	})

	t.Run("ConsumerKeyMayNot", func(t *testing.T) {
		t.Parallel()
		e := setupAPI(t)
		key := strings.TrimSpace(e.run("keys", "create", "--name", "c", "--scope", "consumer", "--consumer", "c1", "-q"))
		r := e.withKey(key, "keys", "create", "--name", "escalate", "--scope", "operator")
		require.ErrorContains(t, r.e, "forbidden")
		require.ErrorContains(t, r.e, "operator key")
	})
}

func TestKeysList(t *testing.T) {
	t.Parallel()
	e := setupAPI(t)
	var a, b, op apiKeyJSON
	e.runJSON(&a, "keys", "create", "--name", "first of c1", "--scope", "consumer", "--consumer", "c1")
	e.runJSON(&b, "keys", "create", "--name", "second of c1", "--scope", "consumer", "--consumer", "c1")
	e.runJSON(&op, "keys", "create", "--name", "deploys", "--scope", "operator")
	used := e.withKey(a.Key, "stats")
	require.NoError(t, used.e, used.err)

	t.Run("Table", func(t *testing.T) {
		t.Parallel()
		out := e.run("keys", "list")
		ls := lines(out)
		require.Len(t, ls, 4)
		require.Regexp(t, `^ID\s+NAME\s+SCOPE\s+CONSUMER\s+PREFIX\s+LAST USED\s+CREATED$`, ls[0])
		row := rowOf(t, out, a.ID)
		require.Equal(t, []string{"first of c1", "consumer", "c1", a.Prefix}, row[1:5])
		require.Regexp(t, `^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d$`, row[5], "used once")
		require.Equal(t, []string{"deploys", "operator", "-", op.Prefix, "-"}, rowOf(t, out, op.ID)[1:6])
		for _, k := range []apiKeyJSON{a, b, op} {
			require.NotContains(t, out, k.Key, "never the key itself")
		}
	})
	t.Run("QuietOfOneConsumer", func(t *testing.T) {
		t.Parallel()
		require.ElementsMatch(t, []string{b.ID, a.ID}, lines(e.run("keys", "list", "--consumer", "c1", "-q")))
	})
	t.Run("JSON", func(t *testing.T) {
		t.Parallel()
		var page listJSON[apiKeyJSON]
		e.runJSON(&page, "keys", "list", "--limit", "1")
		require.Len(t, page.Data, 1)
		require.Contains(t, []string{a.ID, b.ID, op.ID}, page.Data[0].ID)
		require.Empty(t, page.Data[0].Key)
		require.NotEmpty(t, *page.NextCursor, "two more remain")
	})
}

func TestKeysRevoke(t *testing.T) {
	t.Parallel()
	e := setupAPI(t)
	var k apiKeyJSON
	e.runJSON(&k, "keys", "create", "--name", "short-lived", "--scope", "consumer", "--consumer", "c1")
	require.NoError(t, e.withKey(k.Key, "stats").e)

	require.Equal(t, "revoked API key "+k.ID+"\n", e.run("keys", "revoke", k.ID))
	r := e.withKey(k.Key, "stats")
	require.ErrorContains(t, r.e, "unauthorized", "refused from the next call on")
	require.ErrorContains(t, e.fail("keys", "revoke", k.ID), "not_found")
	require.Empty(t, lines(e.run("keys", "list", "-q")))

	var other apiKeyJSON
	e.runJSON(&other, "keys", "create", "--name", "another", "--scope", "operator")
	var out struct {
		ID      string `json:"id"`
		Revoked bool   `json:"revoked"`
	}
	e.runJSON(&out, "keys", "revoke", other.ID)
	require.Equal(t, other.ID, out.ID)
	require.True(t, out.Revoked)
	require.ErrorContains(t, e.fail("keys", "revoke"), "give one API key id")
}
