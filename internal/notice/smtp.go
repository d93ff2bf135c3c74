package notice

import (
	"context"
	"fmt"

	"github.com/wneessen/go-mail"

	"github.com/heraldhooks/herald/internal/config"
)

// SMTP sends through the server of --smtp-url, with go-mail: one
// connection per message (notices are rare: at most one per endpoint per
// hour), STARTTLS or implicit TLS as the URL says, and login when it
// names a user.
type SMTP struct {
	cfg config.SMTP
}

// NewSMTP makes a Sender of cfg (config.ParseSMTP).
func NewSMTP(cfg *config.SMTP) *SMTP { return &SMTP{cfg: *cfg} }

// Send mails m.
func (s *SMTP) Send(ctx context.Context, m *Message) error {
	msg := mail.NewMsg()
	if err := msg.From(s.cfg.From); err != nil {
		return fmt.Errorf("sender %q: %w", s.cfg.From, err)
	}
	if err := msg.To(m.To); err != nil {
		return fmt.Errorf("recipient %q: %w", m.To, err)
	}
	msg.Subject(m.Subject)
	msg.SetDate()
	msg.SetMessageID()
	msg.SetBodyString(mail.TypeTextPlain, m.Text)

	opts := []mail.Option{mail.WithPort(s.cfg.Port), mail.WithTimeout(sendTimeout)}
	switch s.cfg.Security {
	case config.SMTPImplicitTLS:
		opts = append(opts, mail.WithSSL())
	case config.SMTPOpportunistic:
		opts = append(opts, mail.WithTLSPolicy(mail.TLSOpportunistic))
	default:
		opts = append(opts, mail.WithTLSPolicy(mail.TLSMandatory))
	}
	if s.cfg.Username != "" {
		opts = append(opts, mail.WithSMTPAuth(mail.SMTPAuthAutoDiscover),
			mail.WithUsername(s.cfg.Username), mail.WithPassword(s.cfg.Password))
	}
	c, err := mail.NewClient(s.cfg.Host, opts...)
	if err != nil {
		return fmt.Errorf("smtp client: %w", err)
	}
	if err := c.DialAndSendWithContext(ctx, msg); err != nil {
		return fmt.Errorf("smtp %s:%d: %w", s.cfg.Host, s.cfg.Port, err)
	}
	return nil
}
