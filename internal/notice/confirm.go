package notice

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"time"
)

// ConfirmPath is the portal page a confirmation link opens: a GET shows a
// Confirm button and only its POST confirms, so a mail scanner that
// fetches every link in a message confirms nothing.
const ConfirmPath = "/portal/confirm"

// Confirmation asks the reader of Email to confirm it: notices about
// ConsumerID's endpoints are mailed there only once the link holding
// Token (valid until ExpiresAt) was opened.
type Confirmation struct {
	ConsumerID string
	Email      string
	Token      string
	// TokenHash is the SHA-256 of Token, as stored: the mailer withdraws
	// it when the mail cannot be sent.
	TokenHash [32]byte
	ExpiresAt time.Time
}

// Confirmer composes and sends confirmation mails. The API does not call
// it in the request that set the address: it queues the mail on the
// Mailer (Mailer.QueueConfirmation), which sends it through the Confirmer
// and tries again on failure.
type Confirmer struct {
	sender  Sender
	base    string
	counted func(kind, result string)
}

// NewConfirmer makes a Confirmer that sends through sender links to
// baseURL (--public-url: where browsers reach this Herald, such as
// https://hooks.example.com). counted, when set, counts each mail's
// result under KindConfirmation.
func NewConfirmer(sender Sender, baseURL string, counted func(kind, result string)) *Confirmer {
	return &Confirmer{sender: sender, base: strings.TrimRight(baseURL, "/"), counted: counted}
}

// Link is the confirmation page of c on this server.
func (c *Confirmer) Link(consumerID, token string) string {
	return ConfirmLink(c.base, consumerID, token)
}

// ConfirmLink is the confirmation page under baseURL for consumerID's
// token.
func ConfirmLink(baseURL, consumerID, token string) string {
	q := url.Values{"consumer": {consumerID}, "token": {token}}
	return strings.TrimRight(baseURL, "/") + ConfirmPath + "?" + q.Encode()
}

// MailConfirmation sends cf's mail, and returns when the mail server took
// it or refused it.
func (c *Confirmer) MailConfirmation(ctx context.Context, cf Confirmation) error {
	ctx, cancel := context.WithTimeout(ctx, sendTimeout)
	defer cancel()
	err := c.sender.Send(ctx, composeConfirmation(cf, c.Link(cf.ConsumerID, cf.Token)))
	if c.counted != nil {
		if err != nil {
			c.counted(KindConfirmation, ResultFailed)
		} else {
			c.counted(KindConfirmation, ResultSent)
		}
	}
	if err != nil {
		return fmt.Errorf("mail confirmation: %w", err)
	}
	return nil
}

// composeConfirmation writes the mail of cf: who asked for what, the link,
// the API call for a script, and what to do if it was not expected.
func composeConfirmation(cf Confirmation, link string) *Message {
	var b strings.Builder
	fmt.Fprintf(&b, "Hello,\n\nThis address (%s) was given to receive Herald's notices about the webhook\n", cf.Email)
	fmt.Fprintf(&b, "endpoints of consumer %s: a mail when an endpoint is failing or was disabled, or a\n", cf.ConsumerID)
	b.WriteString("delivery went dead. Nothing is mailed here until the address is confirmed.\n\n")
	fmt.Fprintf(&b, "To confirm, open this link and press Confirm (it works once, until %s):\n\n", stamp(cf.ExpiresAt))
	fmt.Fprintf(&b, "  %s\n\n", link)
	b.WriteString("A script holding an API key of this consumer can confirm instead with\n")
	fmt.Fprintf(&b, "  POST /v1/consumers/%s/notifications/confirm\n", url.PathEscape(cf.ConsumerID))
	fmt.Fprintf(&b, "  {\"token\": %q}\n\n", cf.Token)
	b.WriteString("If you did not expect this mail, ignore it: without a confirmation, Herald mails this\n" +
		"address nothing more.\n")
	return &Message{
		To:      cf.Email,
		Subject: "Herald: confirm this address for notices about consumer " + oneLine(cf.ConsumerID),
		Text:    b.String(),
	}
}

// oneLine keeps s on one line of a header.
func oneLine(s string) string {
	return strings.Join(strings.FieldsFunc(s, func(r rune) bool { return r < ' ' || r == 0x7f }), " ")
}
