package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/heraldhooks/herald"
)

// SecretCipher seals endpoint secrets for storage and opens them again
// (internal/keyring's Ring is one). A store given one keeps every secret it
// writes sealed; the callers of the store see plain secrets as before.
//
// Sealed values have the form "enc:v1:<key id>:<data>": the stores read the
// key id from it to count values by key, and SealedPrefix to find those not
// under the current key.
type SecretCipher interface {
	// Seal encrypts secret for the endpoint endpointID under the current
	// key, binding the endpoint id. "" stays "".
	Seal(endpointID, secret string) (string, error)
	// Open decrypts a value Seal made for endpointID, under whichever key
	// it names. "" opens to "".
	Open(endpointID, sealed string) (string, error)
	// SealedPrefix begins every value Seal makes now: a sealed value that
	// does not begin with it is under an older key.
	SealedPrefix() string
}

// OpenOptions are what a backend takes beside its database when it opens.
type OpenOptions struct {
	// Secrets, when set, seals endpoint secrets at rest. Without it a store
	// writes secrets plain, and cannot read sealed ones (ErrNoKey).
	Secrets SecretCipher
	// ConnectWait is how long opening waits for a database that is not
	// accepting connections yet (starting, restarting, refusing them):
	// it retries with backoff, logging each try, until the database
	// answers or ConnectWait has passed. An error that waiting cannot mend
	// (a wrong password, a database that does not exist) fails at once.
	// Zero tries once. Only PostgreSQL waits; SQLite is a file.
	ConnectWait time.Duration
	// CompressPayloads has the store write the payloads of the events it
	// ingests compressed (StoredPayload). Every store reads both.
	CompressPayloads bool
	// ListenURL, when set, is a direct PostgreSQL URL the wake-ups
	// (LISTEN) connect to instead of the store's own URL, which goes
	// through a transaction pooler that cannot hold a LISTEN.
	ListenURL string
	// Release is the release that opens the store: recorded beside each
	// migration it applies, and named when a database's schema is newer
	// than it knows (CheckSchema). Empty means DefaultRelease.
	Release string
}

// ReleaseName is o.Release, or DefaultRelease when it is empty.
func (o OpenOptions) ReleaseName() string {
	if o.Release == "" {
		return DefaultRelease
	}
	return o.Release
}

// OpenOption sets one of the OpenOptions.
type OpenOption func(*OpenOptions)

// WithSecrets makes the store seal endpoint secrets with c.
func WithSecrets(c SecretCipher) OpenOption {
	return func(o *OpenOptions) { o.Secrets = c }
}

// WithConnectWait makes opening wait up to d for the database to accept
// connections (OpenOptions.ConnectWait).
func WithConnectWait(d time.Duration) OpenOption {
	return func(o *OpenOptions) { o.ConnectWait = d }
}

// WithListenURL has the wake-ups LISTEN on a direct connection to url
// (OpenOptions.ListenURL).
func WithListenURL(url string) OpenOption {
	return func(o *OpenOptions) { o.ListenURL = url }
}

// WithCompressedPayloads has the store compress the payloads it writes
// (OpenOptions.CompressPayloads).
func WithCompressedPayloads() OpenOption {
	return func(o *OpenOptions) { o.CompressPayloads = true }
}

// WithRelease names the release that opens the store
// (OpenOptions.Release).
func WithRelease(r string) OpenOption {
	return func(o *OpenOptions) { o.Release = r }
}

// NewOpenOptions applies opts to the zero OpenOptions.
func NewOpenOptions(opts ...OpenOption) OpenOptions {
	var o OpenOptions
	for _, f := range opts {
		f(&o)
	}
	return o
}

// ErrNoKey: the store was opened without a key (OpenOptions.Secrets) and
// met a sealed secret, or was asked to seal.
var ErrNoKey = errors.New("endpoint secrets are encrypted, and no encryption key is given (--encryption-key, HERALD_ENCRYPTION_KEY)")

