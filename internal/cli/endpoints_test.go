package cli_test

import (
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// endpointJSON is the part of an endpoint answer the tests read.
type endpointJSON struct {
	ID                      string            `json:"id"`
	ConsumerID              string            `json:"consumer_id"`
	URL                     string            `json:"url"`
	Description             string            `json:"description"`
	EventTypes              []string          `json:"event_types"`
	Secret                  string            `json:"secret"`
	PreviousSecretExpiresAt *string           `json:"previous_secret_expires_at"`
	Enabled                 bool              `json:"enabled"`
	DisabledReason          string            `json:"disabled_reason"`
	Timeout                 string            `json:"timeout"`
	RetrySchedule           []string          `json:"retry_schedule"`
	RetryClientErrors       bool              `json:"retry_client_errors"`
	RateLimit               *rateLimitJSON    `json:"rate_limit"`
	MaxInFlight             int               `json:"max_in_flight"`
	SignatureScheme         string            `json:"signature_scheme"`
	Headers                 map[string]string `json:"headers"`
}

type rateLimitJSON struct {
	PerSecond float64 `json:"per_second"`
	Burst     int     `json:"burst"`
}

type listJSON[T any] struct {
	Data       []T     `json:"data"`
	NextCursor *string `json:"next_cursor"`
}

func TestEndpointsCreate(t *testing.T) {
	t.Parallel()
	allFlags := []string{
		"endpoints", "create", "--url", "https://example.com/hooks", "--consumer", "cust_42",
		"--event-type", "order.*", "--event-type", "invoice.paid", "--description", "orders",
		"--timeout", "5s", "--retry-schedule", "0s,30s,5m", "--max-in-flight", "7",
		"--rate-limit-per-second", "50", "--rate-limit-burst", "100", "--signature-scheme", "hmac-sha256",
		"--header", "X-Team=a", "--header", "X-Env=dev=1", "--retry-client-errors",
	}
	t.Run("ShowsEverySettingAndTheSecret", func(t *testing.T) {
		t.Parallel()
		e := setupAPI(t)
		out := e.run(allFlags...)
		require.Regexp(t, `^ep_`, field(t, out, "id"))
		require.Equal(t, "cust_42", field(t, out, "consumer"))
		require.Equal(t, "https://example.com/hooks", field(t, out, "url"))
		require.Equal(t, "orders", field(t, out, "description"))
		require.Equal(t, "order.*, invoice.paid", field(t, out, "event types"))
		require.Equal(t, "enabled", field(t, out, "status"))
		require.Regexp(t, `^whsec_\S+$`, field(t, out, "secret"))
		require.Equal(t, "hmac-sha256", field(t, out, "signature scheme"))
		require.Equal(t, "5s", field(t, out, "timeout"))
		require.Equal(t, "0s, 30s, 5m", field(t, out, "retry schedule"))
		require.Equal(t, "yes", field(t, out, "retry client errors"))
		require.Equal(t, "50/s, burst 100", field(t, out, "rate limit"))
		require.Equal(t, "7", field(t, out, "max in flight"))
		require.Equal(t, "X-Env=dev=1, X-Team=a", field(t, out, "headers"))
	})
	t.Run("JSONIsTheAPIAnswer", func(t *testing.T) {
		t.Parallel()
		e := setupAPI(t)
		var ep endpointJSON
		e.runJSON(&ep, allFlags...)
		require.Regexp(t, `^ep_`, ep.ID)
		require.Regexp(t, `^whsec_`, ep.Secret)
		require.Equal(t, []string{"order.*", "invoice.paid"}, ep.EventTypes)
		require.Equal(t, []string{"0s", "30s", "5m"}, ep.RetrySchedule)
		require.Equal(t, &rateLimitJSON{PerSecond: 50, Burst: 100}, ep.RateLimit)
		require.Equal(t, map[string]string{"X-Team": "a", "X-Env": "dev=1"}, ep.Headers)
		require.True(t, ep.RetryClientErrors)

		var got endpointJSON
		e.runJSON(&got, "endpoints", "get", ep.ID)
		require.Equal(t, ep, got)
	})
	t.Run("QuietPrintsTheIDOnly", func(t *testing.T) {
		t.Parallel()
		e := setupAPI(t)
		out := e.run("endpoints", "create", "--url", "https://example.com/hooks", "-q")
		require.Regexp(t, `^ep_[0-9a-z]+\n$`, out)
	})
	t.Run("DefaultsApply", func(t *testing.T) {
		t.Parallel()
		e := setupAPI(t)
		var ep endpointJSON
		e.runJSON(&ep, "endpoints", "create", "--url", "https://example.com/hooks")
		require.Equal(t, "default", ep.ConsumerID)
		require.Equal(t, []string{"*"}, ep.EventTypes)
		require.Nil(t, ep.RateLimit)
		require.False(t, ep.RetryClientErrors)
	})
	t.Run("RateAloneTakesABurstOfTheRate", func(t *testing.T) {
		t.Parallel()
		e := setupAPI(t)
		var ep endpointJSON
		e.runJSON(&ep, "endpoints", "create", "--url", "https://example.com/hooks", "--rate-limit-per-second", "2.5")
		require.Equal(t, &rateLimitJSON{PerSecond: 2.5, Burst: 3}, ep.RateLimit)
	})
	t.Run("URLIsRequired", func(t *testing.T) {
		t.Parallel()
		e := setupAPI(t)
		require.ErrorContains(t, e.fail("endpoints", "create", "--consumer", "c1"), "--url is required")
	})
	t.Run("BadFlagsAreCaughtBeforeCalling", func(t *testing.T) {
		t.Parallel()
		e := setupAPI(t)
		require.ErrorContains(t, e.fail("endpoints", "create", "--url", "https://x.example", "--retry-schedule", "0s,soon"), `delay 2 ("soon")`)
		require.ErrorContains(t, e.fail("endpoints", "create", "--url", "https://x.example", "--header", "NoValue"), "Name=value")
		require.ErrorContains(t, e.fail("endpoints", "create", "--url", "https://x.example", "--rate-limit-burst", "5"), "needs --rate-limit-per-second")
		require.ErrorContains(t, e.fail("endpoints", "create", "--url", "https://x.example", "--timeout", "soon"), "timeout")
	})
	t.Run("APIValidationErrorShowsItsCode", func(t *testing.T) {
		t.Parallel()
		e := setupAPI(t)
		err := e.fail("endpoints", "create", "--url", "ftp://example.com/hooks")
		require.True(t, strings.HasPrefix(err.Error(), "invalid_url: "), err.Error())
		err = e.fail("endpoints", "create", "--url", "https://example.com/hooks", "--timeout", "5m")
		require.True(t, strings.HasPrefix(err.Error(), "invalid_timeout: "), err.Error())
	})
}

func TestEndpointsList(t *testing.T) {
	t.Parallel()
	e := setupAPI(t)
	a := e.createEndpoint("--consumer", "c1", "--url", "https://a.example.com/hooks", "--event-type", "order.*")
	b := e.createEndpoint("--consumer", "c1", "--url", "https://b.example.com/hooks",
		"--filter", `payload.total > 100 && payload.currency == "eur" && payload.region != "test"`)
	c := e.createEndpoint("--consumer", "c2")

	t.Run("Table", func(t *testing.T) {
		t.Parallel()
		out := e.run("endpoints", "list", "--consumer", "c1")
		ls := lines(out)
		require.Len(t, ls, 3)
		require.Regexp(t, `^ID\s+STATUS\s+CONSUMER\s+URL\s+EVENT TYPES\s+FILTER\s+CREATED$`, ls[0])
		row := rowOf(t, out, a)
		require.Equal(t, []string{"enabled", "c1", "https://a.example.com/hooks", "order.*", "-"}, row[1:6])
		require.Regexp(t, `^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d$`, row[6])
		require.Equal(t, `payload.total > 100 && payload.currency…`, rowOf(t, out, b)[5], "the filter, cut to 40")
		require.NotContains(t, out, c)
	})
	t.Run("Quiet", func(t *testing.T) {
		t.Parallel()
		ids := lines(e.run("endpoints", "list", "-q"))
		require.ElementsMatch(t, []string{a, b, c}, ids)
	})
	t.Run("JSON", func(t *testing.T) {
		t.Parallel()
		var page listJSON[endpointJSON]
		e.runJSON(&page, "endpoints", "list", "--consumer", "c2")
		require.Len(t, page.Data, 1)
		require.Equal(t, c, page.Data[0].ID)
		require.NotNil(t, page.NextCursor)
		require.Empty(t, *page.NextCursor)
	})
	t.Run("LimitSaysMoreRemain", func(t *testing.T) {
		t.Parallel()
		r := e.exec("", "endpoints", "list", "--limit", "2")
		require.NoError(t, r.e)
		require.Len(t, lines(r.out), 3, "a header and two rows")
		require.Contains(t, r.err, "more remain")
		require.Len(t, lines(e.run("endpoints", "list", "--all", "-q")), 3)
	})
	t.Run("CursorContinues", func(t *testing.T) {
		t.Parallel()
		var first listJSON[endpointJSON]
		e.runJSON(&first, "endpoints", "list", "--limit", "1")
		require.Len(t, first.Data, 1)
		require.NotEmpty(t, *first.NextCursor)
		rest := lines(e.run("endpoints", "list", "--all", "-q", "--cursor", *first.NextCursor))
		require.Len(t, rest, 2)
		require.NotContains(t, rest, first.Data[0].ID)
	})
	t.Run("AllAndLimitConflict", func(t *testing.T) {
		t.Parallel()
		require.ErrorContains(t, e.fail("endpoints", "list", "--all", "--limit", "3"), "not both")
	})
	t.Run("ConsumerFromItsTwin", func(t *testing.T) {
		t.Parallel()
		r := setupAPI(t)
		r.createEndpoint("--consumer", "c1")
		only := r.createEndpoint("--consumer", "c2")
		r.env["HERALD_CONSUMER"] = "c2"
		require.Equal(t, []string{only}, lines(r.run("endpoints", "list", "-q")))
	})
}

func TestEndpointsGetUpdate(t *testing.T) {
	t.Parallel()
	t.Run("GetShowsTheBlock", func(t *testing.T) {
		t.Parallel()
		e := setupAPI(t)
		id := e.createEndpoint("--description", "orders")
		out := e.run("endpoints", "get", id)
		require.Equal(t, id, field(t, out, "id"))
		require.Equal(t, "orders", field(t, out, "description"))
		require.Equal(t, "0s, 30s, 5m, 30m, 2h, 8h, 24h", field(t, out, "retry schedule"))
		require.Equal(t, "none", field(t, out, "rate limit"))
	})
	t.Run("OnlyGivenFieldsChange", func(t *testing.T) {
		t.Parallel()
		e := setupAPI(t)
		id := e.createEndpoint("--consumer", "c1", "--description", "orig", "--timeout", "5s",
			"--event-type", "a.b", "--header", "X-A=1", "--rate-limit-per-second", "10", "--rate-limit-burst", "20")
		var before endpointJSON
		e.runJSON(&before, "endpoints", "get", id)

		out := e.run("endpoints", "update", id, "--url", "https://new.example.com/x", "--max-in-flight", "3")
		require.Equal(t, "https://new.example.com/x", field(t, out, "url"))

		var after endpointJSON
		e.runJSON(&after, "endpoints", "get", id)
		want := before
		want.URL, want.MaxInFlight = "https://new.example.com/x", 3
		require.Equal(t, want, after)
	})
	t.Run("HalfARateLimitKeepsTheOtherHalf", func(t *testing.T) {
		t.Parallel()
		e := setupAPI(t)
		id := e.createEndpoint("--rate-limit-per-second", "10", "--rate-limit-burst", "20")
		var ep endpointJSON
		e.runJSON(&ep, "endpoints", "update", id, "--rate-limit-per-second", "5")
		require.Equal(t, &rateLimitJSON{PerSecond: 5, Burst: 20}, ep.RateLimit)
		e.runJSON(&ep, "endpoints", "update", id, "--rate-limit-burst", "8")
		require.Equal(t, &rateLimitJSON{PerSecond: 5, Burst: 8}, ep.RateLimit)
		e.runJSON(&ep, "endpoints", "update", id, "--rate-limit-per-second", "0")
		require.Nil(t, ep.RateLimit, "0 removes the limit")
	})
	t.Run("FalseIsGiven", func(t *testing.T) {
		t.Parallel()
		e := setupAPI(t)
		id := e.createEndpoint("--retry-client-errors")
		var ep endpointJSON
		e.runJSON(&ep, "endpoints", "update", id, "--retry-client-errors=false")
		require.False(t, ep.RetryClientErrors)
	})
	t.Run("TracePropagation", func(t *testing.T) {
		t.Parallel()
		e := setupAPI(t)
		var ep struct {
			ID               string `json:"id"`
			TracePropagation bool   `json:"trace_propagation"`
		}
		e.runJSON(&ep, "endpoints", "create", "--url", "https://example.com/hook", "--trace-propagation=false")
		require.False(t, ep.TracePropagation)
		e.runJSON(&ep, "endpoints", "update", ep.ID, "--trace-propagation")
		require.True(t, ep.TracePropagation)
		require.Contains(t, e.run("endpoints", "get", ep.ID), "trace propagation")
	})
	t.Run("NothingToUpdate", func(t *testing.T) {
		t.Parallel()
		e := setupAPI(t)
		id := e.createEndpoint()
		require.ErrorContains(t, e.fail("endpoints", "update", id), "nothing to update")
	})
	t.Run("UnknownIDIsNotFound", func(t *testing.T) {
		t.Parallel()
		e := setupAPI(t)
		err := e.fail("endpoints", "update", "ep_nope", "--description", "x")
		require.True(t, strings.HasPrefix(err.Error(), "not_found: "), err.Error())
	})
}

func TestEndpointsLifecycle(t *testing.T) {
	t.Parallel()
	t.Run("RotateSecret", func(t *testing.T) {
		t.Parallel()
		e := setupAPI(t)
		id := e.createEndpoint()
		var before endpointJSON
		e.runJSON(&before, "endpoints", "get", id)

		out := e.run("endpoints", "rotate-secret", id)
		secret := field(t, out, "secret")
		require.Regexp(t, `^whsec_`, secret)
		require.NotEqual(t, before.Secret, secret)
		require.NotEqual(t, "-", field(t, out, "previous secret signs until"))

		var after endpointJSON
		e.runJSON(&after, "endpoints", "get", id)
		require.Equal(t, secret, after.Secret)
		require.NotNil(t, after.PreviousSecretExpiresAt)
	})
	t.Run("Test", func(t *testing.T) {
		t.Parallel()
		e := setupAPI(t)
		id := e.createEndpoint()
		out := e.run("endpoints", "test", id)
		m := regexp.MustCompile(`^sent test event (evt_\w+): delivery (dlv_\w+) to endpoint (ep_\w+)\n$`).FindStringSubmatch(out)
		require.NotNil(t, m, out)
		require.Equal(t, id, m[3])
		var ev struct {
			EventType string `json:"event_type"`
		}
		e.runJSON(&ev, "events", "get", m[1])
		require.Equal(t, "herald.test", ev.EventType)
		e.run("endpoints", "disable", id)
		err := e.fail("endpoints", "test", id)
		require.True(t, strings.HasPrefix(err.Error(), "conflict: "), err.Error())
	})
	t.Run("DisableAndEnable", func(t *testing.T) {
		t.Parallel()
		e := setupAPI(t)
		id := e.createEndpoint()
		require.Equal(t, "endpoint "+id+" is disabled\n", e.run("endpoints", "disable", id, "--reason", "maintenance"))
		require.Equal(t, "disabled (maintenance)", field(t, e.run("endpoints", "get", id), "status"))
		row := rowOf(t, e.run("endpoints", "list"), id)
		require.Equal(t, "disabled", row[1])

		require.Equal(t, "endpoint "+id+" is enabled\n", e.run("endpoints", "enable", id))
		var ep endpointJSON
		e.runJSON(&ep, "endpoints", "get", id)
		require.True(t, ep.Enabled)
	})
	t.Run("Delete", func(t *testing.T) {
		t.Parallel()
		e := setupAPI(t)
		id := e.createEndpoint()
		require.Equal(t, "deleted endpoint "+id+"\n", e.run("endpoints", "delete", id))
		err := e.fail("endpoints", "get", id)
		require.True(t, strings.HasPrefix(err.Error(), "not_found: "), err.Error())
		require.Empty(t, e.run("endpoints", "list", "-q"))
	})
	t.Run("ReplayDeadDeliveries", func(t *testing.T) {
		t.Parallel()
		e := setupAPI(t)
		id := e.createEndpoint("--consumer", "c1")
		e.send("c1", "a.b", `{}`)
		e.send("c1", "a.b", `{}`)
		e.complete(dead)

		require.Equal(t, "replayed 2 deliveries of endpoint "+id+"\n",
			e.run("endpoints", "replay", id, "--status", "dead", "--since", "1h"))
		require.Len(t, lines(e.run("deliveries", "list", "--status", "pending", "-q")), 2)

		var out struct{ Replayed int }
		e.runJSON(&out, "endpoints", "replay", id)
		require.Equal(t, 0, out.Replayed, "nothing dead is left")
	})
	t.Run("ReplayWindowOutsideReplaysNothing", func(t *testing.T) {
		t.Parallel()
		e := setupAPI(t)
		id := e.createEndpoint("--consumer", "c1")
		e.send("c1", "a.b", `{}`)
		e.complete(dead)
		require.Equal(t, "replayed 0 deliveries of endpoint "+id+"\n",
			e.run("endpoints", "replay", id, "--until", "2000-01-01T00:00:00Z"))
		require.ErrorContains(t, e.fail("endpoints", "replay", id, "--since", "yesterday"), "--since")
	})
}
