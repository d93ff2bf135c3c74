package api

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"net/url"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/heraldhooks/herald"
	"github.com/heraldhooks/herald/internal/sender"
	"github.com/heraldhooks/herald/internal/wire"
	"github.com/heraldhooks/herald/verify"
)

// Bounds on what a request may set. Each rule is stated in the error that
// enforces it.
const (
	maxConsumerIDLen     = 256
	maxURLLen            = 2048
	maxDescriptionLen    = 1024
	maxEventTypes        = 100
	maxReasonLen         = 256
	maxIdempotencyKeyLen = 256
	minTimeout           = time.Second
	maxRetrySchedule     = 20
	maxRetryDelay        = 24 * time.Hour
	maxRetryAttempts     = 50
	maxRetryFactor       = 10
	maxMaxInFlight       = 1000
	maxHeaders           = 50
	maxHeaderNameLen     = 256
	maxHeaderValueLen    = 4096

	maxAutoDisableAfterFailures = 100000
	minAutoDisableAfter         = time.Minute
	maxAutoDisableAfter         = 720 * time.Hour
	// maxReplayRate bounds a paced replay, in deliveries per second.
	maxReplayRate = 10000

	// generatedSecretBytes is the key size of a secret Herald makes.
	generatedSecretBytes = 24
	// Standard secrets carry a key of this many bytes.
	minStandardKeyBytes = 24
	maxStandardKeyBytes = 64
	// hmac-sha256 secrets are used as text of this many characters.
	minHMACSecretLen = 16
	maxHMACSecretLen = 256

	retryPolicyExponential = "exponential"
)

// validateConsumerID checks a consumer id: 1 to 256 bytes, no control
// characters.
func validateConsumerID(id string) error {
	if id == "" || len(id) > maxConsumerIDLen || hasControl(id) {
		return badRequest("invalid_consumer_id", "consumer_id must be 1 to %d bytes without control characters", maxConsumerIDLen)
	}
	return nil
}

// validateURL checks an endpoint URL: absolute http or https with a host
// written the one way every parser reads alike (no IPv4 address in another
// form than dotted decimal, flag or not: see sender.HostFormError), and,
// unless private networks are allowed, not a loopback, private, link-local
// or metadata address.
func (s *Server) validateURL(raw string) error {
	if raw == "" {
		return badRequest("invalid_url", "url is required")
	}
	if len(raw) > maxURLLen {
		return badRequest("invalid_url", "url must be at most %d bytes", maxURLLen)
	}
	u, err := url.Parse(raw)
	if err != nil {
		return badRequest("invalid_url", "url is not a valid URL: %v", unwrapURLError(err))
	}
	if n := len(u.String()); n > maxURLLen {
		// A client that parses the URL and writes it back sends it
		// percent-encoded; were that form past the limit, the same URL
		// would be refused then.
		return badRequest("invalid_url", "url must be at most %d bytes once percent-encoded (each byte of a non-ASCII character becomes %%XX); this one comes to %d", maxURLLen, n)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return badRequest("invalid_url", "url must start with http:// or https://")
	}
	if u.Host == "" || u.Hostname() == "" {
		return badRequest("invalid_url", "url must name a host, as in https://example.com/hooks")
	}
	if err := sender.CheckURL(raw, s.allowPrivate); err != nil {
		return badRequest("invalid_url", "url: %v", err)
	}
	return nil
}

func unwrapURLError(err error) error {
	if ue, ok := err.(*url.Error); ok {
		return ue.Err
	}
	return err
}

// validateEventTypes checks an endpoint's filter: 1 to 100 patterns, each
// "*", an event type, or an event type followed by ".*".
func validateEventTypes(patterns []string) error {
	if len(patterns) == 0 || len(patterns) > maxEventTypes {
		return badRequest("invalid_event_types", "event_types must list from 1 to %d patterns (\"*\" for all)", maxEventTypes)
	}
	for i, p := range patterns {
		if err := herald.ValidateEventTypePattern(p); err != nil {
			return badRequest("invalid_event_types", "event_types[%d]: %v", i, err)
		}
	}
	return nil
}