// SecretStore is the part of Store that keeps endpoint secrets sealed under
// the current key: sealing the plain secrets of a database from before
// encryption, re-encrypting after a key rotation, and counting values by
// key.
//
// An endpoint row records whether its secrets are sealed (a column, since a
// secret an operator chose may look like anything). Its current and
// previous secret are both sealed or both plain.
type SecretStore interface {
	// EndpointSecretsReseal takes up to p.Limit endpoints, by id after
	// p.After, whose secrets are plain or (unless p.PlainOnly) sealed under
	// a key other than the current one, and writes them sealed under the
	// current key in one transaction. Each write is conditional on the
	// row's secrets being as they were read, so a rotation of the secret
	// meanwhile wins, and is counted in Changed. It needs the store's key
	// (ErrNoKey), and a key for every value it opens: a missing one stops it
	// with an error naming that key.
	EndpointSecretsReseal(ctx context.Context, p *EndpointSecretsResealParams) (*EndpointSecretsResealResult, error)
	// EndpointSecretKeys counts the stored secrets (current and previous,
	// of endpoints not deleted; empty ones are not counted) by the key
	// that sealed them, plain ones under KeyID "", in key id order. For
	// each key it tries to open one value with the store's key ring.
	EndpointSecretKeys(ctx context.Context) ([]SecretKeyUse, error)
}

// EndpointSecretsResealParams selects one batch of EndpointSecretsReseal.
type EndpointSecretsResealParams struct {
	// After is the cursor: only endpoints with a greater id. "" starts.
	After string
	// Limit bounds the endpoints of the batch (0: DefaultListLimit).
	Limit int
	// PlainOnly leaves sealed secrets alone, whatever their key: the
	// pass that seals a database's secrets from before encryption.
	PlainOnly bool
}

// EndpointSecretsResealResult says what a batch did.
type EndpointSecretsResealResult struct {
	// Resealed counts the endpoints written under the current key.
	Resealed int
	// Changed counts endpoints whose secrets changed between the read and
	// the write (a rotation on another node): left as they are.
	Changed int
	// Next is the cursor of the next batch; "" when none is left.
	Next string
}

// Tally counts one conditional write of a reseal pass: the endpoint
// written (rows 1: Resealed), or its secrets found changed since they were
// read (Changed).
func (r *EndpointSecretsResealResult) Tally(rows int64) {
	if rows == 1 {
		r.Resealed++
	} else {
		r.Changed++
	}
}

// After sets Next for a batch read with limit: its last id when the batch
// is full, so the next pass starts after it; none when it is not.
func (r *EndpointSecretsResealResult) After(batch []ResealRow, limit int) {
	if len(batch) == limit && limit > 0 {
		r.Next = batch[len(batch)-1].ID
	}
}

// SecretKeyUse is how many stored secret values one key sealed.
type SecretKeyUse struct {
	// KeyID names the key; "" counts plain (not yet sealed) values.
	KeyID string
	// Values counts current and previous secrets.
	Values int64
	// SampleEndpointID is an endpoint with a value under KeyID, and
	// SampleErr what opening that value with the store's key ring gave:
	// nil when it opened (or is plain).
	SampleEndpointID string
	SampleErr        error
}

// Secrets is what a backend uses to seal and open endpoint secrets with
// its SecretCipher. The zero Secrets has no key: it writes plain and cannot
// open sealed values.
type Secrets struct {
	cipher SecretCipher
}

// NewSecrets wraps c, which may be nil (no key).
func NewSecrets(c SecretCipher) Secrets { return Secrets{cipher: c} }

// HasKey says whether secrets are sealed.
func (s Secrets) HasKey() bool { return s.cipher != nil }

// Prefix is the cipher's SealedPrefix ("" without a key).
func (s Secrets) Prefix() string {
	if s.cipher == nil {
		return ""
	}
	return s.cipher.SealedPrefix()
}

// Seal gives how secret is stored for endpointID, and whether that is
// sealed: with a key always, without one never.
func (s Secrets) Seal(endpointID, secret string) (stored string, sealed bool, err error) {
	if s.cipher == nil {
		return secret, false, nil
	}
	stored, err = s.cipher.Seal(endpointID, secret)
	if err != nil {
		return "", false, fmt.Errorf("seal secret of endpoint %s: %w", endpointID, err)
	}
	return stored, true, nil
}

// Open turns a stored value into the secret: as it is when plain, opened
// when sealed.
func (s Secrets) Open(endpointID, stored string, sealed bool) (string, error) {
	if !sealed || stored == "" {
		return stored, nil
	}
	if s.cipher == nil {
		return "", fmt.Errorf("open secret of endpoint %s: %w", endpointID, ErrNoKey)
	}
	return s.cipher.Open(endpointID, stored)
}

