package api_test

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/heraldhooks/herald/internal/wire"
)

// wireDoc says where openapi.json documents one struct of internal/wire:
// a JSON pointer into the document ("#/components/schemas/Endpoint"), or
// an operation's request body ("POST /v1/events request") or answer
// ("POST /v1/consumers/{consumer_id}/portal-sessions 201"). subset is set
// for a part of bodies (embedded in others), whose fields are some of the
// schema's rather than all of them.
type wireDoc struct {
	typ    reflect.Type
	at     string
	subset bool
}

// wireDocs lists every struct type internal/wire declares and where
// openapi.json documents it. TestWireTypesMatchOpenAPI fails when a wire
// type is missing here, so a new shape cannot go unchecked.
func wireDocs() map[string]wireDoc {
	schema := func(name string) string { return "#/components/schemas/" + name }
	return map[string]wireDoc{
		"Endpoint":              {typ: reflect.TypeFor[wire.Endpoint](), at: schema("Endpoint")},
		"EndpointHealth":        {typ: reflect.TypeFor[wire.EndpointHealth](), at: schema("EndpointHealth")},
		"RetryPolicy":           {typ: reflect.TypeFor[wire.RetryPolicy](), at: schema("RetryPolicy")},
		"RateLimit":             {typ: reflect.TypeFor[wire.RateLimit](), at: schema("RateLimit")},
		"EndpointRequest":       {typ: reflect.TypeFor[wire.EndpointRequest](), at: "POST /v1/endpoints request"},
		"EndpointReplayRequest": {typ: reflect.TypeFor[wire.EndpointReplayRequest](), at: "POST /v1/endpoints/{id}/replay request"},
		"ReplayOptions":         {typ: reflect.TypeFor[wire.ReplayOptions](), at: "POST /v1/events/{id}/replay request", subset: true},
		"RotateSecretRequest":   {typ: reflect.TypeFor[wire.RotateSecretRequest](), at: "POST /v1/endpoints/{id}/rotate-secret request"},
		"DisableRequest":        {typ: reflect.TypeFor[wire.DisableRequest](), at: "POST /v1/endpoints/{id}/disable request"},
		"EmptyRequest":          {typ: reflect.TypeFor[wire.EmptyRequest](), at: "POST /v1/endpoints/{id}/enable request"},
		"ReplayResult":          {typ: reflect.TypeFor[wire.ReplayResult](), at: "POST /v1/endpoints/{id}/replay 200"},
		"EventRequest":          {typ: reflect.TypeFor[wire.EventRequest](), at: "POST /v1/events request"},
		"BatchRequest":          {typ: reflect.TypeFor[wire.BatchRequest](), at: "POST /v1/events/batch request"},
		"IngestResult":          {typ: reflect.TypeFor[wire.IngestResult](), at: "POST /v1/events 202"},
		"BatchResult":           {typ: reflect.TypeFor[wire.BatchResult](), at: "POST /v1/events/batch 202"},
		"DeliveryRef":           {typ: reflect.TypeFor[wire.DeliveryRef](), at: schema("DeliveryRef")},
		"Event":                 {typ: reflect.TypeFor[wire.Event](), at: "GET /v1/events/{id} 200"},
		"EventSkip":             {typ: reflect.TypeFor[wire.EventSkip](), at: schema("EventSkip")},
		"FilterTestRequest":     {typ: reflect.TypeFor[wire.FilterTestRequest](), at: "POST /v1/endpoints/{id}/filter-test request"},
		"FilterTestAnswer":      {typ: reflect.TypeFor[wire.FilterTestAnswer](), at: "POST /v1/endpoints/{id}/filter-test 200"},
		"FilterTestResult":      {typ: reflect.TypeFor[wire.FilterTestResult](), at: schema("FilterTestResult")},
		"EventReplayRequest":    {typ: reflect.TypeFor[wire.EventReplayRequest](), at: "POST /v1/events/{id}/replay request"},
		"Delivery":              {typ: reflect.TypeFor[wire.Delivery](), at: "GET /v1/deliveries/{id} 200"},
		"Attempt":               {typ: reflect.TypeFor[wire.Attempt](), at: schema("Attempt")},
		"Stats":                 {typ: reflect.TypeFor[wire.Stats](), at: "GET /v1/stats 200"},
		"StatsSeries":           {typ: reflect.TypeFor[wire.StatsSeries](), at: "GET /v1/stats/series 200"},
		"StatsPoint":            {typ: reflect.TypeFor[wire.StatsPoint](), at: "#/components/schemas/StatsPoint"},
		"APIKeyRequest":         {typ: reflect.TypeFor[wire.APIKeyRequest](), at: "POST /v1/api-keys request"},
		// One type for both: key is left out but in the answer that made
		// the key, which documents every field.
		"APIKey":                      {typ: reflect.TypeFor[wire.APIKey](), at: "POST /v1/api-keys 201"},
		"PortalSessionRequest":        {typ: reflect.TypeFor[wire.PortalSessionRequest](), at: "POST /v1/consumers/{consumer_id}/portal-sessions request"},
		"PortalSession":               {typ: reflect.TypeFor[wire.PortalSession](), at: "POST /v1/consumers/{consumer_id}/portal-sessions 201"},
		"PortalRevoked":               {typ: reflect.TypeFor[wire.PortalRevoked](), at: "DELETE /v1/consumers/{consumer_id}/portal-sessions 200"},
		"NoticeAddressRequest":        {typ: reflect.TypeFor[wire.NoticeAddressRequest](), at: "PUT /v1/consumers/{consumer_id}/notifications request"},
		"NoticeAddress":               {typ: reflect.TypeFor[wire.NoticeAddress](), at: "GET /v1/consumers/{consumer_id}/notifications 200"},
		"NoticeAddressConfirmRequest": {typ: reflect.TypeFor[wire.NoticeAddressConfirmRequest](), at: "POST /v1/consumers/{consumer_id}/notifications/confirm request"},
		"List":                        {typ: reflect.TypeFor[wire.List[json.RawMessage]](), at: "GET /v1/endpoints 200"},
		"Error":                       {typ: reflect.TypeFor[wire.Error](), at: schema("Error")},
		"ErrorDetail":                 {typ: reflect.TypeFor[wire.ErrorDetail](), at: schema("Error") + "/properties/error"},
		"Status":                      {typ: reflect.TypeFor[wire.Status](), at: "GET /healthz 200"},
		"EventTypeRequest":            {typ: reflect.TypeFor[wire.EventTypeRequest](), at: "POST /v1/event-types request"},
		"EventTypeUpdateRequest":      {typ: reflect.TypeFor[wire.EventTypeUpdateRequest](), at: "PATCH /v1/event-types/{name} request"},
		"EventType":                   {typ: reflect.TypeFor[wire.EventType](), at: "GET /v1/event-types/{name} 200"},
	}
}

