package verify

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// The prefixes of Standard Webhooks' asymmetric keys. They are part of the
// written form, not of the key, and they are required: a seed and a public
// key are both 32 bytes of base64, and only the prefix tells a private key
// given by mistake from the public key a receiver should hold.
const (
	// SecretKeyPrefix starts an Ed25519 private key: "whsk_" and the base64
	// of its 32-byte seed (or of the 64-byte seed and public key).
	SecretKeyPrefix = "whsk_"
	// PublicKeyPrefix starts an Ed25519 public key: "whpk_" and the base64
	// of its 32 bytes.
	PublicKeyPrefix = "whpk_"
)

// signatureVersionEd25519 starts each asymmetric signature in the
// webhook-signature header, as "v1," starts each HMAC one.
const signatureVersionEd25519 = "v1a,"

// NewEd25519Key makes a new private key from r (crypto/rand when r is nil)
// and writes it as Herald stores it: "whsk_" and the base64 of the 32-byte
// seed. Ed25519PublicKey gives its public key.
func NewEd25519Key(r io.Reader) (string, error) {
	if r == nil {
		r = rand.Reader
	}
	seed := make([]byte, ed25519.SeedSize)
	if _, err := io.ReadFull(r, seed); err != nil {
		return "", fmt.Errorf("make ed25519 key: %w", err)
	}
	return SecretKeyPrefix + base64.StdEncoding.EncodeToString(seed), nil
}

// Ed25519PrivateKey reads a "whsk_" private key. The base64 part may be the
// 32-byte seed (RFC 8032's private key) or the 64 bytes of the seed followed
// by the public key (the form of Go's crypto/ed25519 and libsodium); in the
// latter the public half must belong to the seed, or every signature made
// with it would fail to verify.
func Ed25519PrivateKey(secretKey string) (ed25519.PrivateKey, error) {
	encoded, ok := strings.CutPrefix(secretKey, SecretKeyPrefix)
	if !ok {
		if strings.HasPrefix(secretKey, PublicKeyPrefix) {
			return nil, fmt.Errorf("the key is a public key (%s); signing needs the private key (%s)", PublicKeyPrefix, SecretKeyPrefix)
		}
		return nil, fmt.Errorf("the private key does not start with %s", SecretKeyPrefix)
	}
	raw, err := base64.StdEncoding.DecodeString(encoded)
	if err != nil {
		return nil, fmt.Errorf("the private key is not %s followed by base64: %w", SecretKeyPrefix, err)
	}
	switch len(raw) {
	case ed25519.SeedSize:
		return ed25519.NewKeyFromSeed(raw), nil
	case ed25519.PrivateKeySize:
		key := ed25519.NewKeyFromSeed(raw[:ed25519.SeedSize])
		if !bytes.Equal(key[ed25519.SeedSize:], raw[ed25519.SeedSize:]) {
			return nil, fmt.Errorf("the 64-byte private key's second half is not the public key of its seed")
		}
		return key, nil
	}
	return nil, fmt.Errorf("the private key holds %d bytes; an Ed25519 private key is a %d-byte seed or %d bytes of seed and public key",
		len(raw), ed25519.SeedSize, ed25519.PrivateKeySize)
}

// NormalizeEd25519Key writes a private key in the form Herald stores and
// NewEd25519Key makes, "whsk_" and the base64 of the 32-byte seed, whichever
// of the two forms secretKey was given in.
func NormalizeEd25519Key(secretKey string) (string, error) {
	key, err := Ed25519PrivateKey(secretKey)
	if err != nil {
		return "", err
	}
	return SecretKeyPrefix + base64.StdEncoding.EncodeToString(key.Seed()), nil
}

// Ed25519PublicKey returns the public key of a "whsk_" private key, written
// "whpk_" and the base64 of its 32 bytes: what a receiver verifies with.
func Ed25519PublicKey(secretKey string) (string, error) {
	key, err := Ed25519PrivateKey(secretKey)
	if err != nil {
		return "", err
	}
	return PublicKeyPrefix + base64.StdEncoding.EncodeToString(key.Public().(ed25519.PublicKey)), nil
}

// ParseEd25519PublicKey reads a "whpk_" public key.
func ParseEd25519PublicKey(publicKey string) (ed25519.PublicKey, error) {
	encoded, ok := strings.CutPrefix(publicKey, PublicKeyPrefix)
	if !ok {
		if strings.HasPrefix(publicKey, SecretKeyPrefix) {
			return nil, fmt.Errorf("the key is a private key (%s); a receiver verifies with the public key (%s) and must not hold the private one", SecretKeyPrefix, PublicKeyPrefix)
		}
		return nil, fmt.Errorf("the public key does not start with %s", PublicKeyPrefix)
	}
	raw, err := base64.StdEncoding.DecodeString(encoded)
	if err != nil {
		return nil, fmt.Errorf("the public key is not %s followed by base64: %w", PublicKeyPrefix, err)
	}
	if len(raw) != ed25519.PublicKeySize {
		return nil, fmt.Errorf("the public key holds %d bytes; an Ed25519 public key has %d", len(raw), ed25519.PublicKeySize)
	}
	return ed25519.PublicKey(raw), nil
}

// SignEd25519 returns the Standard Webhooks asymmetric signature of body:
// "v1a," + base64(Ed25519(privateKey, "{id}.{timestamp}.{body}")), made
// with a "whsk_" private key. Ed25519 signatures are deterministic: the same
// key and message always give the same signature.
func SignEd25519(secretKey, id string, timestamp int64, body []byte) (string, error) {
	key, err := Ed25519PrivateKey(secretKey)
	if err != nil {
		return "", err
	}
	sig := ed25519.Sign(key, standardMessage(id, timestamp, body))
	return signatureVersionEd25519 + base64.StdEncoding.EncodeToString(sig), nil
}

// standardMessage is the signed content of Standard Webhooks,
// "{id}.{timestamp}.{body}", in one slice (Ed25519 hashes the message twice,
// so it cannot be streamed as the HMAC is).
func standardMessage(id string, timestamp int64, body []byte) []byte {
	msg := make([]byte, 0, len(id)+len(body)+22)
	msg = append(msg, id...)
	msg = append(msg, '.')
	msg = strconv.AppendInt(msg, timestamp, 10)
	msg = append(msg, '.')
	return append(msg, body...)
}

// publicKeysFor reads the public keys a Verifier checks SchemeEd25519
// signatures with.
func publicKeysFor(publicKeys []string) ([]ed25519.PublicKey, error) {
	if len(publicKeys) == 0 {
		return nil, fmt.Errorf("%w: scheme %s verifies with public keys (%s…); none is given", ErrNoSecrets, SchemeEd25519, PublicKeyPrefix)
	}
	keys := make([]ed25519.PublicKey, 0, len(publicKeys))
	for i, pk := range publicKeys {
		key, err := ParseEd25519PublicKey(pk)
		if err != nil {
			return nil, fmt.Errorf("%w: public key %d: %w", ErrInvalidSecret, i+1, err)
		}
		keys = append(keys, key)
	}
	return keys, nil
}
