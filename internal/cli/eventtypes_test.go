package cli_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/heraldhooks/herald"
)

func TestEventTypes(t *testing.T) {
	t.Parallel()

	t.Run("CreateFromFlagsAndEnforce", func(t *testing.T) {
		t.Parallel()
		e := setupAPI(t)
		out := e.run("event-types", "create", "--name", "order.created", "--description", "An order was placed.",
			"--schema", `{"type":"object","required":["order_id"],"properties":{"order_id":{"type":"string"}}}`,
			"--example", `{"order_id":"o_1"}`)
		require.Equal(t, "order.created", field(t, out, "name"))
		require.Equal(t, "An order was placed.", field(t, out, "description"))
		require.Equal(t, "no", field(t, out, "built in"))
		require.Contains(t, out, `"required": [`)

		err := e.fail("events", "send", "--consumer", "c1", "--type", "order.created", "--payload", `{"order_id":1}`)
		require.ErrorContains(t, err, "invalid_payload")
		require.ErrorContains(t, err, "at /order_id")
		e.send("c1", "order.created", `{"order_id":"o_1"}`)

		got := e.run("event-types", "get", "order.created")
		require.Equal(t, "An order was placed.", field(t, got, "description"))
		require.Contains(t, got, `"order_id": "o_1"`)
	})

	t.Run("CreateFromAFile", func(t *testing.T) {
		t.Parallel()
		e := setupAPI(t)
		dir := t.TempDir()
		entry := filepath.Join(dir, "entry.json")
		require.NoError(t, os.WriteFile(entry, []byte(`{"name":"invoice.paid","description":"from the file",
			"schema":{"type":"object"},"example":{"n":1}}`), 0o600))
		require.Equal(t, "invoice.paid\n", e.run("event-types", "create", "--file", entry, "-q"))
		// Flags beside the file replace its fields.
		schema := filepath.Join(dir, "schema.json")
		require.NoError(t, os.WriteFile(schema, []byte(`{"type":"array"}`), 0o600))
		e.run("event-types", "create", "--file", entry, "--name", "invoice.sent", "--schema-file", schema, "--example", "[1]")
		var got struct {
			Name        string `json:"name"`
			Description string `json:"description"`
			Schema      any    `json:"schema"`
		}
		e.runJSON(&got, "event-types", "get", "invoice.sent")
		require.Equal(t, "from the file", got.Description)
		require.Equal(t, map[string]any{"type": "array"}, got.Schema)

		r := e.exec(`{"name":"from.stdin","schema":{"type":"string"}}`, "event-types", "create", "--file", "-", "-q")
		require.NoError(t, r.e, r.err)
		require.Equal(t, "from.stdin\n", r.out)

		require.ErrorContains(t, e.fail("event-types", "create", "--file", entry, "--name", "x.y", "--schema", "{", "--schema-file", schema), "not both")
		require.ErrorContains(t, e.fail("event-types", "create", "--description", "no name"), "--name is required")
		require.ErrorContains(t, e.fail("event-types", "create", "--name", "x.y", "--schema", "{"), "--schema is not valid JSON")
		require.ErrorContains(t, e.fail("event-types", "create", "--name", "x.y", "--schema", `{"$ref":"https://example.com/s.json"}`), "invalid_schema")
	})

	t.Run("ListUpdateDelete", func(t *testing.T) {
		t.Parallel()
		e := setupAPI(t)
		e.run("event-types", "create", "--name", "order.created", "--schema", `{"type":"object"}`)
		e.run("event-types", "create", "--name", "a.first")
		names := lines(e.run("event-types", "list", "-q", "--all"))
		want := []string{"a.first"}
		for _, b := range herald.NotificationTypes() {
			want = append(want, b.Name)
		}
		require.Equal(t, append(want, "order.created"), names)
		table := e.run("event-types", "list")
		require.Equal(t, []string{"order.created", "yes", "no"}, rowOf(t, table, "order.created")[:3])
		require.Equal(t, "yes", rowOf(t, table, herald.NotifyDeliveryDead)[2])

		out := e.run("event-types", "update", "order.created", "--no-schema", "--description", "changed")
		require.Equal(t, "changed", field(t, out, "description"))
		require.Equal(t, "none", field(t, out, "schema"))
		require.ErrorContains(t, e.fail("event-types", "update", "order.created"), "nothing to change")
		require.ErrorContains(t, e.fail("event-types", "update", "order.created", "--schema", "{}", "--no-schema"), "not both")
		require.ErrorContains(t, e.fail("event-types", "update", herald.NotifyDeliveryDead, "--description", "x"), "invalid_name")

		require.Equal(t, "deleted event type order.created\n", e.run("event-types", "delete", "order.created"))
		require.ErrorContains(t, e.fail("event-types", "get", "order.created"), "not_found")
		require.True(t, strings.HasPrefix(e.run("types", "get", herald.NotifyDeliveryDead), "name:"))
	})
}
