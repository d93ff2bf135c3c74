package herald_test

import (
	"testing"

	"github.com/heraldhooks/herald"
)

// FuzzMatchEventType holds MatchEventType to a reference written from the
// rules as the API documents them, character by character: "*" matches
// every type but Herald's own (herald.…); a type followed by ".*" matches
// every type that starts with that type and a dot and goes on for at least
// one character more; anything else matches itself only. From two fuzzed
// strings it builds patterns and types that stand in every relation to each
// other, and checks every pair that validation lets through. Matching never
// panics, valid or not.
func FuzzMatchEventType(f *testing.F) {
	for _, seed := range [][2]string{
		{"order", "created"},
		{"order.line", "added"},
		{"herald", "endpoint.failing"},
		{"herald.endpoint", "disabled"},
		{"a", ""},
		{"", "a"},
		{"order.", "x"},
		{"a..b", "c"},
		{"*", "x"},
		{"order.*", "order"},
		{"Herald", "x"},
		{"heraldx", "y"},
		{"a-b_c.D9", "e"},
	} {
		f.Add(seed[0], seed[1])
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		patterns := []string{a, a + ".*", "*", "herald.*", b, b + ".*", a + "." + b + ".*"}
		types := []string{a, b, a + "." + b, a + ".", "herald." + b, "herald." + a + "." + b, b + "." + a}
		for _, p := range patterns {
			for _, typ := range types {
				got := herald.MatchEventType(p, typ)
				if herald.MatchAny([]string{"nothing.here", p}, typ) != got {
					t.Fatalf("MatchAny([nothing.here %q], %q) differs from MatchEventType", p, typ)
				}
				if herald.ValidateEventTypePattern(p) != nil || herald.ValidateEventType(typ) != nil {
					continue
				}
				if want := referenceMatch(p, typ); got != want {
					t.Fatalf("MatchEventType(%q, %q) = %v, the rules say %v", p, typ, got, want)
				}
			}
		}
	})
}

// referenceMatch applies the documented rules without the strings package.
func referenceMatch(pattern, typ string) bool {
	const notification = "herald."
	if pattern == "*" {
		if len(typ) < len(notification) {
			return true
		}
		for i := 0; i < len(notification); i++ {
			if typ[i] != notification[i] {
				return true
			}
		}
		return false
	}
	n := len(pattern)
	if n >= 2 && pattern[n-2] == '.' && pattern[n-1] == '*' {
		stem := pattern[:n-1] // the type and its dot
		if len(typ) <= len(stem) {
			return false
		}
		for i := 0; i < len(stem); i++ {
			if typ[i] != stem[i] {
				return false
			}
		}
		return true
	}
	if len(pattern) != len(typ) {
		return false
	}
	for i := 0; i < len(pattern); i++ {
		if pattern[i] != typ[i] {
			return false
		}
	}
	return true
}
