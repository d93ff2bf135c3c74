package api_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/heraldhooks/herald"
)

// spec is openapi.json, read for the checks that hold the API to it: every
// answer the tests receive is checked against the documented statuses and
// schemas (see env.checkAnswer), so an undocumented status, error code or
// field fails the test that met it.
type spec struct {
	doc map[string]any
}

// parseSpec reads herald.OpenAPI.
func parseSpec() (*spec, error) {
	doc, err := decodeJSONValue(herald.OpenAPI)
	if err != nil {
		return nil, fmt.Errorf("parse openapi.json: %w", err)
	}
	m, ok := doc.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("openapi.json is not a JSON object")
	}
	return &spec{doc: m}, nil
}

// decodeJSONValue decodes b keeping numbers as json.Number, so that an
// integer is told apart from a number.
func decodeJSONValue(b []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, fmt.Errorf("more than one JSON value")
	}
	return v, nil
}

// resolve follows a local reference ("#/components/schemas/Endpoint").
func (s *spec) resolve(ref string) (any, error) {
	rest, ok := strings.CutPrefix(ref, "#/")
	if !ok {
		return nil, fmt.Errorf("reference %q is not local", ref)
	}
	var cur any = s.doc
	for _, part := range strings.Split(rest, "/") {
		part = strings.ReplaceAll(strings.ReplaceAll(part, "~1", "/"), "~0", "~")
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("reference %q: %q is not inside an object", ref, part)
		}
		if cur, ok = m[part]; !ok {
			return nil, fmt.Errorf("reference %q: no %q", ref, part)
		}
	}
	return cur, nil
}

// deref returns obj, or what its $ref names when it is a reference object.
func (s *spec) deref(obj any) (map[string]any, error) {
	for range 10 {
		m, ok := obj.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("expected an object, got %T", obj)
		}
		ref, ok := m["$ref"].(string)
		if !ok {
			return m, nil
		}
		var err error
		if obj, err = s.resolve(ref); err != nil {
			return nil, err
		}
	}
	return nil, fmt.Errorf("references nest too deep")
}

// schema returns components/schemas/name.
func (s *spec) schema(name string) (map[string]any, error) {
	return s.deref(map[string]any{"$ref": "#/components/schemas/" + name})
}

// properties returns the property names a schema documents, through $ref
// and allOf.
func (s *spec) properties(schema any) ([]string, error) {
	m, err := s.deref(schema)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	if props, ok := m["properties"].(map[string]any); ok {
		for name := range props {
			seen[name] = true
		}
	}
	if all, ok := m["allOf"].([]any); ok {
		for _, sub := range all {
			names, err := s.properties(sub)
			if err != nil {
				return nil, err
			}
			for _, n := range names {
				seen[n] = true
			}
		}
	}
	out := make([]string, 0, len(seen))
	for n := range seen {
		out = append(out, n)
	}
	sort.Strings(out)
	return out, nil
}

// operation finds the documented operation for method and a concrete path
// such as /v1/endpoints/ep_1: its path template and the operation object.
// As in the router, of the templates the path fills that have the method,
// the one with the most literal segments wins (POST /v1/events/batch is not
// POST /v1/events/{id}, and GET /v1/events/batch is GET /v1/events/{id}).
func (s *spec) operation(method, path string) (string, map[string]any, bool) {
	if method == http.MethodHead {
		method = http.MethodGet
	}
	paths, _ := s.doc["paths"].(map[string]any)
	best, bestLiterals := "", -1
	var bestOp map[string]any
	for tmpl, item := range paths {
		literals, ok := matchTemplate(tmpl, path)
		if !ok {
			continue
		}
		pi, _ := item.(map[string]any)
		op, ok := pi[strings.ToLower(method)].(map[string]any)
		if ok && literals > bestLiterals {
			best, bestLiterals, bestOp = tmpl, literals, op
		}
	}
	return best, bestOp, bestOp != nil
}

// matchTemplate says whether path fills the template, where each {name}
// stands for one non-empty segment, and counts the literal segments.
func matchTemplate(tmpl, path string) (int, bool) {
	ts, ps := strings.Split(tmpl, "/"), strings.Split(path, "/")
	if len(ts) != len(ps) {
		return 0, false
	}
	literals := 0
	for i := range ts {
		if strings.HasPrefix(ts[i], "{") && strings.HasSuffix(ts[i], "}") {
			if ps[i] == "" {
				return 0, false
			}
			continue
		}
		if ts[i] != ps[i] {
			return 0, false
		}
		literals++
	}
	return literals, true
}