// OpenEndpoint opens ep's current and previous secret in place, as read
// from a row whose secrets are sealed or not, and its client key, which
// says itself whether it is sealed (ClientKeySealed).
func (s Secrets) OpenEndpoint(ep *herald.Endpoint, sealed bool) error {
	var err error
	if ep.Secret, err = s.Open(ep.ID, ep.Secret, sealed); err != nil {
		return err
	}
	if ep.PreviousSecret, err = s.Open(ep.ID, ep.PreviousSecret, sealed); err != nil {
		return err
	}
	if ep.ClientKey != "" {
		ep.ClientKey, err = s.Open(ep.ID, ep.ClientKey, ClientKeySealed(ep.ClientKey))
	}
	return err
}

// SealedForm begins every sealed value, whatever its key (the form of
// SecretCipher).
const SealedForm = "enc:v1:"

// ClientKeySealed says whether a stored client key is sealed. Unlike a
// secret, which an operator may choose, a client key is PEM ("-----BEGIN
// ..."), so its text tells sealed from plain and it needs no column.
func ClientKeySealed(stored string) bool { return strings.HasPrefix(stored, SealedForm) }

// SealClientKey gives how an endpoint's client key is stored: sealed with
// a key, plain without one.
func (s Secrets) SealClientKey(endpointID, key string) (string, error) {
	stored, _, err := s.Seal(endpointID, key)
	return stored, err
}

// Rotate gives the stored values of a rotation: the new secret, and the
// old one (as stored, sealed or not) moved to previous, so that both
// come out in one form, sealed with a key. Without a key on a sealed row
// it gives ErrNoKey.
func (s Secrets) Rotate(endpointID, newSecret, oldStored string, oldSealed bool) (secret, previous string, sealed bool, err error) {
	if s.cipher == nil {
		if oldSealed {
			return "", "", false, fmt.Errorf("rotate secret of endpoint %s: %w", endpointID, ErrNoKey)
		}
		return newSecret, oldStored, false, nil
	}
	if secret, _, err = s.Seal(endpointID, newSecret); err != nil {
		return "", "", false, err
	}
	previous = oldStored
	if !oldSealed {
		if previous, _, err = s.Seal(endpointID, oldStored); err != nil {
			return "", "", false, err
		}
	}
	return secret, previous, true, nil
}

// Reseal gives a value as it is stored under the current key: a plain one
// sealed, one under an older key opened and sealed again, one under the
// current key as it is.
func (s Secrets) Reseal(endpointID, stored string, sealed bool) (string, error) {
	if s.cipher == nil {
		return "", fmt.Errorf("re-encrypt secrets of endpoint %s: %w", endpointID, ErrNoKey)
	}
	if stored == "" || sealed && strings.HasPrefix(stored, s.cipher.SealedPrefix()) {
		return stored, nil
	}
	plain, err := s.Open(endpointID, stored, sealed)
	if err != nil {
		return "", err
	}
	out, _, err := s.Seal(endpointID, plain)
	return out, err
}

// ResealRow is one endpoint's secrets as read for EndpointSecretsReseal.
type ResealRow struct {
	ID               string
	Secret, Previous string
	Sealed           bool
	// ClientKey is the endpoint's client key as stored ("" for none).
	ClientKey string
}

// Reseal gives the row's secrets under the current key.
func (r ResealRow) Reseal(s Secrets) (secret, previous string, err error) {
	if secret, err = s.Reseal(r.ID, r.Secret, r.Sealed); err != nil {
		return "", "", err
	}
	previous, err = s.Reseal(r.ID, r.Previous, r.Sealed)
	return secret, previous, err
}

// ResealClientKey gives the row's client key under the current key.
func (r ResealRow) ResealClientKey(s Secrets) (string, error) {
	return s.Reseal(r.ID, r.ClientKey, ClientKeySealed(r.ClientKey))
}

// SampleErr is the error opening a sample value: nil for a plain one.
func (s Secrets) SampleErr(endpointID, stored string, sealed bool) error {
	_, err := s.Open(endpointID, stored, sealed)
	return err
}
