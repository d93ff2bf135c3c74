package cli_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

type ingestJSON struct {
	ID         string `json:"id"`
	Duplicate  bool   `json:"duplicate"`
	Deliveries []struct {
		ID         string `json:"id"`
		EndpointID string `json:"endpoint_id"`
	} `json:"deliveries"`
}

func TestEventsSend(t *testing.T) {
	t.Parallel()
	t.Run("PayloadFromFlagKeptByteForByte", func(t *testing.T) {
		t.Parallel()
		e := setupAPI(t)
		ep := e.createEndpoint("--consumer", "c1", "--event-type", "order.*")
		payload := `{"order_id": "o_1",   "items": [ 1, 2 ]}`
		out := e.run("events", "send", "--consumer", "c1", "--type", "order.created", "--payload", payload)
		ls := lines(out)
		require.Regexp(t, `^accepted event evt_[0-9a-z]+: 1 delivery$`, ls[0])
		evID := strings.TrimSuffix(strings.Fields(ls[0])[2], ":")
		require.Regexp(t, `^DELIVERY\s+ENDPOINT$`, ls[1])
		require.Regexp(t, `^dlv_[0-9a-z]+\s+`+ep+`$`, ls[2])

		ev, err := e.store.EventGet(context.Background(), evID)
		require.NoError(t, err)
		require.Equal(t, payload, string(ev.Payload))
		require.Equal(t, "c1", ev.ConsumerID)
	})
	t.Run("PayloadFromStdin", func(t *testing.T) {
		t.Parallel()
		e := setupAPI(t)
		r := e.exec("{\"from\": \"stdin\"}\n", "events", "send", "--type", "a.b", "--payload-file", "-", "-q")
		require.NoError(t, r.e, r.err)
		id := strings.TrimSpace(r.out)
		require.Regexp(t, `^evt_[0-9a-z]+$`, id)
		ev, err := e.store.EventGet(context.Background(), id)
		require.NoError(t, err)
		require.Equal(t, `{"from": "stdin"}`, string(ev.Payload))
		require.Equal(t, "default", ev.ConsumerID)
	})
	t.Run("PayloadFromFile", func(t *testing.T) {
		t.Parallel()
		e := setupAPI(t)
		path := filepath.Join(t.TempDir(), "p.json")
		require.NoError(t, os.WriteFile(path, []byte("[1,\n 2]\n"), 0o600))
		var res ingestJSON
		e.runJSON(&res, "events", "send", "--type", "a.b", "--payload-file", path)
		ev, err := e.store.EventGet(context.Background(), res.ID)
		require.NoError(t, err)
		require.Equal(t, "[1,\n 2]", string(ev.Payload))
	})
	t.Run("IdempotencyKeySaysDuplicate", func(t *testing.T) {
		t.Parallel()
		e := setupAPI(t)
		e.createEndpoint()
		var first ingestJSON
		e.runJSON(&first, "events", "send", "--type", "a.b", "--payload", `{}`, "--idempotency-key", "k-1")
		require.False(t, first.Duplicate)
		require.Len(t, first.Deliveries, 1)
		out := e.run("events", "send", "--type", "a.b", "--payload", `{}`, "--idempotency-key", "k-1")
		require.Contains(t, out, "duplicate")
		require.Contains(t, out, first.ID)
		require.Len(t, lines(e.run("deliveries", "list", "-q")), 1, "nothing new was created")
	})
	t.Run("BadPayloadNamesItsSource", func(t *testing.T) {
		t.Parallel()
		e := setupAPI(t)
		require.ErrorContains(t, e.fail("events", "send", "--type", "a.b", "--payload", `{"a":`), "--payload is not valid JSON")
		r := e.exec("not json", "events", "send", "--type", "a.b", "--payload-file", "-")
		require.ErrorContains(t, r.e, "standard input is not valid JSON")
		require.ErrorContains(t, e.fail("events", "send", "--type", "a.b"), "--payload-file")
		require.ErrorContains(t, e.fail("events", "send", "--payload", "{}"), "--type is required")
		require.ErrorContains(t, e.fail("events", "send", "--type", "a.b", "--payload", "{}", "--payload-file", "x"), "not both")
		require.Empty(t, e.run("events", "list", "-q"))
	})
	t.Run("APIValidationErrorShowsItsCode", func(t *testing.T) {
		t.Parallel()
		e := setupAPI(t)
		err := e.fail("events", "send", "--type", "no spaces allowed", "--payload", "{}")
		require.True(t, strings.HasPrefix(err.Error(), "invalid_event_type: "), err.Error())
	})
}

