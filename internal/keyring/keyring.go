// Package keyring encrypts endpoint secrets at rest: a ring of AES-256-GCM
// keys, each with an id. The first key of the ring seals every new value;
// a value names the key that sealed it, so any key still in the ring opens
// it. Keys rotate without downtime: put the new key first, re-encrypt
// (herald secrets reencrypt), then drop the old one.
//
// A sealed value is text:
//
//	enc:v1:<key id>:<base64(nonce | ciphertext and tag)>
//
// with a fresh random 12-byte nonce for every value. The endpoint's id is
// bound as associated data, so a value copied onto another endpoint does
// not open. Whether a stored value is sealed or plain (from before
// encryption) is the store's to record (a column), not guessed from the
// text: a secret an operator chose may begin with anything.
//
// Neither the keys nor the secrets ever appear in an error or a log line:
// errors name key ids and endpoint ids only, and a Ring logs as its ids.
package keyring

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
)

// KeySize is the length of every key: 32 bytes, for AES-256.
const KeySize = 32

// Prefix begins every sealed value; version 1 of the format follows it.
const Prefix = "enc:v1:"

// maxIDLen bounds a key id: ids are stored in every sealed value.
const maxIDLen = 32

// nonceSize is GCM's standard nonce length.
const nonceSize = 12

// Key is one key of a ring: its id and its 32 bytes.
type Key struct {
	ID    string
	Bytes []byte
}

// Ring is an ordered set of keys. The first seals; each opens what it
// sealed. A Ring is immutable and safe for concurrent use.
type Ring struct {
	ids   []string
	aeads map[string]cipher.AEAD
	rand  io.Reader
}

// New makes a ring of keys, the first of which seals. Ids must be unique
// and valid (ValidateID), and each key KeySize bytes.
func New(keys ...Key) (*Ring, error) {
	if len(keys) == 0 {
		return nil, errors.New("no key given")
	}
	r := &Ring{aeads: make(map[string]cipher.AEAD, len(keys)), rand: rand.Reader}
	for _, k := range keys {
		if err := ValidateID(k.ID); err != nil {
			return nil, err
		}
		if _, dup := r.aeads[k.ID]; dup {
			return nil, fmt.Errorf("key id %q is given twice", k.ID)
		}
		if len(k.Bytes) != KeySize {
			return nil, fmt.Errorf("key %s: %d bytes, want %d (base64 of 32 random bytes; herald secrets keygen makes one)", k.ID, len(k.Bytes), KeySize)
		}
		block, err := aes.NewCipher(k.Bytes)
		if err != nil {
			return nil, fmt.Errorf("key %s: %w", k.ID, err)
		}
		aead, err := cipher.NewGCM(block)
		if err != nil {
			return nil, fmt.Errorf("key %s: %w", k.ID, err)
		}
		r.ids = append(r.ids, k.ID)
		r.aeads[k.ID] = aead
	}
	return r, nil
}

// ValidateID checks a key id: 1 to 32 letters, digits, '_', '-' or '.'.
// A ':' or ',' would be ambiguous in a sealed value or in the flag. Its
// errors do not repeat the id, which may be a key given in the wrong place.
func ValidateID(id string) error {
	if id == "" {
		return errors.New("a key id is empty; give id:base64, as in k1:<base64 of 32 bytes>")
	}
	if len(id) > maxIDLen {
		return fmt.Errorf("a key id is longer than %d characters (is the id missing, or after the key?)", maxIDLen)
	}
	for _, c := range id {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.'
		if !ok {
			// The id is not shown: a key put where the id goes would be.
			return errors.New("a key id may hold only letters, digits, '_', '-' and '.'")
		}
	}
	return nil
}

// Parse reads a ring as --encryption-key takes it: entries id:base64,
// separated by commas (or newlines), the sealing key first, as in
// "k2:<base64>,k1:<base64>". The base64 may be standard or URL-safe, with
// or without padding. Errors name the entry and its id, never the key.
func Parse(s string) (*Ring, error) {
	fields := strings.FieldsFunc(s, func(c rune) bool { return c == ',' || c == '\n' || c == '\r' })
	var keys []Key
	for i, f := range fields {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		id, b64, ok := strings.Cut(f, ":")
		if !ok {
			return nil, fmt.Errorf("key %d: want id:base64, as in k1:<base64 of 32 bytes> (herald secrets keygen makes one)", i+1)
		}
		id = strings.TrimSpace(id)
		if err := ValidateID(id); err != nil {
			return nil, fmt.Errorf("key %d: %w", i+1, err)
		}
		raw, err := decodeKey(strings.TrimSpace(b64))
		if err != nil {
			return nil, fmt.Errorf("key %d (%s): not base64", i+1, id)
		}
		keys = append(keys, Key{ID: id, Bytes: raw})
	}
	if len(keys) == 0 {
		return nil, errors.New("no key given; want id:base64, as in k1:<base64 of 32 bytes> (herald secrets keygen makes one)")
	}
	return New(keys...)
}