// validateSecret checks a secret given for scheme. Standard secrets are
// "whsec_" and the base64 of a 24 to 64 byte key; hmac-sha256 secrets are
// used as text and must be 16 to 256 characters without control characters;
// ed25519 secrets are private keys (validateEd25519Secret).
func validateSecret(secret string, scheme herald.SignatureScheme) error {
	if scheme == herald.SchemeEd25519 {
		return validateEd25519Secret(secret)
	}
	if scheme == herald.SchemeHMACSHA256 {
		n := utf8.RuneCountInString(secret)
		if n < minHMACSecretLen || n > maxHMACSecretLen || hasControl(secret) {
			return badRequest("invalid_secret", "secret must be %d to %d characters without control characters for signature_scheme %q",
				minHMACSecretLen, maxHMACSecretLen, herald.SchemeHMACSHA256)
		}
		return nil
	}
	rule := fmt.Sprintf("secret must be %q followed by the base64 of a %d to %d byte key for signature_scheme %q",
		verify.SecretPrefix, minStandardKeyBytes, maxStandardKeyBytes, herald.SchemeStandard)
	if !strings.HasPrefix(secret, verify.SecretPrefix) {
		return badRequest("invalid_secret", "%s", rule)
	}
	key, err := verify.StandardKey(secret)
	if err != nil || len(key) < minStandardKeyBytes || len(key) > maxStandardKeyBytes {
		return badRequest("invalid_secret", "%s", rule)
	}
	return nil
}

// newSecret makes a secret that fits both schemes: "whsec_" and the base64
// of 24 random bytes.
func newSecret() (string, error) {
	var b [generatedSecretBytes]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("make endpoint secret: %w", err)
	}
	return verify.SecretPrefix + base64.StdEncoding.EncodeToString(b[:]), nil
}

// validateRetryPolicy checks an exponential policy: every field required,
// base from 1ms to 24h, factor from 1 to 10, cap from base to 24h, attempts
// from 1 to 50. A base or cap that is not a Go duration string was refused
// while decoding, with the same answers (endpointDurationError).
func validateRetryPolicy(p *wire.RetryPolicy) (*herald.ExponentialPolicy, error) {
	if p.Type != retryPolicyExponential {
		return nil, badRequest("invalid_retry_policy", "retry_policy.type must be %q", retryPolicyExponential)
	}
	base := time.Duration(p.Base)
	if base < time.Millisecond || base > maxRetryDelay {
		return nil, errRetryPolicyBase()
	}
	if p.Factor < 1 || p.Factor > maxRetryFactor {
		return nil, badRequest("invalid_retry_policy", "retry_policy.factor must be a number from 1 to %d", maxRetryFactor)
	}
	capDelay := time.Duration(p.Cap)
	if capDelay < base || capDelay > maxRetryDelay {
		return nil, errRetryPolicyCap()
	}
	if p.Attempts < 1 || p.Attempts > maxRetryAttempts {
		return nil, badRequest("invalid_retry_policy", "retry_policy.attempts must be an integer from 1 to %d", maxRetryAttempts)
	}
	return &herald.ExponentialPolicy{Base: base, Factor: p.Factor, Cap: capDelay, Attempts: p.Attempts}, nil
}

func errRetryPolicyBase() error {
	return badRequest("invalid_retry_policy", "retry_policy.base must be a Go duration from 1ms to 24h, such as \"1s\"")
}

func errRetryPolicyCap() error {
	return badRequest("invalid_retry_policy", "retry_policy.cap must be a Go duration from retry_policy.base to 24h, such as \"1h\"")
}

// errTimeout refuses an endpoint's timeout.
func errTimeout() error {
	return badRequest("invalid_timeout", "timeout must be a Go duration from 1s to 60s, such as \"10s\"")
}

// retryScheduleLength checks how many delays a retry schedule lists.
func retryScheduleLength(n int) error {
	if n < 1 || n > maxRetrySchedule {
		return badRequest("invalid_retry_schedule", "retry_schedule must list from 1 to %d delays", maxRetrySchedule)
	}
	return nil
}

// errRetryScheduleItem refuses the delay at index i of a retry schedule.
func errRetryScheduleItem(i int) error {
	return badRequest("invalid_retry_schedule", "retry_schedule[%d] must be a Go duration from 0s to 24h, such as \"30s\"", i)
}

// parseOrdering reads an endpoint's ordering: "fifo", or "none" for
// parallel delivery (herald.OrderingNone).
func parseOrdering(v string) (herald.Ordering, error) {
	switch v {
	case string(herald.OrderingFIFO):
		return herald.OrderingFIFO, nil
	case orderingNone:
		return herald.OrderingNone, nil
	}
	return "", badRequest("invalid_ordering", "ordering must be %q (one delivery at a time, in event order) or %q (parallel, the default)",
		herald.OrderingFIFO, orderingNone)
}

// validateAutoDisableAfterFailures checks the consecutive failures that
// disable an endpoint: 1 to 100000.
func validateAutoDisableAfterFailures(n int) error {
	if n < 1 || n > maxAutoDisableAfterFailures {
		return badRequest("invalid_auto_disable_after_failures",
			"auto_disable_after_failures must be an integer from 1 to %d (null for the default, %d)",
			maxAutoDisableAfterFailures, herald.DefaultAutoDisableAfterFailures)
	}
	return nil
}

