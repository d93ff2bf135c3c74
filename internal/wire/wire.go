// Package wire holds the JSON shapes of Herald's HTTP API, shared by the
// server, the Go client and the OpenAPI check.
//
// Each request and answer body is one struct here, with its json tags, so a
// field is added in one place: the server (internal/api) decodes requests
// into these types and answers with them, the client (internal/client)
// sends and decodes the same types, and the API's tests hold every field of
// them to openapi.json. Conversions from the domain types stay with the
// server.
//
// The Go types are the ones a caller wants (a Duration, an int status code,
// a string secret); where the API writes null for "none" (no status code,
// no dead reason, an ed25519 endpoint's secret), the type's MarshalJSON
// writes null for the zero value, and decoding null leaves the zero value.
// Request bodies carry pointers and omitempty, so that a client sends only
// what it sets and the server tells an absent field from a zero one.
package wire

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"time"

	"github.com/heraldhooks/herald"
)

// Duration is a time.Duration that travels as a Go duration string ("30s",
// "5m"), as the API writes durations.
type Duration time.Duration

// MarshalJSON writes d as herald.FormatDuration does: "5m", not "5m0s".
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(d.String()) }

// UnmarshalJSON reads a Go duration string. What is not one is refused with
// a *json.UnmarshalTypeError, so that encoding/json names the field in it
// (Field: "timeout", "retry_policy.base"): a value that is not a string
// has Value "number", "bool", …, and Type string; a string that is not a
// duration (or a null inside a list) has Type Duration. The server answers
// each with the code of the field (see DurationType).
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s *string
	if err := json.Unmarshal(b, &s); err != nil {
		return &json.UnmarshalTypeError{Value: jsonKind(b), Type: reflect.TypeFor[string]()}
	}
	if s == nil {
		return &json.UnmarshalTypeError{Value: "null", Type: DurationType}
	}
	v, err := time.ParseDuration(*s)
	if err != nil {
		return &json.UnmarshalTypeError{Value: "string " + fmt.Sprintf("%q", *s), Type: DurationType}
	}
	*d = Duration(v)
	return nil
}

// DurationType is the type a *json.UnmarshalTypeError names for a string
// that is not a Go duration.
var DurationType = reflect.TypeFor[Duration]()

// String writes d without the zero units time.Duration adds: "5m", not
// "5m0s".
func (d Duration) String() string { return herald.FormatDuration(time.Duration(d)) }

// jsonKind names the kind of the JSON value b for an UnmarshalTypeError.
func jsonKind(b []byte) string {
	switch b = bytes.TrimSpace(b); {
	case len(b) == 0:
		return "value"
	case b[0] == '{':
		return "object"
	case b[0] == '[':
		return "array"
	case b[0] == 't' || b[0] == 'f':
		return "bool"
	case b[0] == 'n':
		return "null"
	}
	return "number"
}

// List is one page of a list: {"data": [...], "next_cursor": "…"}, the
// cursor "" at the end.
type List[T any] struct {
	Data       []T    `json:"data"`
	NextCursor string `json:"next_cursor"`
}

// Error is every failure's answer: {"error": {"code", "message"}}.
type Error struct {
	Error ErrorDetail `json:"error"`
}

// ErrorDetail is what went wrong: a stable code and a message for people.
type ErrorDetail struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// Status answers the probes (GET /healthz, GET /readyz): {"status": "ok"}.
type Status struct {
	Status string `json:"status"`
}

// ReplayResult answers a bulk replay: how many deliveries went back to pending,
// or with DryRun how many would have.
type ReplayResult struct {
	Replayed int  `json:"replayed"`
	DryRun   bool `json:"dry_run"`
}

// EmptyRequest is a body that may only be {} (or absent).
type EmptyRequest struct{}

// marshal encodes v without escaping <, > and &, as the server writes its
// answers: a MarshalJSON that escaped them would change the server's bytes
// (encoding/json only compacts what a MarshalJSON returns, and escapes it
// when the caller's encoder does).
func marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte{'\n'}), nil
}

// nullString is s, or nil (null) when s is "".
func nullString(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// nullInt is n, or nil (null) when n is 0.
func nullInt(n int) *int {
	if n == 0 {
		return nil
	}
	return &n
}

// FieldNames lists the JSON member names of struct type t (a pointer is
// followed), embedded structs' fields promoted, fields tagged "-" left out.
// The OpenAPI check and this package's tests use it.
func FieldNames(t reflect.Type) []string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	var out []string
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" && f.Type.Kind() == reflect.Struct {
			out = append(out, FieldNames(f.Type)...)
			continue
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out = append(out, name)
	}
	return out
}
