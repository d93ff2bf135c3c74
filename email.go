package herald

import (
	"errors"
	"fmt"
	"net/mail"
	"strings"
)

// MaxEmailLen bounds a notice address: the longest path SMTP
// carries (RFC 5321 allows 256 octets with the angle brackets).
const MaxEmailLen = 254

// ValidateEmail checks a consumer's notice address: exactly one
// plain address, local@domain, in ASCII, as net/mail reads it and written
// the way it reads it back: no display name, angle brackets, comments,
// quoted local part or list, so what is stored is the mailbox mail goes
// to and nothing an inbox would show instead. The domain is a host name
// (letters, digits, hyphens, at least one dot), not an address literal.
func ValidateEmail(addr string) error {
	if addr == "" {
		return errors.New("an address is required")
	}
	if len(addr) > MaxEmailLen {
		return fmt.Errorf("an address is at most %d bytes", MaxEmailLen)
	}
	for i := 0; i < len(addr); i++ {
		if c := addr[i]; c < ' ' || c >= 0x7f {
			return errors.New("an address is printable ASCII, without control characters")
		}
	}
	parsed, err := mail.ParseAddress(addr)
	if err == nil && (parsed.Name != "" || parsed.Address != addr) || strings.ContainsAny(addr, "<>(),;") {
		return errors.New("give the bare address, as ops@example.com, without a name, brackets, comments or a list")
	}
	if err != nil {
		return fmt.Errorf("not an e-mail address (%s)", strings.TrimPrefix(err.Error(), "mail: "))
	}
	if strings.Contains(addr, " ") {
		return errors.New("an address has no spaces")
	}
	local, domain, ok := strings.Cut(addr, "@")
	if !ok || local == "" || len(local) > 64 {
		return errors.New("the part before @ is 1 to 64 bytes")
	}
	if !strings.Contains(domain, ".") {
		return errors.New("the domain is a full host name, as example.com")
	}
	for _, label := range strings.Split(domain, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return fmt.Errorf("the domain %q is not a host name", domain)
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-') {
				return fmt.Errorf("the domain %q is not a host name", domain)
			}
		}
	}
	return nil
}