// validateAutoDisableAfter checks how long an endpoint may go without a
// success before it is disabled: from 1m to 720h.
func validateAutoDisableAfter(d time.Duration) error {
	if d < minAutoDisableAfter || d > maxAutoDisableAfter {
		return errAutoDisableAfter()
	}
	return nil
}

func errAutoDisableAfter() error {
	return badRequest("invalid_auto_disable_after",
		"auto_disable_after must be a Go duration from 1m to 720h, such as \"24h\" (null for the default, %s)",
		herald.FormatDuration(herald.DefaultAutoDisableAfter))
}

// parseReplayOptions reads dry_run and rate: a rate is above 0 and at most
// 10000 deliveries per second; absent, the replayed deliveries are all due
// at once.
func parseReplayOptions(o *wire.ReplayOptions) (dryRun bool, rate float64, err error) {
	if o.DryRun != nil {
		dryRun = *o.DryRun
	}
	if o.Rate != nil {
		rate = *o.Rate
		if !(rate > 0) || rate > maxReplayRate {
			return false, 0, badRequest("invalid_rate",
				"rate must be a number of deliveries per second above 0 and at most %d (leave it out to replay all at once)", maxReplayRate)
		}
	}
	return dryRun, rate, nil
}

// validateHeaders checks custom headers: at most 50, names valid HTTP
// tokens that do not override the headers Herald sets itself and differ
// from each other in more than case, values without control characters or
// white space at either end.
func validateHeaders(h map[string]string) error {
	if len(h) > maxHeaders {
		return badRequest("invalid_headers", "headers must hold at most %d headers", maxHeaders)
	}
	for name, value := range h {
		if name == "" || len(name) > maxHeaderNameLen || !isToken(name) {
			return badRequest("invalid_headers", "headers: %q is not a valid header name (letters, digits and !#$%%&'*+-.^_`|~, at most %d)", name, maxHeaderNameLen)
		}
		if reservedHeader(name) {
			return badRequest("invalid_headers", "headers: %q is set by Herald and cannot be overridden (webhook-*, X-Webhook-*, Content-Type, Content-Length, User-Agent, Host and hop-by-hop headers)", name)
		}
		if len(value) > maxHeaderValueLen || hasControl(strings.ReplaceAll(value, "\t", " ")) {
			return badRequest("invalid_headers", "headers[%q] must be at most %d bytes without control characters", name, maxHeaderValueLen)
		}
		if strings.TrimLeft(value, " \t") != value || strings.TrimRight(value, " \t") != value {
			// HTTP drops white space around a field value, so the receiver
			// would get another value than the one shown.
			return badRequest("invalid_headers", "headers[%q] must not start or end with a space or tab, which HTTP drops in transit", name)
		}
	}
	// Header names ignore case: two spellings of one name would send one of
	// the two values, whichever the map gave last.
	seen := make(map[string]string, len(h))
	for name := range h {
		lower := strings.ToLower(name)
		if other, ok := seen[lower]; ok {
			first, second := min(name, other), max(name, other)
			return badRequest("invalid_headers", "headers: %q and %q name the same header (header names ignore case); keep one", first, second)
		}
		seen[lower] = name
	}
	return nil
}

// reservedHeader says whether Herald sets the header itself (or HTTP owns
// it), so an endpoint may not.
func reservedHeader(name string) bool {
	n := strings.ToLower(name)
	if strings.HasPrefix(n, "webhook-") || strings.HasPrefix(n, "x-webhook-") {
		return true
	}
	switch n {
	case "content-type", "content-length", "user-agent", "host", "connection",
		"transfer-encoding", "keep-alive", "te", "trailer", "upgrade", "proxy-connection":
		return true
	}
	return false
}

// isToken reports whether s is an HTTP token (RFC 9110, section 5.6.2).
func isToken(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}

// hasControlText reports whether free text (a description, a reason)
// holds a control character other than a tab or a line break (a line
// feed, a carriage return: CRLF text is text): an escape sequence's ESC,
// a C1 control, a bidirectional override or a line or paragraph
// separator, any of which could rewrite what a terminal or a page shows
// around it.
func hasControlText(s string) bool {
	for _, r := range s {
		if r == '\t' || r == '\n' || r == '\r' {
			continue
		}
		if unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r) || r == '\u2028' || r == '\u2029' {
			return true
		}
	}
	return false
}

// hasControl reports whether s holds an ASCII control character.
func hasControl(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] == 0x7f {
			return true
		}
	}
	return false
}
