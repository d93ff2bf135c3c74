package web

import "github.com/heraldhooks/herald"

// deadReasonHelp says in a sentence why a delivery with reason went dead,
// for the dashboard's title on the reason's badge; "" for a reason it
// does not know.
func deadReasonHelp(reason string) string {
	switch herald.DeadReason(reason) {
	case herald.DeadGone:
		return "The receiver answered 410 Gone; its endpoint was disabled."
	case herald.DeadClientError:
		return "The receiver refused it with a 4xx that retrying cannot fix."
	case herald.DeadExhausted:
		return "Every attempt of its retry schedule failed."
	case herald.DeadEndpointDisabled:
		return "Its endpoint was disabled; replay once it is enabled again."
	case herald.DeadLeaseLost:
		return "Its lease was lost --max-lease-losses times: every node that took it died or froze before its attempt ended. A replay gives it a fresh count."
	}
	return ""
}
