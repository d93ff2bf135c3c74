package api

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strconv"
	"strings"
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
func checkMemberNames(body []byte, dst any) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	return walkMembers(dec, reflect.TypeOf(dst), "")
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
			if seen[name] {
				return badRequest("invalid_json", "the request body has %q twice%s; give each member once", name, within(path))
			}
			seen[name] = true
			elem := reflect.Type(nil)
			switch t.Kind() {
			case reflect.Struct:
				ft, ok := fields[name]
				if !ok {
					return unknownMember(name, fields)
				}
				elem = ft
			case reflect.Map:
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
