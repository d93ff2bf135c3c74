// Package schema checks event payloads against the JSON Schemas of the
// event type catalog (API.md, "Event types"). Compile turns a schema into
// a Schema, refusing one that does not compile or that reaches outside
// itself; Schema.Check names the first violation of a payload by its JSON
// pointer; Cache keeps each node's compiled schemas and follows the
// catalog's generation, so a change made on any node is enforced on every
// node within a bounded time.
//
// Schemas are JSON Schema draft 2020-12 (a schema may name another draft
// the library knows in $schema), compiled by
// github.com/santhosh-tekuri/jsonschema/v6. Formats are annotations only,
// as the draft says by default.
package schema

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

// maxMessage bounds the text of a violation or a compile error in an
// answer: an enum of thousands of values is not repeated back whole.
const maxMessage = 400

// printer words the library's messages.
var printer = message.NewPrinter(language.English)

// Schema is a compiled JSON Schema. It is safe for concurrent use.
type Schema struct {
	s *jsonschema.Schema
}

// SchemaError says why a schema was refused.
type SchemaError struct {
	Reason string
}

func (e *SchemaError) Error() string { return e.Reason }

// refuseLoader is the only loader the compiler has: Herald fetches nothing
// (no file, no URL) to compile a schema, so a $ref must point inside the
// schema itself. The drafts' own metaschemas are built into the library
// and need no loading.
type refuseLoader struct{}

func (refuseLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("Herald loads nothing from elsewhere, so a $ref must point inside the schema (it names %s)", url)
}

// Compile compiles raw, the schema of event type name. A schema that is
// not JSON, not a valid schema, or whose $ref reaches outside it (http,
// https, file or any other URL) gives a *SchemaError that says why.
func Compile(name string, raw []byte) (*Schema, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, &SchemaError{Reason: "the schema is not JSON: " + err.Error()}
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.UseLoader(refuseLoader{})
	// A base that is a hierarchical URL, so that a relative $ref
	// ("other.json") resolves to one the loader refuses; .invalid names no
	// host anywhere.
	loc := "https://herald.invalid/event-types/" + name
	if err := c.AddResource(loc, doc); err != nil {
		return nil, &SchemaError{Reason: clip(err.Error())}
	}
	s, err := c.Compile(loc)
	if err != nil {
		// Places inside the schema are named relative to it.
		return nil, &SchemaError{Reason: strings.ReplaceAll(compileReason(err), loc, "")}
	}
	return &Schema{s: s}, nil
}

// compileReason words a compile error in one line: the library's own
// message, which names the keyword and the rule, its nested causes joined.
func compileReason(err error) string {
	var load *jsonschema.LoadURLError
	if errors.As(err, &load) && load.Err != nil {
		return clip(load.Err.Error())
	}
	var ve *jsonschema.SchemaValidationError
	if errors.As(err, &ve) && ve.Err != nil {
		var inner *jsonschema.ValidationError
		if errors.As(ve.Err, &inner) {
			v := firstViolation(inner)
			return clip(fmt.Sprintf("the schema is not valid draft 2020-12: at %s: %s", v.Pointer, v.Message))
		}
	}
	msg := strings.Join(strings.Fields(err.Error()), " ")
	return clip(msg)
}

// Violation is where and how a payload breaks its schema.
type Violation struct {
	// Pointer is the JSON pointer (RFC 6901) of the value that breaks the
	// schema: "/order_id", "/items/0/sku", or "" for the payload itself.
	Pointer string
	// Message says which rule it breaks.
	Message string
}

func (v *Violation) Error() string {
	at := v.Pointer
	if at == "" {
		at = `"" (the payload itself)`
	}
	return "at " + at + ": " + v.Message
}

// Check validates payload, which must be JSON, against s. It answers nil,
// or a *Violation naming the first violation: of all the schema's
// complaints, those at the smallest JSON pointer, so the answer does not
// depend on the order in which the validator happened to look.
func (s *Schema) Check(payload []byte) error {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(payload))
	if err != nil {
		return &Violation{Message: "the payload is not JSON: " + err.Error()}
	}
	err = s.s.Validate(doc)
	if err == nil {
		return nil
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return &Violation{Message: clip(err.Error())}
	}
	return firstViolation(ve)
}

// firstViolation picks, among the leaves of ve (the errors that have no
// causes), those at the smallest pointer, and says what each of them
// wants, in order ("value must be one of 'a', 'b'; got string, want
// array" where an anyOf failed both ways).
func firstViolation(ve *jsonschema.ValidationError) *Violation {
	var leaves []*Violation
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) == 0 {
			leaves = append(leaves, &Violation{
				Pointer: pointer(e.InstanceLocation),
				Message: e.ErrorKind.LocalizedString(printer),
			})
			return
		}
		for _, c := range e.Causes {
			walk(c)
		}
	}
	walk(ve)
	first := slices.MinFunc(leaves, func(a, b *Violation) int { return strings.Compare(a.Pointer, b.Pointer) })
	var msgs []string
	for _, l := range leaves {
		if l.Pointer == first.Pointer {
			msgs = append(msgs, l.Message)
		}
	}
	slices.Sort(msgs)
	return &Violation{Pointer: first.Pointer, Message: clip(strings.Join(slices.Compact(msgs), "; "))}
}

// pointer writes a JSON pointer from its reference tokens.
func pointer(tokens []string) string {
	var b strings.Builder
	for _, t := range tokens {
		b.WriteByte('/')
		b.WriteString(strings.NewReplacer("~", "~0", "/", "~1").Replace(t))
	}
	return b.String()
}

// clip bounds a message's length, on a rune boundary.
func clip(s string) string {
	if len(s) <= maxMessage {
		return s
	}
	cut := maxMessage
	for cut > 0 && (s[cut]&0xC0) == 0x80 {
		cut--
	}
	return s[:cut] + "…"
}
