package config_test

import (
	"bytes"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/heraldhooks/herald/internal/config"
)

func TestParseSMTP(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		url, from string
		want      config.SMTP
	}{
		{"smtp://user:pass@mail.example.com:587?from=herald@example.com", "",
			config.SMTP{Host: "mail.example.com", Port: 587, Security: config.SMTPStartTLS, Username: "user", Password: "pass", From: "<herald@example.com>"}},
		{"smtp://mail.example.com?from=herald@example.com", "",
			config.SMTP{Host: "mail.example.com", Port: 587, Security: config.SMTPStartTLS, From: "<herald@example.com>"}},
		{"smtps://u:p%40ss@mail.example.com", "Herald <herald@example.com>",
			config.SMTP{Host: "mail.example.com", Port: 465, Security: config.SMTPImplicitTLS, Username: "u", Password: "p@ss", From: `"Herald" <herald@example.com>`}},
		// Loopback, or insecure=true: STARTTLS when offered, plain otherwise.
		{"smtp://127.0.0.1:2525?from=h@example.com", "",
			config.SMTP{Host: "127.0.0.1", Port: 2525, Security: config.SMTPOpportunistic, From: "<h@example.com>"}},
		{"smtp://localhost:25?from=h@example.com", "",
			config.SMTP{Host: "localhost", Port: 25, Security: config.SMTPOpportunistic, From: "<h@example.com>"}},
		{"smtp://relay.internal:25?from=h@example.com&insecure=true", "",
			config.SMTP{Host: "relay.internal", Port: 25, Security: config.SMTPOpportunistic, From: "<h@example.com>"}},
		// --smtp-from wins over ?from=.
		{"smtp://mail.example.com?from=url@example.com", "flag@example.com",
			config.SMTP{Host: "mail.example.com", Port: 587, Security: config.SMTPStartTLS, From: "<flag@example.com>"}},
	} {
		got, err := config.ParseSMTP(c.url, c.from)
		require.NoError(t, err, c.url)
		require.Equal(t, c.want, *got, c.url)
	}

	for _, c := range []struct{ url, from, says string }{
		{"http://mail.example.com?from=h@example.com", "", "is not smtp"},
		{"smtp://?from=h@example.com", "", "needs a host"},
		{"smtp://mail.example.com", "", "no sender"},
		{"smtp://mail.example.com?from=not-an-address", "", "is not one address"},
		{"smtp://mail.example.com:99999?from=h@example.com", "", "port"},
		{"smtp://mail.example.com?from=h@example.com&tls=off", "", `unknown setting "tls"`},
		{"smtp://mail.example.com?from=h@example.com&insecure=maybe", "", "insecure"},
		{"smtps://mail.example.com?from=h@example.com&insecure=true", "", "smtp:// (STARTTLS) only"},
		{"smtp://mail.example.com/path?from=h@example.com", "", "no path"},
		{"smtp://:secret@mail.example.com?from=h@example.com", "", "needs a user name"},
	} {
		_, err := config.ParseSMTP(c.url, c.from)
		require.ErrorContains(t, err, c.says, c.url)
		require.NotContains(t, err.Error(), "secret")
	}
}

func TestSMTPIsValidatedAndItsPasswordNeverLogged(t *testing.T) {
	t.Parallel()
	c := config.Default()
	c.SMTPURL = "smtp://user:hunter2-secret@mail.example.com?from=herald@example.com"
	require.NoError(t, c.Validate(true))
	var buf bytes.Buffer
	slog.New(slog.NewTextHandler(&buf, nil)).Info("config", "config", c)
	require.NotContains(t, buf.String(), "hunter2-secret")
	require.Contains(t, buf.String(), "mail.example.com")

	c.SMTPURL = "smtp://mail.example.com"
	require.ErrorContains(t, c.Validate(true), "no sender")
	c.SMTPURL, c.SMTPFrom = "", "herald@example.com"
	require.ErrorContains(t, c.Validate(true), "smtp-from: needs --smtp-url")
}
