// Package verify lets a webhook receiver check that a request came from
// Herald: Sign and Verify for every signature scheme Herald sends (Standard
// Webhooks with HMAC-SHA256, its asymmetric Ed25519 form, and the hex
// hmac-sha256 style), HMACs compared in constant time, with a timestamp
// tolerance against replays, and net/http middleware that verifies each
// request and drops duplicates by webhook id. It uses the standard library
// only, so receivers can import it without pulling in Herald.
//
// The simplest receiver wraps its handler:
//
//	v := &verify.Verifier{Secrets: []string{os.Getenv("WEBHOOK_SECRET")}}
//	http.Handle("/webhooks", verify.Middleware(v, handler))
//
// For an endpoint with signature scheme ed25519 the receiver holds only the
// endpoint's public key, which can check webhooks but not forge them:
//
//	v := &verify.Verifier{Scheme: verify.SchemeEd25519, PublicKeys: []string{os.Getenv("WEBHOOK_PUBLIC_KEY")}}
//
// A receiver that reads the body itself calls VerifyStandard, VerifyEd25519
// or VerifyHMACSHA256 (or Verifier.VerifyPayload) with the raw bytes, before
// any JSON decoding: the signature covers the bytes, not their meaning.
//
// Every refusal wraps one of the Err values, so callers can tell a forged or
// altered request (ErrNoMatchingSignature) from a stale one
// (ErrTimestampOutOfTolerance) or a malformed one (ErrMissingHeaders,
// ErrInvalidTimestamp), and print the reason.
//
// testdata/vectors.json pins signatures of every scheme, computed outside
// Herald; receivers in other languages can check their code against it.
package verify