func TestEventsListGetReplay(t *testing.T) {
	t.Parallel()
	e := setupAPI(t)
	ep := e.createEndpoint("--consumer", "c1")
	created := e.send("c1", "order.created", `{"order_id":"o_1","lines":[{"sku":"a"}]}`)
	paid := e.send("c1", "order.paid", `{"order_id":"o_1"}`)
	other := e.send("c2", "order.paid", `{}`)

	t.Run("Table", func(t *testing.T) {
		t.Parallel()
		out := e.run("events", "list", "--consumer", "c1")
		ls := lines(out)
		require.Len(t, ls, 3)
		require.Regexp(t, `^ID\s+TYPE\s+CONSUMER\s+PAYLOAD\s+CREATED$`, ls[0])
		require.Equal(t, []string{"order.created", "c1", "40 bytes"}, rowOf(t, out, created)[1:4])
		require.NotContains(t, out, other)
	})
	t.Run("FilterByType", func(t *testing.T) {
		t.Parallel()
		require.ElementsMatch(t, []string{paid, other}, lines(e.run("events", "list", "--type", "order.paid", "-q")))
	})
	t.Run("FilterByTime", func(t *testing.T) {
		t.Parallel()
		require.Len(t, lines(e.run("events", "list", "--since", "1h", "-q")), 3)
		require.Equal(t, "(none)\n", e.run("events", "list", "--until", "2000-01-01T00:00:00Z"))
	})
	t.Run("GetPrettyPrintsThePayload", func(t *testing.T) {
		t.Parallel()
		out := e.run("events", "get", created)
		require.Equal(t, created, field(t, out, "id"))
		require.Equal(t, "order.created", field(t, out, "type"))
		require.Contains(t, out, "payload:\n  {\n    \"order_id\": \"o_1\",\n    \"lines\": [\n      {\n        \"sku\": \"a\"\n      }\n    ]\n  }\n")
		require.Contains(t, out, "deliveries:\n")
		require.Contains(t, out, ep)
	})
	t.Run("GetJSON", func(t *testing.T) {
		t.Parallel()
		var ev struct {
			ID         string         `json:"id"`
			Payload    map[string]any `json:"payload"`
			Deliveries []struct {
				EndpointID string `json:"endpoint_id"`
			} `json:"deliveries"`
		}
		e.runJSON(&ev, "events", "get", paid)
		require.Equal(t, paid, ev.ID)
		require.Equal(t, "o_1", ev.Payload["order_id"])
		require.Len(t, ev.Deliveries, 1)
		require.Equal(t, ep, ev.Deliveries[0].EndpointID)
	})
	t.Run("Replay", func(t *testing.T) {
		t.Parallel()
		r := setupAPI(t)
		r.createEndpoint("--consumer", "c1")
		id := r.send("c1", "a.b", `{}`)
		r.complete(dead)
		require.Equal(t, "replayed 1 delivery of event "+id+"\n", r.run("events", "replay", id, "--status", "dead"))
		require.Equal(t, "replayed 0 deliveries of event "+id+"\n", r.run("events", "replay", id))
		err := r.fail("events", "replay", "evt_nope")
		require.True(t, strings.HasPrefix(err.Error(), "not_found: "), err.Error())
	})
}
