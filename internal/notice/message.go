package notice

import (
	"fmt"
	"strings"
	"time"
)

// Message is one mail: plain text, to one address. The sender (From) is
// the Sender's.
type Message struct {
	To      string
	Subject string
	Text    string
}

// maxErrorShown bounds the last error quoted in a mail.
const maxErrorShown = 500

// compose writes the mail for d to addr: what happened, to which endpoint
// (id and URL), why, when, and what to do.
func compose(addr string, d *details) *Message {
	var subject, what, todo string
	switch d.Kind {
	case KindFailing:
		subject = fmt.Sprintf("Herald: your endpoint %s is failing", d.EndpointID)
		what = fmt.Sprintf("Webhook deliveries to this endpoint are failing: %d attempts in a row did not succeed", d.ConsecutiveFailures)
		if !d.FailingSince.IsZero() {
			what += ", the first at " + stamp(d.FailingSince)
		}
		what += "."
		todo = "Check that your receiver is up and answers POST requests at this URL with a 2xx status\n" +
			"within its timeout. Herald keeps retrying on its schedule and holds back while the\n" +
			"endpoint keeps failing; once an attempt succeeds, deliveries resume by themselves.\n" +
			"An endpoint that keeps failing is disabled."
	case KindDisabled:
		subject = fmt.Sprintf("Herald: your endpoint %s was disabled", d.EndpointID)
		what = "This endpoint was disabled: Herald sends it nothing until it is enabled again.\n" +
			"Its deliveries that were waiting went to the dead letters."
		todo = "Fix the receiver, then enable the endpoint again (in the portal, or with\n" +
			"POST /v1/endpoints/" + d.EndpointID + "/enable) and replay its dead deliveries\n" +
			"(POST /v1/endpoints/" + d.EndpointID + "/replay)."
	case KindDead:
		subject = fmt.Sprintf("Herald: a delivery to your endpoint %s went dead", d.EndpointID)
		what = fmt.Sprintf("Delivery %s (event %s, type %s) went dead after %d attempt(s):\n"+
			"Herald will not try it again by itself.", d.DeliveryID, d.EventID, d.EventType, d.AttemptCount)
		todo = "Once your receiver works again, replay it (in the portal, or with\n" +
			"POST /v1/deliveries/" + d.DeliveryID + "/replay); the event keeps its id, so a receiver\n" +
			"that deduplicates by webhook-id handles it once."
	}

	var b strings.Builder
	fmt.Fprintf(&b, "Hello,\n\n%s\n\n", what)
	fmt.Fprintf(&b, "Endpoint:  %s\n", d.EndpointID)
	if d.URL != "" {
		fmt.Fprintf(&b, "URL:       %s\n", d.URL)
	}
	fmt.Fprintf(&b, "Consumer:  %s\n", d.ConsumerID)
	fmt.Fprintf(&b, "When:      %s\n", stamp(d.At))
	if why := why(d); why != "" {
		fmt.Fprintf(&b, "Why:       %s\n", why)
	}
	fmt.Fprintf(&b, "\nWhat to do:\n%s\n\n", todo)
	b.WriteString("--\nHerald mails this address about the endpoints of this consumer: at most one mail\n" +
		"per endpoint per hour, so later events within the hour are not mailed. The address is\n" +
		"set in the portal's settings, or with PUT /v1/consumers/" + d.ConsumerID + "/notifications.\n")
	return &Message{To: addr, Subject: subject, Text: b.String()}
}

// why says what the last attempt came to, or the reason given.
func why(d *details) string {
	var parts []string
	if d.Kind == KindDisabled && d.Reason != "" {
		parts = append(parts, reasonText(d.Reason))
	}
	if d.Kind == KindDead && d.DeadReason != "" {
		parts = append(parts, reasonText(d.DeadReason))
	}
	if d.LastStatusCode != 0 {
		parts = append(parts, fmt.Sprintf("the last attempt was answered HTTP %d", d.LastStatusCode))
	}
	if e := d.LastError; e != "" {
		if len(e) > maxErrorShown {
			e = e[:maxErrorShown] + "…"
		}
		parts = append(parts, "last error: "+strings.Join(strings.Fields(e), " "))
	}
	return strings.Join(parts, "; ")
}

// reasonText explains Herald's reason codes.
func reasonText(reason string) string {
	switch reason {
	case "gone":
		return "the receiver answered 410 Gone (gone)"
	case "client_error":
		return "the receiver refused it with a 4xx status (client_error)"
	case "exhausted":
		return "every attempt of its retry schedule failed (exhausted)"
	case "endpoint_disabled":
		return "its endpoint was disabled (endpoint_disabled)"
	case "lease_lost":
		return "every Herald node that took it stopped before its attempt ended, too many times (lease_lost)"
	case "auto_disabled", "failing":
		return "it kept failing, so Herald disabled it (" + reason + ")"
	}
	return reason
}

// stamp writes t in UTC, to the second.
func stamp(t time.Time) string {
	return t.UTC().Truncate(time.Second).Format("2006-01-02 15:04:05 UTC")
}