// decodeKey reads base64 in any of the usual alphabets and paddings.
func decodeKey(s string) ([]byte, error) {
	var err error
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		var b []byte
		if b, err = enc.DecodeString(s); err == nil {
			return b, nil
		}
	}
	return nil, err
}

// Generate makes a new random key with id, in the form Parse reads:
// "id:<base64 of 32 bytes>".
func Generate(id string) (string, error) {
	if err := ValidateID(id); err != nil {
		return "", err
	}
	var b [KeySize]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("make key: %w", err)
	}
	return id + ":" + base64.StdEncoding.EncodeToString(b[:]), nil
}

// CurrentID is the id of the key that seals.
func (r *Ring) CurrentID() string { return r.ids[0] }

// IDs lists the ring's key ids, the sealing key first.
func (r *Ring) IDs() []string { return append([]string(nil), r.ids...) }

// Has says whether the ring holds a key with id.
func (r *Ring) Has(id string) bool {
	_, ok := r.aeads[id]
	return ok
}

// SealedPrefix begins every value the ring seals now: a sealed value that
// does not begin with it is under another key, and re-encryption moves it.
func (r *Ring) SealedPrefix() string { return Prefix + r.ids[0] + ":" }

// String shows the key ids only.
func (r *Ring) String() string { return "keyring(" + strings.Join(r.ids, ",") + ")" }

// LogValue logs the key ids only, never the keys.
func (r *Ring) LogValue() slog.Value { return slog.StringValue(strings.Join(r.ids, ",")) }

// associatedData binds a value to its key id and its endpoint.
func associatedData(keyID, endpointID string) []byte {
	return []byte(Prefix + keyID + ":" + endpointID)
}

// Seal encrypts secret for the endpoint endpointID under the current key.
// The empty secret (no secret) stays empty.
func (r *Ring) Seal(endpointID, secret string) (string, error) {
	if secret == "" {
		return "", nil
	}
	if endpointID == "" {
		return "", errors.New("seal secret: no endpoint id to bind it to")
	}
	id := r.ids[0]
	aead := r.aeads[id]
	buf := make([]byte, nonceSize, nonceSize+len(secret)+aead.Overhead())
	if _, err := io.ReadFull(r.rand, buf); err != nil {
		return "", fmt.Errorf("seal secret of endpoint %s: nonce: %w", endpointID, err)
	}
	buf = aead.Seal(buf, buf[:nonceSize], []byte(secret), associatedData(id, endpointID))
	return Prefix + id + ":" + base64.RawStdEncoding.EncodeToString(buf), nil
}

// KeyID reads the id of the key that sealed value, which must be in the
// sealed form.
func KeyID(value string) (string, error) {
	rest, ok := strings.CutPrefix(value, Prefix)
	if !ok {
		return "", errors.New("not a sealed value (no " + Prefix + " prefix)")
	}
	id, _, ok := strings.Cut(rest, ":")
	if !ok || ValidateID(id) != nil {
		return "", errors.New("sealed value has no valid key id")
	}
	return id, nil
}

// UnknownKeyError says a value was sealed under a key the ring lacks.
type UnknownKeyError struct {
	KeyID string
	Have  []string
}

func (e *UnknownKeyError) Error() string {
	return fmt.Sprintf("sealed under key %q, which the key ring (%s) does not hold: give that key in --encryption-key (HERALD_ENCRYPTION_KEY), after the current one",
		e.KeyID, strings.Join(e.Have, ", "))
}

// ErrNotOpened: the key named by a value does not open it. The key under
// that id is not the one that sealed it, or the value was altered, or it
// belongs to another endpoint.
var ErrNotOpened = errors.New("does not open: a different key under that id, an altered value, or a value of another endpoint")

// Open decrypts a value sealed for the endpoint endpointID. The empty value
// (no secret) opens to empty. A key the ring lacks gives an
// *UnknownKeyError; a value that does not open gives ErrNotOpened.
func (r *Ring) Open(endpointID, sealed string) (string, error) {
	if sealed == "" {
		return "", nil
	}
	id, err := KeyID(sealed)
	if err != nil {
		return "", fmt.Errorf("open secret of endpoint %s: %w", endpointID, err)
	}
	aead, ok := r.aeads[id]
	if !ok {
		return "", fmt.Errorf("open secret of endpoint %s: %w", endpointID, &UnknownKeyError{KeyID: id, Have: r.IDs()})
	}
	raw, err := base64.RawStdEncoding.DecodeString(sealed[len(Prefix)+len(id)+1:])
	if err != nil || len(raw) < nonceSize+aead.Overhead() {
		return "", fmt.Errorf("open secret of endpoint %s under key %s: %w", endpointID, id, ErrNotOpened)
	}
	plain, err := aead.Open(nil, raw[:nonceSize], raw[nonceSize:], associatedData(id, endpointID))
	if err != nil {
		return "", fmt.Errorf("open secret of endpoint %s under key %s: %w", endpointID, id, ErrNotOpened)
	}
	return string(plain), nil
}
