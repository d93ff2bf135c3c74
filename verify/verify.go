package verify

import (
	"bytes"
	"crypto/ed25519"
	"crypto/hmac"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Scheme names how a webhook is signed. The values are the ones an endpoint's
// signature_scheme setting takes in Herald's API.
type Scheme string

// The signature schemes Herald sends.
const (
	// SchemeStandard is Standard Webhooks: headers webhook-id,
	// webhook-timestamp and webhook-signature: v1,<base64 HMAC-SHA256> over
	// "{id}.{timestamp}.{body}", keyed by the base64 part of a whsec_ secret.
	SchemeStandard Scheme = "standard"
	// SchemeHMACSHA256 is the common hex style: headers X-Webhook-ID,
	// X-Webhook-Timestamp and X-Webhook-Signature: sha256=<hex HMAC-SHA256>
	// over "{timestamp}.{body}", keyed by the whole secret string.
	SchemeHMACSHA256 Scheme = "hmac-sha256"
	// SchemeEd25519 is Standard Webhooks' asymmetric form: the headers of
	// SchemeStandard, with webhook-signature: v1a,<base64 Ed25519
	// signature> over "{id}.{timestamp}.{body}". Herald signs with the
	// endpoint's private key (whsk_…) and shows only its public key
	// (whpk_…), which is all a receiver needs: whoever holds it can check
	// webhooks but not forge them.
	SchemeEd25519 Scheme = "ed25519"
)

// The headers Herald sends. net/http matches header names without regard to
// case, so these spellings are only the ones the specifications use.
const (
	HeaderStandardID        = "webhook-id"
	HeaderStandardTimestamp = "webhook-timestamp"
	HeaderStandardSignature = "webhook-signature"
	HeaderHMACID            = "X-Webhook-ID"
	HeaderHMACTimestamp     = "X-Webhook-Timestamp"
	HeaderHMACSignature     = "X-Webhook-Signature"
	// HeaderEvent carries the event type with either scheme. It is not
	// covered by the signature.
	HeaderEvent = "X-Webhook-Event"
)

// DefaultTolerance is how far a webhook's timestamp may be from the
// receiver's clock, either way, before it is refused as a replay (or as a
// clock gone wrong). It matches the Standard Webhooks reference libraries.
const DefaultTolerance = 5 * time.Minute

// DefaultMaxBodyBytes bounds the body Verifier.Verify reads: 10 MiB, the
// largest event payload a Herald server can be configured to accept.
const DefaultMaxBodyBytes = 10 << 20

// Why a webhook was refused. Each error Verify returns wraps exactly one of
// these, with details, so callers can test with errors.Is and print the
// message as the reason.
var (
	// ErrMissingHeaders: an id, timestamp or signature header is absent or empty.
	ErrMissingHeaders = errors.New("missing webhook headers")
	// ErrInvalidTimestamp: the timestamp header is not unix seconds in decimal.
	ErrInvalidTimestamp = errors.New("invalid webhook timestamp")
	// ErrTimestampOutOfTolerance: the timestamp is too old or too far in the
	// future; the request may be a replay.
	ErrTimestampOutOfTolerance = errors.New("webhook timestamp outside tolerance")
	// ErrNoMatchingSignature: no signature in the header matches any secret;
	// the body was altered, the secret is wrong, or the sender is not Herald.
	ErrNoMatchingSignature = errors.New("no matching webhook signature")
	// ErrBodyTooLarge: the body is longer than the Verifier's MaxBodyBytes.
	ErrBodyTooLarge = errors.New("webhook body too large")
	// ErrReadBody: the request body could not be read.
	ErrReadBody = errors.New("read webhook body")

	// The errors below are the receiver's own configuration problems, not
	// the sender's; Middleware answers them with 500 so Herald retries
	// after they are fixed instead of giving up.

	// ErrNoSecrets: the Verifier has no secret (or, for SchemeEd25519, no
	// public key) to check against.
	ErrNoSecrets = errors.New("no webhook secret configured")
	// ErrInvalidSecret: a standard-scheme secret is not whsec_ and base64,
	// or an ed25519 public key is not whpk_ and the base64 of 32 bytes.
	ErrInvalidSecret = errors.New("invalid webhook secret")
	// ErrUnknownScheme: the Verifier's Scheme is not standard, hmac-sha256
	// or ed25519.
	ErrUnknownScheme = errors.New("unknown signature scheme")
)

// Webhook is what a verified request carried.
type Webhook struct {
	// ID is the same for every attempt and replay of one event to one
	// endpoint; deduplicate on it. With SchemeHMACSHA256 the id is not
	// covered by the signature (only the timestamp and body are).
	ID string
	// Timestamp is when this attempt was signed.
	Timestamp time.Time
	// EventType is the X-Webhook-Event header, "" when absent. It is not
	// covered by the signature; trust the type inside the body when it
	// matters.
	EventType string
	// Body is the exact bytes that were signed.
	Body []byte
}

// VerifyStandard checks a Standard Webhooks request: the webhook-id,
// webhook-timestamp and webhook-signature headers and the raw body. secret
// may carry the whsec_ prefix or not. The header may hold several
// space-separated signatures (Herald sends two during a secret rotation);
// one valid v1 signature is enough, and entries of other versions are
// ignored. The timestamp must lie within tolerance of now either way; a zero
// now means time.Now() and a tolerance <= 0 means DefaultTolerance.
func VerifyStandard(secret string, headers http.Header, body []byte, now time.Time, tolerance time.Duration) error {
	_, err := check(SchemeStandard, []string{secret}, nil, headers, body, now, tolerance)
	return err
}

// VerifyHMACSHA256 checks a request signed in the hex style: the
// X-Webhook-ID, X-Webhook-Timestamp and X-Webhook-Signature headers and the
// raw body. The key is the whole secret string as UTF-8 bytes, whsec_ prefix
// included if the secret has one. The header may hold several
// space-separated "sha256=<hex>" signatures; one valid is enough. now and
// tolerance are as for VerifyStandard.
func VerifyHMACSHA256(secret string, headers http.Header, body []byte, now time.Time, tolerance time.Duration) error {
	_, err := check(SchemeHMACSHA256, []string{secret}, nil, headers, body, now, tolerance)
	return err
}

// VerifyEd25519 checks a request signed with Standard Webhooks' asymmetric
// scheme: the webhook-id, webhook-timestamp and webhook-signature headers
// and the raw body, against a "whpk_" public key (the endpoint's
// public_key in Herald's API). The header may hold several space-separated
// signatures (Herald sends two during a key rotation); one valid v1a
// signature is enough, and entries of other versions are ignored. now and
// tolerance are as for VerifyStandard.
func VerifyEd25519(publicKey string, headers http.Header, body []byte, now time.Time, tolerance time.Duration) error {
	_, err := check(SchemeEd25519, nil, []string{publicKey}, headers, body, now, tolerance)
	return err
}

// Verifier checks requests against one or more secrets, or public keys for
// SchemeEd25519. The zero values of its fields choose the defaults; a
// Verifier is safe for concurrent use as long as its fields are not changed.
type Verifier struct {
	// Secrets are tried in turn; a signature made with any of them passes.
	// List the new and the old secret while a rotation is under way. They
	// serve SchemeStandard and SchemeHMACSHA256.
	Secrets []string
	// PublicKeys ("whpk_…") serve SchemeEd25519 instead of Secrets, in the
	// same way: list the new and the old key while a rotation is under way.
	PublicKeys []string
	// Scheme is the endpoint's signature scheme; "" means SchemeStandard.
	Scheme Scheme
	// Tolerance is how far the timestamp may be from Now; 0 means
	// DefaultTolerance.
	Tolerance time.Duration
	// Now tells the time; nil means time.Now.
	Now func() time.Time
	// MaxBodyBytes bounds the body Verify reads; 0 means DefaultMaxBodyBytes.
	MaxBodyBytes int64
}

// Verify reads r's body (at most MaxBodyBytes), checks it and its headers,
// and puts the body back in r.Body so later handlers can read it again. It
// returns the verified webhook, or an error wrapping one of the Err values.
func (v *Verifier) Verify(r *http.Request) (*Webhook, error) {
	limit := v.MaxBodyBytes
	if limit <= 0 {
		limit = DefaultMaxBodyBytes
	}
	var body []byte
	if r.Body != nil {
		var err error
		body, err = io.ReadAll(io.LimitReader(r.Body, limit+1))
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrReadBody, err)
		}
		if int64(len(body)) > limit {
			return nil, fmt.Errorf("%w: more than %d bytes", ErrBodyTooLarge, limit)
		}
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	return v.VerifyPayload(r.Header, body)
}