// parameters lists the parameters of the operation at path template tmpl:
// the path item's and the operation's, references resolved.
func (s *spec) parameters(tmpl string, op map[string]any) ([]map[string]any, error) {
	paths, _ := s.doc["paths"].(map[string]any)
	item, _ := paths[tmpl].(map[string]any)
	var raw []any
	if ps, ok := item["parameters"].([]any); ok {
		raw = append(raw, ps...)
	}
	if ps, ok := op["parameters"].([]any); ok {
		raw = append(raw, ps...)
	}
	out := make([]map[string]any, 0, len(raw))
	for _, p := range raw {
		m, err := s.deref(p)
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, nil
}

// routerCode is the error code any path may answer with status outside a
// documented operation: no key on /v1, no such path, a method the path
// does not serve.
func routerCode(status int) (string, bool) {
	switch status {
	case http.StatusUnauthorized:
		return "unauthorized", true
	case http.StatusNotFound:
		return "not_found", true
	case http.StatusMethodNotAllowed:
		return "method_not_allowed", true
	}
	return "", false
}

// checkExchange checks one request and its answer against the document and
// returns every difference. Every answer must have a documented status and
// match its schema; a request that succeeded must have sent only documented
// query parameters and a body the request schema accepts.
func (s *spec) checkExchange(method string, u *url.URL, reqBody []byte, status int, header http.Header, body []byte) []string {
	tmpl, op, ok := s.operation(method, u.Path)
	name := method + " " + u.Path
	if !ok {
		code, known := routerCode(status)
		if !known {
			return []string{fmt.Sprintf("%s answered %d, but the document has no such operation", name, status)}
		}
		return s.checkError(name, header, body, code)
	}
	name = method + " " + tmpl
	var problems []string
	responses, _ := op["responses"].(map[string]any)
	raw, ok := responses[strconv.Itoa(status)]
	if !ok {
		return []string{fmt.Sprintf("%s answered %d, which the document does not list: %s", name, status, body)}
	}
	resp, err := s.deref(raw)
	if err != nil {
		return []string{fmt.Sprintf("%s %d: %v", name, status, err)}
	}
	content, _ := resp["content"].(map[string]any)
	media, isJSON := content["application/json"].(map[string]any)
	switch {
	case method == http.MethodHead:
		return problems // GET's answer without its body
	case len(content) == 0 && len(body) != 0:
		problems = append(problems, fmt.Sprintf("%s %d is documented without a body, but the answer has one: %s", name, status, body))
	case isJSON:
		if ct := header.Get("Content-Type"); ct != "application/json" {
			problems = append(problems, fmt.Sprintf("%s %d: Content-Type %q, documented application/json", name, status, ct))
		}
		v, err := decodeJSONValue(body)
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s %d: the answer is not JSON: %v", name, status, err))
			break
		}
		for _, p := range s.validate(media["schema"], v, "answer") {
			problems = append(problems, fmt.Sprintf("%s %d: %s", name, status, p))
		}
	}
	if status >= 400 {
		return append(problems, checkMessage(name, body)...)
	}
	if status >= 300 {
		return problems
	}
	return append(problems, s.checkRequest(name, tmpl, op, u, reqBody)...)
}

