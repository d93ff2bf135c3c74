package api

import (
	"strings"
	"time"

	"github.com/heraldhooks/herald"
	"github.com/heraldhooks/herald/internal/wire"
	"github.com/heraldhooks/herald/verify"
)

// This file holds what the signature schemes need of the endpoint calls:
// the secret an endpoint is created or rotated with, and which of its keys
// an answer may show. An ed25519 endpoint's secret is its private key; no
// answer ever carries it, only the public key made from it.

// endpointSecret returns the secret an endpoint of scheme gets: given, once
// checked (an ed25519 private key is stored in one form, "whsk_" and its
// 32-byte seed, whichever form it came in), or made by Herald when nil: a
// "whsec_" secret for standard and hmac-sha256, a new key pair for ed25519.
func endpointSecret(given *string, scheme herald.SignatureScheme) (string, error) {
	if given != nil {
		if err := validateSecret(*given, scheme); err != nil {
			return "", err
		}
		if scheme == herald.SchemeEd25519 {
			return verify.NormalizeEd25519Key(*given)
		}
		return *given, nil
	}
	if scheme == herald.SchemeEd25519 {
		return verify.NewEd25519Key(nil)
	}
	return newSecret()
}

// validateEd25519Secret checks a private key given for an ed25519 endpoint.
// The message never repeats the key.
func validateEd25519Secret(secret string) error {
	if strings.HasPrefix(secret, verify.PublicKeyPrefix) {
		return badRequest("invalid_secret", "secret is a public key (%s…); signature_scheme %q takes the private key (%s…), or no secret to have Herald make the key pair",
			verify.PublicKeyPrefix, herald.SchemeEd25519, verify.SecretKeyPrefix)
	}
	if _, err := verify.Ed25519PrivateKey(secret); err != nil {
		return badRequest("invalid_secret", "secret must be %q followed by the base64 of an Ed25519 private key (its 32-byte seed, or 64 bytes of seed and public key) for signature_scheme %q",
			verify.SecretKeyPrefix, herald.SchemeEd25519)
	}
	return nil
}

// showKeys sets the keys of ep that an answer shows: the secret for the
// schemes whose receivers hold it, and for ed25519 the public key instead,
// with secret null. A stored private key that cannot be read shows no
// public key rather than failing the answer; the dispatcher reports the
// same fault on every attempt.
func showKeys(out *wire.Endpoint, ep *herald.Endpoint) {
	if ep.SignatureScheme != herald.SchemeEd25519 {
		out.Secret = ep.Secret
		return
	}
	if pk, err := verify.Ed25519PublicKey(ep.Secret); err == nil {
		out.PublicKey = pk
	}
}

// endpointAnswer is the answer for ep at now: toEndpointJSON, and for an
// ed25519 endpoint the previous public key while the previous private key
// still signs beside the current one (until PreviousSecretExpiresAt, on the
// clock the dispatcher uses for the same choice).
func (s *Server) endpointAnswer(ep *herald.Endpoint) wire.Endpoint {
	out := toEndpointJSON(ep)
	if ep.SignatureScheme == herald.SchemeEd25519 && previousSigns(ep, s.clock.Now()) {
		if pk, err := verify.Ed25519PublicKey(ep.PreviousSecret); err == nil {
			out.PreviousPublicKey = pk
		}
	}
	return out
}

// previousSigns reports whether ep's previous secret still signs at now.
func previousSigns(ep *herald.Endpoint, now time.Time) bool {
	return ep.PreviousSecret != "" && ep.PreviousSecretExpiresAt != nil && now.Before(*ep.PreviousSecretExpiresAt)
}

// schemeChangeError refuses a PATCH that moves an endpoint to or from
// ed25519: its key pair is no secret of the other schemes, nor theirs a key
// pair, so no rotation could bridge the two and receivers would have to
// change how they verify at one stroke.
func schemeChangeError(from, to herald.SignatureScheme) error {
	if from != herald.SchemeEd25519 && to != herald.SchemeEd25519 {
		return nil
	}
	return badRequest("invalid_signature_scheme",
		"signature_scheme cannot change from %q to %q: an ed25519 endpoint signs with a key pair, the other schemes with a shared secret; create a new endpoint with signature_scheme %q instead",
		from, to, to)
}
