package herald

import (
	"fmt"
	"strings"
)

// MaxEventTypeLen is the longest event type accepted.
const MaxEventTypeLen = 128

// ValidateEventType checks that t is 1-128 characters of [a-zA-Z0-9_.-].
func ValidateEventType(t string) error {
	if len(t) == 0 || len(t) > MaxEventTypeLen {
		return fmt.Errorf("event_type must match [a-zA-Z0-9_.-]{1,128}")
	}
	for i := 0; i < len(t); i++ {
		if !eventTypeChar(t[i]) {
			return fmt.Errorf("event_type must match [a-zA-Z0-9_.-]{1,128}")
		}
	}
	return nil
}

func eventTypeChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
		c == '_' || c == '.' || c == '-'
}

// ValidateEventTypePattern checks an endpoint filter: "*", an exact event
// type, or an event type prefix followed by ".*" (as in "order.*").
func ValidateEventTypePattern(p string) error {
	if p == "*" {
		return nil
	}
	if prefix, ok := strings.CutSuffix(p, ".*"); ok {
		if err := ValidateEventType(prefix); err != nil {
			return fmt.Errorf("event type pattern %q: must be \"*\", an event type, or an event type followed by \".*\"", p)
		}
		return nil
	}
	if err := ValidateEventType(p); err != nil {
		return fmt.Errorf("event type pattern %q: must be \"*\", an event type, or an event type followed by \".*\"", p)
	}
	return nil
}

// MatchEventType reports whether event type t matches pattern p: "*" matches
// every event the operator sends, "order.*" matches "order.created" and
// "order.line.added" (but not "order" itself), and anything else must equal
// t. Herald's own notifications (herald.*) are opt-in: "*" does not match
// them; "herald.*" or an exact notification type does.
func MatchEventType(p, t string) bool {
	if p == "*" {
		return !IsNotification(t)
	}
	if prefix, ok := strings.CutSuffix(p, "*"); ok && strings.HasSuffix(prefix, ".") {
		return strings.HasPrefix(t, prefix) && len(t) > len(prefix)
	}
	return p == t
}

// MatchAny reports whether t matches any of the patterns.
func MatchAny(patterns []string, t string) bool {
	for _, p := range patterns {
		if MatchEventType(p, t) {
			return true
		}
	}
	return false
}
