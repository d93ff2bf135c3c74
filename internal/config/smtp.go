package config

import (
	"errors"
	"fmt"
	"net"
	"net/mail"
	"net/url"
	"strconv"
	"strings"
)

// SMTPSecurity is how mail reaches the SMTP server.
type SMTPSecurity string

const (
	// SMTPStartTLS (smtp://, port 587 by default) upgrades the connection
	// with STARTTLS, and refuses to send if the server does not offer it.
	SMTPStartTLS SMTPSecurity = "starttls"
	// SMTPImplicitTLS (smtps://, port 465 by default) speaks TLS from the
	// first byte.
	SMTPImplicitTLS SMTPSecurity = "tls"
	// SMTPOpportunistic uses STARTTLS when the server offers it and sends
	// in the clear otherwise: smtp:// to a loopback host (a relay on the
	// same machine, a test server), or anywhere with ?insecure=true.
	SMTPOpportunistic SMTPSecurity = "opportunistic"
)

// SMTP is where notices are mailed from (--smtp-url, --smtp-from).
type SMTP struct {
	Host     string
	Port     int
	Security SMTPSecurity
	// Username and Password, when Username is set, log in (the best
	// mechanism both sides offer).
	Username string
	Password string
	// From is the sender, as net/mail reads it: "herald@example.com" or
	// "Herald <herald@example.com>".
	From string
}

// ParseSMTP reads --smtp-url and --smtp-from:
//
//	smtp://[user:pass@]host[:587][?from=addr][&insecure=true]
//	smtps://[user:pass@]host[:465][?from=addr]
//
// smtp:// requires STARTTLS, except to a loopback host or with
// insecure=true, where it is used when offered. --smtp-from, when set,
// is the sender; otherwise the URL's from is; one of them is required.
// Every problem is named, with the password never shown.
func ParseSMTP(raw, from string) (*SMTP, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, errors.New("smtp-url: not a URL (as smtp://user:pass@mail.example.com:587?from=herald@example.com)")
	}
	out := &SMTP{}
	switch u.Scheme {
	case "smtp":
		out.Security, out.Port = SMTPStartTLS, 587
	case "smtps":
		out.Security, out.Port = SMTPImplicitTLS, 465
	default:
		return nil, fmt.Errorf("smtp-url: scheme %q is not smtp (STARTTLS, port 587) or smtps (TLS, port 465)", u.Scheme)
	}
	if u.Opaque != "" || u.Hostname() == "" {
		return nil, errors.New("smtp-url: needs a host, as in smtp://user:pass@mail.example.com:587?from=herald@example.com")
	}
	if u.Path != "" && u.Path != "/" || u.Fragment != "" {
		return nil, errors.New("smtp-url: takes no path or fragment; settings go in the query (from, insecure)")
	}
	out.Host = u.Hostname()
	if p := u.Port(); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 65535 {
			return nil, fmt.Errorf("smtp-url: port %q is not between 1 and 65535", p)
		}
		out.Port = n
	}
	if u.User != nil {
		out.Username = u.User.Username()
		out.Password, _ = u.User.Password()
		if out.Username == "" {
			return nil, errors.New("smtp-url: a password needs a user name (user:pass@host)")
		}
	}
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return nil, fmt.Errorf("smtp-url: query: %v", err)
	}
	for k, v := range q {
		if len(v) != 1 {
			return nil, fmt.Errorf("smtp-url: %s is given %d times", k, len(v))
		}
		switch k {
		case "from":
			if from == "" {
				from = v[0]
			}
		case "insecure":
			insecure, err := strconv.ParseBool(v[0])
			if err != nil {
				return nil, fmt.Errorf("smtp-url: insecure=%q is not true or false", v[0])
			}
			if insecure && out.Security == SMTPImplicitTLS {
				return nil, errors.New("smtp-url: insecure applies to smtp:// (STARTTLS) only; smtps:// is always TLS")
			}
			if insecure {
				out.Security = SMTPOpportunistic
			}
		default:
			return nil, fmt.Errorf("smtp-url: unknown setting %q (known: from, insecure)", k)
		}
	}
	if out.Security == SMTPStartTLS && isLoopback(out.Host) {
		out.Security = SMTPOpportunistic
	}
	if from == "" {
		return nil, errors.New("smtp-url: no sender: add ?from=herald@example.com or set --smtp-from")
	}
	addr, err := mail.ParseAddress(from)
	if err != nil || strings.ContainsAny(from, "\r\n") {
		return nil, fmt.Errorf("smtp-from: %q is not one address, as herald@example.com or \"Herald <herald@example.com>\"", from)
	}
	out.From = addr.String()
	return out, nil
}

// isLoopback reports whether host is localhost or a loopback address.
func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// RedactSMTP shows --smtp-url without its password, for logs.
func RedactSMTP(raw string) string {
	if raw == "" {
		return ""
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "(invalid, hidden)"
	}
	return u.Redacted()
}