// VerifyPayload checks headers and body that were already read, for
// receivers whose framework hands over the raw body rather than an
// *http.Request.
func (v *Verifier) VerifyPayload(headers http.Header, body []byte) (*Webhook, error) {
	now := time.Time{}
	if v.Now != nil {
		now = v.Now()
	}
	scheme := v.Scheme
	if scheme == "" {
		scheme = SchemeStandard
	}
	return check(scheme, v.Secrets, v.PublicKeys, headers, body, now, v.Tolerance)
}

// check verifies headers and body against any of secrets (or, for
// SchemeEd25519, of publicKeys) under scheme. The receiver's own
// configuration is checked first, then the headers, the timestamp and the
// signatures, so the error names the first thing wrong. Keys of the other
// kind than scheme uses are a configuration error, not ignored: a Verifier
// given only those would otherwise refuse every webhook with a reason that
// hides the mistake.
func check(scheme Scheme, secrets, publicKeys []string, headers http.Header, body []byte, now time.Time, tolerance time.Duration) (*Webhook, error) {
	var idName, tsName, sigName string
	switch scheme {
	case SchemeStandard, SchemeEd25519:
		idName, tsName, sigName = HeaderStandardID, HeaderStandardTimestamp, HeaderStandardSignature
	case SchemeHMACSHA256:
		idName, tsName, sigName = HeaderHMACID, HeaderHMACTimestamp, HeaderHMACSignature
	default:
		return nil, fmt.Errorf("%w: %q", ErrUnknownScheme, scheme)
	}
	var keys [][]byte
	var publics []ed25519.PublicKey
	var err error
	if scheme == SchemeEd25519 {
		if len(secrets) > 0 {
			return nil, fmt.Errorf("%w: scheme %s verifies with public keys (%s…), not secrets", ErrInvalidSecret, SchemeEd25519, PublicKeyPrefix)
		}
		publics, err = publicKeysFor(publicKeys)
	} else {
		if len(publicKeys) > 0 {
			return nil, fmt.Errorf("%w: public keys serve scheme %s only, not %s", ErrInvalidSecret, SchemeEd25519, scheme)
		}
		keys, err = keysFor(scheme, secrets)
	}
	if err != nil {
		return nil, err
	}

	id, tsHeader, sigHeader := headers.Get(idName), headers.Get(tsName), headers.Get(sigName)
	var missing []string
	for _, h := range []struct{ name, value string }{{idName, id}, {tsName, tsHeader}, {sigName, sigHeader}} {
		if h.value == "" {
			missing = append(missing, h.name)
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("%w: %s", ErrMissingHeaders, strings.Join(missing, ", "))
	}

	ts, err := parseTimestamp(tsHeader)
	if err != nil {
		return nil, err
	}
	if now.IsZero() {
		now = time.Now()
	}
	if tolerance <= 0 {
		tolerance = DefaultTolerance
	}
	signedAt := time.Unix(ts, 0)
	// Compare times, not their difference: a difference saturates at about
	// 292 years and its negation would overflow.
	if signedAt.Before(now.Add(-tolerance)) {
		return nil, fmt.Errorf("%w: signed %s ago, more than %s", ErrTimestampOutOfTolerance, now.Sub(signedAt).Truncate(time.Second), tolerance)
	}
	if signedAt.After(now.Add(tolerance)) {
		return nil, fmt.Errorf("%w: signed %s in the future, more than %s", ErrTimestampOutOfTolerance, signedAt.Sub(now).Truncate(time.Second), tolerance)
	}

	var candidates [][]byte
	switch scheme {
	case SchemeStandard:
		candidates = signaturesWithPrefix(sigHeader, "v1,", base64.StdEncoding.DecodeString)
	case SchemeEd25519:
		candidates = signaturesWithPrefix(sigHeader, signatureVersionEd25519, base64.StdEncoding.DecodeString)
	default:
		candidates = signaturesWithPrefix(sigHeader, "sha256=", hex.DecodeString)
	}
	if len(candidates) == 0 {
		return nil, fmt.Errorf("%w: no %s signature in %s", ErrNoMatchingSignature, scheme, sigName)
	}
	webhook := &Webhook{ID: id, Timestamp: signedAt, EventType: headers.Get(HeaderEvent), Body: body}
	if scheme == SchemeEd25519 {
		// Checking a signature with a public key involves nothing secret,
		// so unlike the HMAC comparison below it needs no constant time.
		msg := standardMessage(id, ts, body)
		for _, pub := range publics {
			for _, c := range candidates {
				if ed25519.Verify(pub, msg, c) {
					return webhook, nil
				}
			}
		}
		return nil, ErrNoMatchingSignature
	}
	for _, key := range keys {
		var expected []byte
		if scheme == SchemeStandard {
			expected = standardMAC(key, id, ts, body)
		} else {
			expected = hmacSHA256MAC(string(key), ts, body)
		}
		for _, c := range candidates {
			if hmac.Equal(c, expected) {
				return webhook, nil
			}
		}
	}
	return nil, ErrNoMatchingSignature
}

// keysFor turns secrets into HMAC keys for scheme. An empty key is refused:
// anyone could sign with it.
func keysFor(scheme Scheme, secrets []string) ([][]byte, error) {
	if len(secrets) == 0 {
		return nil, ErrNoSecrets
	}
	keys := make([][]byte, 0, len(secrets))
	for i, secret := range secrets {
		key := []byte(secret)
		if scheme == SchemeStandard {
			var err error
			if key, err = StandardKey(secret); err != nil {
				return nil, fmt.Errorf("%w: secret %d: %w", ErrInvalidSecret, i+1, err)
			}
		}
		if len(key) == 0 {
			return nil, fmt.Errorf("%w: secret %d is empty", ErrInvalidSecret, i+1)
		}
		keys = append(keys, key)
	}
	return keys, nil
}

// parseTimestamp accepts unix seconds written in plain decimal digits only:
// no sign, no spaces, no leading zeros, so that exactly one spelling of a
// time is valid and the signed string is the one the sender formatted.
func parseTimestamp(s string) (int64, error) {
	ts, err := strconv.ParseInt(s, 10, 64)
	if err != nil || ts < 0 || strconv.FormatInt(ts, 10) != s {
		return 0, fmt.Errorf("%w: %q is not unix seconds", ErrInvalidTimestamp, s)
	}
	return ts, nil
}

// signaturesWithPrefix returns the decoded signatures of the space-separated
// entries of header that start with prefix. Entries with another prefix
// (another version or algorithm) or that do not decode are skipped.
func signaturesWithPrefix(header, prefix string, decode func(string) ([]byte, error)) [][]byte {
	var out [][]byte
	for _, entry := range strings.Fields(header) {
		encoded, ok := strings.CutPrefix(entry, prefix)
		if !ok {
			continue
		}
		sig, err := decode(encoded)
		if err != nil || len(sig) == 0 {
			continue
		}
		out = append(out, sig)
	}
	return out
}
