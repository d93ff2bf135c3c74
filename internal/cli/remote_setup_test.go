package cli_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhooks/herald"
	"github.com/heraldhooks/herald/internal/api"
	"github.com/heraldhooks/herald/internal/cli"
	"github.com/heraldhooks/herald/internal/store"
	"github.com/heraldhooks/herald/internal/store/sqlitestore"
	"github.com/heraldhooks/herald/internal/store/sqlitestore/sqlitetest"
)

const apiKey = "hk_cli_test_key_0123456789"

// apiEnv is a real Herald API over a fresh SQLite store, and the client
// commands pointed at it through their environment twins.
type apiEnv struct {
	t     *testing.T
	url   string
	store *sqlitestore.Store
	env   map[string]string
}

func setupAPI(t *testing.T) *apiEnv {
	t.Helper()
	ctx := context.Background()
	st, err := sqlitestore.Open(ctx, sqlitetest.Path(t), nil)
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	require.NoError(t, st.Migrate(ctx))
	srv := httptest.NewServer(api.New(api.Config{Store: st, APIKeyHash: sha256.Sum256([]byte(apiKey))}))
	t.Cleanup(srv.Close)
	return &apiEnv{t: t, url: srv.URL, store: st, env: map[string]string{
		"HERALD_SERVER":  srv.URL,
		"HERALD_API_KEY": apiKey,
	}}
}

// result is what one command printed and returned.
type result struct {
	out, err string
	e        error
}

// exec runs herald with args, stdin as its standard input.
func (e *apiEnv) exec(stdin string, args ...string) result {
	e.t.Helper()
	var out, errb bytes.Buffer
	cmd := cli.New(cli.IO{
		In: strings.NewReader(stdin), Out: &out, Err: &errb,
		Getenv: func(k string) string { return e.env[k] },
	})
	cmd.SetArgs(args)
	err := cmd.ExecuteContext(context.Background())
	return result{out: out.String(), err: errb.String(), e: err}
}

// run runs herald with args and requires success; it returns stdout.
func (e *apiEnv) run(args ...string) string {
	e.t.Helper()
	r := e.exec("", args...)
	require.NoError(e.t, r.e, "herald %s\nstdout: %s\nstderr: %s", strings.Join(args, " "), r.out, r.err)
	return r.out
}

// fail runs herald with args and requires an error, which it returns.
func (e *apiEnv) fail(args ...string) error {
	e.t.Helper()
	r := e.exec("", args...)
	require.Error(e.t, r.e, "herald %s should fail\nstdout: %s", strings.Join(args, " "), r.out)
	return r.e
}

// runJSON runs herald with args and --json and decodes stdout into out.
func (e *apiEnv) runJSON(out any, args ...string) {
	e.t.Helper()
	raw := e.run(append(args, "--json")...)
	require.NoError(e.t, json.Unmarshal([]byte(raw), out), "stdout: %s", raw)
}

// createEndpoint creates an endpoint with the given flags and returns its id.
func (e *apiEnv) createEndpoint(flags ...string) string {
	e.t.Helper()
	if !contains(flags, "--url") {
		flags = append(flags, "--url", "https://example.com/hooks")
	}
	out := e.run(append([]string{"endpoints", "create", "-q"}, flags...)...)
	id := strings.TrimSpace(out)
	require.Regexp(e.t, `^ep_[0-9a-z]+$`, id)
	return id
}

// send sends an event and returns its id.
func (e *apiEnv) send(consumer, eventType, payload string) string {
	e.t.Helper()
	id := strings.TrimSpace(e.run("events", "send", "--consumer", consumer, "--type", eventType, "--payload", payload, "-q"))
	require.Regexp(e.t, `^evt_[0-9a-z]+$`, id)
	return id
}

// complete claims every due delivery from the store and records the
// outcome decide gives it, as a dispatcher would after one attempt.
func (e *apiEnv) complete(decide func(*store.ClaimedDelivery) store.DeliveryOutcome) {
	e.t.Helper()
	ctx := context.Background()
	claimed, err := e.store.DeliveryClaim(ctx, &store.DeliveryClaimParams{Limit: 100, LeaseMargin: time.Second})
	require.NoError(e.t, err)
	require.NotEmpty(e.t, claimed)
	outcomes := make([]store.DeliveryOutcome, 0, len(claimed))
	for _, c := range claimed {
		o := decide(c)
		o.Lease = store.Lease{DeliveryID: c.Delivery.ID, LeaseToken: c.LeaseToken}
		outcomes = append(outcomes, o)
	}
	applied, err := e.store.DeliveryCompleteMany(ctx, &store.DeliveryCompleteManyParams{Outcomes: outcomes})
	require.NoError(e.t, err)
	for _, ok := range applied {
		require.True(e.t, ok)
	}
}

// dead is the outcome of a last attempt answered 500.
func dead(c *store.ClaimedDelivery) store.DeliveryOutcome {
	return store.DeliveryOutcome{
		Status: herald.StatusDead, DeadReason: herald.DeadExhausted,
		Attempt: herald.Attempt{
			Number: c.Delivery.AttemptCount + 1, AttemptedAt: time.Now(), Duration: 12 * time.Millisecond, StatusCode: 500,
			Response: []byte("boom from the receiver"), Error: "HTTP 500",
		},
	}
}

// delivered is the outcome of an attempt answered 200.
func delivered(c *store.ClaimedDelivery) store.DeliveryOutcome {
	return store.DeliveryOutcome{
		Status:  herald.StatusDelivered,
		Attempt: herald.Attempt{Number: c.Delivery.AttemptCount + 1, AttemptedAt: time.Now(), Duration: 3 * time.Millisecond, StatusCode: 200, Response: []byte("ok")},
	}
}

// byType decides by event type: types[c.Event.EventType].
func byType(types map[string]func(*store.ClaimedDelivery) store.DeliveryOutcome) func(*store.ClaimedDelivery) store.DeliveryOutcome {
	return func(c *store.ClaimedDelivery) store.DeliveryOutcome { return types[c.Event.EventType](c) }
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// lines splits output into its non-empty lines.
func lines(s string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.TrimSpace(l) != "" {
			out = append(out, l)
		}
	}
	return out
}

// field reads "key: value" from a block of human output.
func field(t *testing.T, out, key string) string {
	t.Helper()
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(key) + `:\s+(.*)$`).FindStringSubmatch(out)
	require.NotNil(t, m, "no %q in:\n%s", key, out)
	return strings.TrimSpace(m[1])
}

// rowOf returns the table row that starts with id.
func rowOf(t *testing.T, out, id string) []string {
	t.Helper()
	for _, l := range lines(out) {
		if strings.HasPrefix(l, id+" ") {
			return regexp.MustCompile(`\s{2,}`).Split(strings.TrimSpace(l), -1)
		}
	}
	t.Fatalf("no row for %s in:\n%s", id, out)
	return nil
}
