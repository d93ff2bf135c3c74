package api

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strconv"
	"strings"
	"sync"
)

// rawMessageType is a value kept as its bytes: its members are the
// client's own (an event payload), never checked.
var rawMessageType = reflect.TypeFor[json.RawMessage]()

// checkMemberNames holds a request body that decoded into dst to the names the API documents, which encoding/json alone does not: it
// matches a member to a field without regard to case, so "PAYLOAD" was taken
// for payload, and it keeps the last of two members of one name. Either
// made the body mean one thing to Herald and another to a client, a proxy or
// a log that reads it as written. So a member whose name matches a field only
// without regard to case is refused as an unknown field, and a name given
// twice in one object is refused, at any depth but inside values kept as
// their bytes.
//
// A body decoded into a flat struct (flatFields: an event's, on every
// ingest call) has only its top-level names to check, which one scan of
// the bytes finds (objectNames) where the walk decodes each value again,
// the payload twice.
func checkMemberNames(body []byte, dst any) error {
	t := reflect.TypeOf(dst)
	if fields := flatFields(t); fields != nil {
		if names, ok := objectNames(body); ok {
			return checkNames(names, fields)
		}
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	return walkMembers(dec, t, "")
}

// flatTypes holds flatFields' answers by type.
var flatTypes sync.Map // reflect.Type → map[string]reflect.Type, nil if not flat

// flatFields returns the member names of t (a struct or a pointer to
// one) if none of its members can hold an object whose names are checked
// (each is a string, number or boolean, a pointer to one, or a value kept
// as its bytes), else nil.
func flatFields(t reflect.Type) map[string]reflect.Type {
	if v, ok := flatTypes.Load(t); ok {
		return v.(map[string]reflect.Type)
	}
	fields := map[string]reflect.Type{}
	st := t
	for st != nil && st.Kind() == reflect.Pointer {
		st = st.Elem()
	}
	if st == nil || st.Kind() != reflect.Struct {
		fields = nil
	} else {
		jsonFields(st, fields)
		for _, ft := range fields {
			if !flatMember(ft) {
				fields = nil
				break
			}
		}
	}
	flatTypes.Store(t, fields)
	return fields
}

// flatMember says whether a member of type t holds nothing whose names
// walkMembers would check.
func flatMember(t reflect.Type) bool {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == rawMessageType {
		return true
	}
	switch t.Kind() {
	case reflect.String, reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Float32, reflect.Float64,
		reflect.Interface:
		return true
	}
	return false
}

// checkNames checks the names of a body's top-level object, in order.
func checkNames(names []string, fields map[string]reflect.Type) error {
	seen := make(map[string]bool, len(names))
	for _, name := range names {
		if err := checkName(name, seen, fields, ""); err != nil {
			return err
		}
	}
	return nil
}

// checkName checks one member name of the object at path: not given
// before in it (seen, which it adds the name to) and, in a struct's
// object (fields not nil), a field's own name.
func checkName(name string, seen map[string]bool, fields map[string]reflect.Type, path string) error {
	if seen[name] {
		return badRequest("invalid_json", "the request body has %q twice%s; give each member once", name, within(path))
	}
	seen[name] = true
	if _, ok := fields[name]; fields != nil && !ok {
		return unknownMember(name, fields)
	}
	return nil
}

// objectNames returns the member names of the object body holds, in order,
// reading body as the valid JSON it was found to be; ok is false where
// it cannot tell them by a plain scan (a name with an escape, or a body
// that is not an object), and the walk reads it instead.
func objectNames(body []byte) (names []string, ok bool) {
	i := skipSpace(body, 0)
	if i >= len(body) || body[i] != '{' {
		return nil, false
	}
	i++
	for {
		i = skipSpace(body, i)
		if i < len(body) && body[i] == ',' {
			i = skipSpace(body, i+1)
		}
		if i >= len(body) {
			return nil, false
		}
		if body[i] == '}' {
			return names, true
		}
		if body[i] != '"' {
			return nil, false
		}
		end := bytes.IndexByte(body[i+1:], '"')
		if end < 0 {
			return nil, false
		}
		name := body[i+1 : i+1+end]
		if bytes.IndexByte(name, '\\') >= 0 {
			return nil, false
		}
		names = append(names, string(name))
		i = skipSpace(body, i+2+end)
		if i >= len(body) || body[i] != ':' {
			return nil, false
		}
		if i, ok = skipValue(body, i+1); !ok {
			return nil, false
		}
	}
}

// skipSpace is the index of the first byte of b from i that is not JSON
// white space.
func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// skipValue is the index of the ',' or '}' that ends the member value
// starting at b[i], in an object of valid JSON.
func skipValue(b []byte, i int) (int, bool) {
	depth := 0
	for ; i < len(b); i++ {
		switch b[i] {
		case '"':
			for i++; i < len(b) && b[i] != '"'; i++ {
				if b[i] == '\\' {
					i++
				}
			}
		case '{', '[':
			depth++
		case '}', ']':
			if depth == 0 {
				return i, true
			}
			depth--
		case ',':
			if depth == 0 {
				return i, true
			}
		}
	}
	return i, false
}

// walkMembers reads one JSON value from dec, which decodes into type t, and
// checks the names of the objects in it. path names the value in errors.
func walkMembers(dec *json.Decoder, t reflect.Type, path string) error {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil || t == rawMessageType || t.Kind() == reflect.Interface {
		var skip json.RawMessage
		return dec.Decode(&skip)
	}
	tok, err := dec.Token()
	if err != nil {
		return jsonError(err)
	}
	switch tok {
	case json.Delim('{'):
		var fields map[string]reflect.Type
		if t.Kind() == reflect.Struct {
			fields = make(map[string]reflect.Type)
			jsonFields(t, fields)
		}
		seen := make(map[string]bool)
		for dec.More() {
			tok, err := dec.Token()
			if err != nil {
				return jsonError(err)
			}
			name, _ := tok.(string)
			if err := checkName(name, seen, fields, path); err != nil {
				return err
			}
			elem := fields[name] // nil unless a struct
			if t.Kind() == reflect.Map {
				elem = t.Elem()
			}
			if err := walkMembers(dec, elem, joinPath(path, name)); err != nil {
				return err
			}
		}
		_, err = dec.Token() // '}'
		return err
	case json.Delim('['):
		var elem reflect.Type
		if t.Kind() == reflect.Slice || t.Kind() == reflect.Array {
			elem = t.Elem()
		}
		for i := 0; dec.More(); i++ {
			if err := walkMembers(dec, elem, path+"["+strconv.Itoa(i)+"]"); err != nil {
				return err
			}
		}
		_, err = dec.Token() // ']'
		return err
	}
	return nil // a string, number, boolean or null
}

// unknownMember refuses a member that matched a field only without regard
// to case (encoding/json refused every other unknown one already).
func unknownMember(name string, fields map[string]reflect.Type) error {
	for field := range fields {
		if strings.EqualFold(field, name) {
			return badRequest("unknown_field", "unknown field %q: names are case-sensitive; the field is %q", name, field)
		}
	}
	return badRequest("unknown_field", "unknown field %q", name)
}

// jsonFields lists the member names encoding/json gives the fields of
// struct type t, with embedded structs' fields promoted, and their types.
func jsonFields(t reflect.Type, out map[string]reflect.Type) {
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				jsonFields(ft, out)
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = f.Type
	}
}

// within names where in the body a member is, for messages: "" at the top.
func within(path string) string {
	if path == "" {
		return ""
	}
	return " in " + path
}

func joinPath(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}
