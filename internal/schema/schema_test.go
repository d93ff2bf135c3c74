package schema_test

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/heraldhooks/herald/internal/schema"
)

const orderSchema = `{
	"type": "object",
	"required": ["order_id", "items"],
	"properties": {
		"order_id": {"type": "string"},
		"items": {"type": "array", "items": {"$ref": "#/$defs/item"}},
		"a/b~c": {"type": "integer"}
	},
	"$defs": {"item": {"type": "object", "required": ["sku"], "properties": {"sku": {"type": "string"}}}}
}`

func TestCheck(t *testing.T) {
	t.Parallel()
	s, err := schema.Compile("order.created", []byte(orderSchema))
	require.NoError(t, err)
	cases := []struct {
		name, payload, pointer, message string
	}{
		{"Matches", `{"order_id":"o_1","items":[{"sku":"a"}]}`, "", ""},
		{"WrongType", `{"order_id":1,"items":[]}`, "/order_id", "want string"},
		{"Missing", `{"items":[]}`, "", "order_id"},
		{"NestedThroughRef", `{"order_id":"o","items":[{"sku":"a"},{"sku":2}]}`, "/items/1/sku", "want string"},
		{"PointerEscapes", `{"order_id":"o","items":[],"a/b~c":"x"}`, "/a~1b~0c", "want integer"},
		{"NotAnObject", `[1]`, "", "want object"},
		// Several violations: the smallest pointer is named, whatever
		// order the validator looked in.
		{"FirstOfSeveral", `{"order_id":5,"items":[{"sku":1}],"a/b~c":"x"}`, "/a~1b~0c", "want integer"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			for range 20 {
				err := s.Check([]byte(c.payload))
				if c.message == "" {
					require.NoError(t, err)
					return
				}
				var v *schema.Violation
				require.ErrorAs(t, err, &v)
				require.Equal(t, c.pointer, v.Pointer)
				require.Contains(t, v.Message, c.message)
			}
		})
	}
}

func TestCompileRefuses(t *testing.T) {
	t.Parallel()
	var fetched atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fetched.Add(1)
		w.Write([]byte(`{"type":"string"}`))
	}))
	t.Cleanup(srv.Close)
	file := filepath.Join(t.TempDir(), "s.json")
	require.NoError(t, os.WriteFile(file, []byte(`{"type":"string"}`), 0o600))

	cases := []struct {
		name, schema, reason string
	}{
		{"NotJSON", `{"type":`, "not JSON"},
		{"UnknownType", `{"type":"strung"}`, "not valid"},
		{"BadPattern", `{"pattern":"("}`, "pattern"},
		{"RemoteRef", `{"$ref":"` + srv.URL + `/s.json"}`, "loads nothing from elsewhere"},
		{"RemoteRefNested", `{"properties":{"a":{"$ref":"` + srv.URL + `/s.json#/x"}}}`, "loads nothing from elsewhere"},
		{"FileRef", `{"$ref":"file://` + file + `"}`, "loads nothing from elsewhere"},
		{"RelativeRef", `{"$ref":"other.json"}`, "loads nothing from elsewhere"},
		{"RemoteSchemaDraft", `{"$schema":"` + srv.URL + `/meta.json"}`, "loads nothing from elsewhere"},
		{"MissingLocalRef", `{"$ref":"#/$defs/none"}`, `"#/$defs/none" not found`},
		{"NotAType", `{"type":"strung"}`, "at /type: "},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			_, err := schema.Compile("t", []byte(c.schema))
			var se *schema.SchemaError
			require.ErrorAs(t, err, &se)
			require.Contains(t, se.Reason, c.reason)
			require.LessOrEqual(t, len(se.Reason), 404)
		})
	}
	require.Zero(t, fetched.Load(), "compiling fetched a schema from elsewhere")
}

func TestCompileKnownDrafts(t *testing.T) {
	t.Parallel()
	// The drafts' metaschemas are built in: naming one fetches nothing.
	for _, d := range []string{"https://json-schema.org/draft/2020-12/schema", "http://json-schema.org/draft-07/schema#"} {
		s, err := schema.Compile("t", []byte(`{"$schema":"`+d+`","type":"string"}`))
		require.NoError(t, err, d)
		require.Error(t, s.Check([]byte(`1`)))
	}
}