// wireStructs lists the struct types declared in internal/wire's source.
func wireStructs(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("..", "wire", "*.go"))
	require.NoError(t, err)
	var out []string
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, parser.SkipObjectResolution)
		require.NoError(t, err)
		for _, decl := range file.Decls {
			gen, ok := decl.(*ast.GenDecl)
			if !ok || gen.Tok != token.TYPE {
				continue
			}
			for _, spec := range gen.Specs {
				ts := spec.(*ast.TypeSpec)
				if _, isStruct := ts.Type.(*ast.StructType); isStruct && ts.Name.IsExported() {
					out = append(out, ts.Name.Name)
				}
			}
		}
	}
	sort.Strings(out)
	require.NotEmpty(t, out)
	return out
}

// bodySchema finds the schema at a wireDoc's at.
func (s *spec) bodySchema(at string) (any, error) {
	if strings.HasPrefix(at, "#/") {
		return s.resolve(at)
	}
	parts := strings.Fields(at)
	method, path, which := strings.ToLower(parts[0]), parts[1], parts[2]
	paths, _ := s.doc["paths"].(map[string]any)
	item, _ := paths[path].(map[string]any)
	op, err := s.deref(item[method])
	if err != nil {
		return nil, err
	}
	var body map[string]any
	if which == "request" {
		body, err = s.deref(op["requestBody"])
	} else {
		responses, _ := op["responses"].(map[string]any)
		body, err = s.deref(responses[which])
	}
	if err != nil {
		return nil, err
	}
	content, _ := body["content"].(map[string]any)
	media, _ := content["application/json"].(map[string]any)
	return media["schema"], nil
}

// TestWireTypesMatchOpenAPI holds the shapes the server, the client and
// this check share (internal/wire) to openapi.json: each struct's JSON
// fields are the properties of the schema that documents it, so a field
// added to a wire type (or renamed) without openapi.json fails here, and so
// does a documented property no type has.
func TestWireTypesMatchOpenAPI(t *testing.T) {
	t.Parallel()
	s, err := parseSpec()
	require.NoError(t, err)
	docs := wireDocs()

	declared := wireStructs(t)
	listed := make([]string, 0, len(docs))
	for name := range docs {
		listed = append(listed, name)
	}
	sort.Strings(listed)
	require.Equal(t, declared, listed, "every struct of internal/wire is listed in wireDocs, with where openapi.json documents it")

	for name, doc := range docs {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			require.True(t, strings.HasPrefix(doc.typ.Name(), name), "%s is %s", name, doc.typ)
			sch, err := s.bodySchema(doc.at)
			require.NoError(t, err, doc.at)
			require.NotNil(t, sch, "no schema at %s", doc.at)
			props, err := s.properties(sch)
			require.NoError(t, err, doc.at)
			fields := wire.FieldNames(doc.typ)
			require.Equal(t, len(fields), len(slices.Compact(slices.Sorted(slices.Values(fields)))), "%s names a JSON field twice", name)
			for _, f := range fields {
				require.Contains(t, props, f, "wire.%s has the field %q, which openapi.json does not document at %s", name, f, doc.at)
			}
			if !doc.subset {
				for _, p := range props {
					require.Contains(t, fields, p, "openapi.json documents %q at %s, which wire.%s does not have", p, doc.at, name)
				}
			}
		})
	}
}