// checkMessage checks that an error about a field names it: the message
// of code invalid_<field> mentions <field> (invalid_json, invalid_body and
// invalid_type name the field in other ways).
func checkMessage(name string, body []byte) []string {
	var out struct {
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(body, &out); err != nil {
		return []string{fmt.Sprintf("%s: the error answer is not JSON: %v", name, err)}
	}
	if out.Error.Message == "" {
		return []string{fmt.Sprintf("%s: error %q has no message", name, out.Error.Code)}
	}
	field, ok := strings.CutPrefix(out.Error.Code, "invalid_")
	if !ok || field == "json" || field == "body" || field == "type" {
		return nil
	}
	if !strings.Contains(out.Error.Message, field) {
		return []string{fmt.Sprintf("%s: error %q does not name the field %s: %q", name, out.Error.Code, field, out.Error.Message)}
	}
	return nil
}

// checkRequest checks a request that succeeded: its query parameters and
// its body are documented.
func (s *spec) checkRequest(name, tmpl string, op map[string]any, u *url.URL, reqBody []byte) []string {
	var problems []string
	params, err := s.parameters(tmpl, op)
	if err != nil {
		return []string{fmt.Sprintf("%s: %v", name, err)}
	}
	for key, values := range u.Query() {
		i := slices.IndexFunc(params, func(p map[string]any) bool { return p["in"] == "query" && p["name"] == key })
		if i < 0 {
			problems = append(problems, fmt.Sprintf("%s accepted query parameter %q, which the document does not list", name, key))
			continue
		}
		for _, v := range values {
			var val any = v
			if typ, _ := params[i]["schema"].(map[string]any)["type"].(string); typ == "integer" {
				val = json.Number(v)
			}
			for _, p := range s.validate(params[i]["schema"], val, "?"+key) {
				problems = append(problems, fmt.Sprintf("%s accepted %s", name, p))
			}
		}
	}
	if len(bytes.TrimSpace(reqBody)) == 0 {
		return problems
	}
	rb, ok := op["requestBody"].(map[string]any)
	if !ok {
		return problems
	}
	media, _ := rb["content"].(map[string]any)["application/json"].(map[string]any)
	v, err := decodeJSONValue(reqBody)
	if err != nil {
		return append(problems, fmt.Sprintf("%s accepted a body that is not JSON: %v", name, err))
	}
	for _, p := range s.validate(media["schema"], v, "request") {
		problems = append(problems, fmt.Sprintf("%s accepted a body the document refuses: %s", name, p))
	}
	return problems
}

// checkError checks an error answer outside any operation.
func (s *spec) checkError(name string, header http.Header, body []byte, code string) []string {
	v, err := decodeJSONValue(body)
	if err != nil {
		return []string{fmt.Sprintf("%s: the error answer is not JSON: %v", name, err)}
	}
	problems := s.validate(map[string]any{"$ref": "#/components/schemas/Error"}, v, "answer")
	if got, _ := v.(map[string]any)["error"].(map[string]any)["code"].(string); got != code {
		problems = append(problems, fmt.Sprintf("%s: error code %q where the router answers %q", name, got, code))
	}
	if ct := header.Get("Content-Type"); ct != "application/json" {
		problems = append(problems, fmt.Sprintf("%s: Content-Type %q", name, ct))
	}
	return problems
}

// knownKeyword says whether validate understands the JSON Schema keyword
// k; a schema using any other fails, so that no rule is skipped unnoticed.
func knownKeyword(k string) bool {
	switch k {
	case "$ref", "allOf", "anyOf", "oneOf", "type", "enum", "const", "properties", "required",
		"additionalProperties", "maxProperties", "items", "minItems", "maxItems", "minimum", "maximum",
		"exclusiveMinimum", "minLength", "maxLength", "pattern", "format":
		return true
	case "description", "examples", "default", "title": // annotations, which constrain nothing
		return true
	}
	return false
}

// validate checks the JSON value v (numbers as json.Number) against schema
// and returns each difference, named by its place (at).
func (s *spec) validate(schema, v any, at string) []string {
	sch, ok := schema.(map[string]any)
	if !ok {
		return []string{fmt.Sprintf("%s: the schema is not an object", at)}
	}
	var problems []string
	fail := func(format string, args ...any) {
		problems = append(problems, at+": "+fmt.Sprintf(format, args...))
	}
	for k := range sch {
		if !knownKeyword(k) {
			fail("schema keyword %q is not understood by this check", k)
		}
	}
	if ref, ok := sch["$ref"].(string); ok {
		target, err := s.resolve(ref)
		if err != nil {
			fail("%v", err)
		} else {
			problems = append(problems, s.validate(target, v, at)...)
		}
	}
	if all, ok := sch["allOf"].([]any); ok {
		for _, sub := range all {
			problems = append(problems, s.validate(sub, v, at)...)
		}
	}
	for _, kw := range []string{"anyOf", "oneOf"} {
		alts, ok := sch[kw].([]any)
		if !ok {
			continue
		}
		matched := 0
		var why []string
		for _, sub := range alts {
			if p := s.validate(sub, v, at); len(p) == 0 {
				matched++
			} else {
				why = append(why, p...)
			}
		}
		if matched == 0 || kw == "oneOf" && matched > 1 {
			fail("matches %d of the %s alternatives: %s", matched, kw, strings.Join(why, "; "))
		}
	}
	if t, ok := sch["type"]; ok {
		var types []string
		switch t := t.(type) {
		case string:
			types = []string{t}
		case []any:
			for _, x := range t {
				types = append(types, fmt.Sprint(x))
			}
		}
		if !slices.ContainsFunc(types, func(typ string) bool { return hasType(v, typ) }) {
			fail("%s is not of type %s", brief(v), strings.Join(types, " or "))
			return problems
		}
	}
	if enum, ok := sch["enum"].([]any); ok && !slices.ContainsFunc(enum, func(e any) bool { return jsonEqual(e, v) }) {
		fail("%s is not one of %v", brief(v), enum)
	}
	if c, ok := sch["const"]; ok && !jsonEqual(c, v) {
		fail("%s is not %v", brief(v), c)
	}
	switch v := v.(type) {
	case map[string]any:
		problems = append(problems, s.validateObject(sch, v, at)...)
	case []any:
		if n, ok := number(sch["minItems"]); ok && float64(len(v)) < n {
			fail("%d items, fewer than %v", len(v), n)
		}
		if n, ok := number(sch["maxItems"]); ok && float64(len(v)) > n {
			fail("%d items, more than %v", len(v), n)
		}
		if items, ok := sch["items"]; ok {
			for i, x := range v {
				problems = append(problems, s.validate(items, x, fmt.Sprintf("%s[%d]", at, i))...)
			}
		}
	case string:
		n := float64(utf8.RuneCountInString(v))
		if m, ok := number(sch["minLength"]); ok && n < m {
			fail("%q is shorter than %v", v, m)
		}
		if m, ok := number(sch["maxLength"]); ok && n > m {
			fail("%d characters, more than %v", int(n), m)
		}
		if p, ok := sch["pattern"].(string); ok {
			re, err := regexp.Compile(p)
			if err != nil {
				fail("pattern %q: %v", p, err)
			} else if !re.MatchString(v) {
				fail("%q does not match %s", v, p)
			}
		}
		switch sch["format"] {
		case "date-time":
			if _, err := time.Parse(time.RFC3339Nano, v); err != nil {
				fail("%q is not an RFC 3339 time", v)
			}
		case "uri":
			if u, err := url.Parse(v); err != nil || !u.IsAbs() {
				fail("%q is not an absolute URI", v)
			}
		}
	case json.Number:
		f, _ := v.Float64()
		if m, ok := number(sch["minimum"]); ok && f < m {
			fail("%v is below %v", v, m)
		}
		if m, ok := number(sch["maximum"]); ok && f > m {
			fail("%v is above %v", v, m)
		}
		if m, ok := number(sch["exclusiveMinimum"]); ok && f <= m {
			fail("%v is not above %v", v, m)
		}
	}
	return problems
}

func (s *spec) validateObject(sch, v map[string]any, at string) []string {
	var problems []string
	props, _ := sch["properties"].(map[string]any)
	if req, ok := sch["required"].([]any); ok {
		for _, name := range req {
			if _, ok := v[name.(string)]; !ok {
				problems = append(problems, fmt.Sprintf("%s: lacks %q", at, name))
			}
		}
	}
	if n, ok := number(sch["maxProperties"]); ok && float64(len(v)) > n {
		problems = append(problems, fmt.Sprintf("%s: %d properties, more than %v", at, len(v), n))
	}
	keys := make([]string, 0, len(v))
	for k := range v {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if ps, ok := props[k]; ok {
			problems = append(problems, s.validate(ps, v[k], at+"."+k)...)
			continue
		}
		switch extra := sch["additionalProperties"].(type) {
		case bool:
			if !extra {
				problems = append(problems, fmt.Sprintf("%s: has %q, which the document does not list", at, k))
			}
		case map[string]any:
			problems = append(problems, s.validate(extra, v[k], at+"."+k)...)
		}
	}
	return problems
}

func hasType(v any, typ string) bool {
	switch typ {
	case "null":
		return v == nil
	case "boolean":
		_, ok := v.(bool)
		return ok
	case "string":
		_, ok := v.(string)
		return ok
	case "object":
		_, ok := v.(map[string]any)
		return ok
	case "array":
		_, ok := v.([]any)
		return ok
	case "number":
		_, ok := v.(json.Number)
		return ok
	case "integer":
		n, ok := v.(json.Number)
		if !ok {
			return false
		}
		_, err := n.Int64()
		return err == nil
	}
	return false
}

func number(v any) (float64, bool) {
	n, ok := v.(json.Number)
	if !ok {
		return 0, false
	}
	f, err := n.Float64()
	return f, err == nil
}

func jsonEqual(a, b any) bool {
	ab, _ := json.Marshal(a)
	bb, _ := json.Marshal(b)
	return bytes.Equal(ab, bb)
}

// brief shows a value in a message, cut short.
func brief(v any) string {
	b, _ := json.Marshal(v)
	if len(b) > 80 {
		return string(b[:80]) + "…"
	}
	return string(b)
}
