package sender

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/heraldhooks/herald"
	"github.com/heraldhooks/herald/verify"
)

// The headers Herald sets on every webhook (DESIGN.md, Signing).
const (
	headerStandardID        = "webhook-id"
	headerStandardTimestamp = "webhook-timestamp"
	headerStandardSignature = "webhook-signature"
	headerHexID             = "X-Webhook-ID"
	headerHexTimestamp      = "X-Webhook-Timestamp"
	headerHexSignature      = "X-Webhook-Signature"
	headerEvent             = "X-Webhook-Event"
	headerContentType       = "Content-Type"
	headerUserAgent         = "User-Agent"
)

// reserved reports whether an endpoint's custom headers may not set the
// canonical header name: the signature headers of both schemes (a custom
// webhook-signature would confuse a receiver even under the other scheme),
// the headers Herald always sets, and the ones that frame the HTTP message.
func reserved(canonical string) bool {
	switch canonical {
	case "Webhook-Id", "Webhook-Timestamp", "Webhook-Signature",
		"X-Webhook-Id", "X-Webhook-Timestamp", "X-Webhook-Signature",
		"X-Webhook-Event", "Content-Type", "User-Agent",
		"Host", "Content-Length", "Transfer-Encoding", "Connection",
		"Keep-Alive", "Proxy-Connection", "Te", "Trailer", "Upgrade":
		return true
	}
	return false
}

// CheckHeader reports whether an endpoint may send the custom header name:
// value. A reserved name (the signature headers, X-Webhook-Event,
// Content-Type, User-Agent, Host and the message-framing headers) or a name
// or value HTTP cannot carry is refused. The API calls it when an endpoint is
// created or changed; Send drops reserved names and refuses invalid ones.
func CheckHeader(name, value string) error {
	if !validHeaderName(name) {
		return fmt.Errorf("header name %q is not a valid HTTP header name", name)
	}
	if reserved(http.CanonicalHeaderKey(name)) {
		return fmt.Errorf("header %q is set by Herald and cannot be overridden", name)
	}
	if !validHeaderValue(value) {
		return fmt.Errorf("header %q has a value with control characters", name)
	}
	return nil
}

// validHeaderName reports whether name is an RFC 9110 token.
func validHeaderName(name string) bool {
	if name == "" {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}

// validHeaderValue reports whether value has no control characters other
// than horizontal tab (so no CR or LF to split the header block).
func validHeaderValue(value string) bool {
	for i := 0; i < len(value); i++ {
		if c := value[i]; (c < ' ' && c != '\t') || c == 0x7f {
			return false
		}
	}
	return true
}

// buildHeaders returns every header of the webhook: the endpoint's custom
// headers first (reserved names dropped), then the signature, event, content
// type and user agent, which nothing can override. An error is a
// configuration fault (no secret, a secret that does not decode, an invalid
// custom header or an unknown scheme) that no retry can fix.
func buildHeaders(req *Request, userAgent string, ts int64) (http.Header, error) {
	h := make(http.Header, len(req.Headers)+6)
	for name, value := range req.Headers {
		if err := CheckHeader(name, value); err != nil {
			if validHeaderName(name) && reserved(http.CanonicalHeaderKey(name)) {
				continue // Herald's own header wins
			}
			return nil, fmt.Errorf("custom %w", err)
		}
		h.Set(name, value)
	}
	if len(req.Secrets) == 0 {
		return nil, fmt.Errorf("sign: the endpoint has no secret")
	}
	for i, secret := range req.Secrets {
		if secret == "" {
			return nil, fmt.Errorf("sign with secret %d of %d: the secret is empty", i+1, len(req.Secrets))
		}
	}
	sigs := make([]string, len(req.Secrets))
	stamp := strconv.FormatInt(ts, 10)
	switch req.Scheme {
	case herald.SchemeStandard, "":
		for i, secret := range req.Secrets {
			sig, err := verify.SignStandard(secret, req.WebhookID, ts, req.Body)
			if err != nil {
				return nil, fmt.Errorf("sign with secret %d of %d: %w", i+1, len(req.Secrets), err)
			}
			sigs[i] = sig
		}
		setStandard(h, req.WebhookID, stamp, sigs)
	case herald.SchemeEd25519:
		for i, key := range req.Secrets {
			sig, err := verify.SignEd25519(key, req.WebhookID, ts, req.Body)
			if err != nil {
				return nil, fmt.Errorf("sign with private key %d of %d: %w", i+1, len(req.Secrets), err)
			}
			sigs[i] = sig
		}
		setStandard(h, req.WebhookID, stamp, sigs)
	case herald.SchemeHMACSHA256:
		for i, secret := range req.Secrets {
			sigs[i] = verify.SignHMACSHA256(secret, ts, req.Body)
		}
		h.Set(headerHexID, req.WebhookID)
		h.Set(headerHexTimestamp, stamp)
		h.Set(headerHexSignature, strings.Join(sigs, " "))
	default:
		return nil, fmt.Errorf("sign: unknown signature scheme %q", req.Scheme)
	}
	h.Set(headerEvent, req.EventType)
	h.Set(headerContentType, "application/json")
	h.Set(headerUserAgent, userAgent)
	return h, nil
}

// setStandard sets the Standard Webhooks headers, which the standard and
// ed25519 schemes share: only the signatures' version tells them apart (v1
// and v1a). The names are set in the literal lower case the specification
// uses; HTTP names are case-insensitive, so receivers see them either way.
func setStandard(h http.Header, id, stamp string, sigs []string) {
	h[headerStandardID] = []string{id}
	h[headerStandardTimestamp] = []string{stamp}
	h[headerStandardSignature] = []string{strings.Join(sigs, " ")}
}
