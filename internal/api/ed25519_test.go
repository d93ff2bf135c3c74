package api_test

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhooks/herald/verify"
)

// keysOut is what an endpoint answer says about its signing keys. The
// pointers tell null from "".
type keysOut struct {
	ID                      string     `json:"id"`
	Secret                  *string    `json:"secret"`
	PublicKey               *string    `json:"public_key"`
	PreviousPublicKey       *string    `json:"previous_public_key"`
	PreviousSecretExpiresAt *time.Time `json:"previous_secret_expires_at"`
	SignatureScheme         string     `json:"signature_scheme"`
}

// keys decodes r's endpoint answer and requires that it carries no private
// key anywhere in its bytes.
func keys(t *testing.T, r *response, status int) keysOut {
	t.Helper()
	var out keysOut
	r.must(status, &out)
	require.NotContains(t, string(r.body), verify.SecretKeyPrefix, "an answer never shows a private key")
	return out
}

// edKey is the whsk_ key whose 32-byte seed is b repeated, and its public
// key.
func edKey(t *testing.T, b byte) (secretKey, publicKey string) {
	t.Helper()
	secretKey = verify.SecretKeyPrefix + base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{b}, ed25519.SeedSize))
	publicKey, err := verify.Ed25519PublicKey(secretKey)
	require.NoError(t, err)
	return secretKey, publicKey
}

func TestEd25519Endpoints(t *testing.T) {
	t.Parallel()

	t.Run("CreateMakesAKeyPairAndShowsOnlyThePublicKey", func(t *testing.T) {
		t.Parallel()
		e := setup(t)
		created := keys(t, e.do("POST", "/v1/endpoints", map[string]any{
			"url": "https://example.com/hooks", "signature_scheme": "ed25519",
		}), http.StatusCreated)
		require.Equal(t, "ed25519", created.SignatureScheme)
		require.Nil(t, created.Secret, "secret is null for ed25519")
		require.NotNil(t, created.PublicKey)
		require.True(t, strings.HasPrefix(*created.PublicKey, verify.PublicKeyPrefix), *created.PublicKey)
		require.Nil(t, created.PreviousPublicKey)
		require.Nil(t, created.PreviousSecretExpiresAt)

		// Herald keeps the private key, as its 32-byte seed, and the public
		// key shown is its own.
		stored, err := e.store.EndpointGet(t.Context(), created.ID)
		require.NoError(t, err)
		raw, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(stored.Secret, verify.SecretKeyPrefix))
		require.NoError(t, err)
		require.Len(t, raw, ed25519.SeedSize)
		pk, err := verify.Ed25519PublicKey(stored.Secret)
		require.NoError(t, err)
		require.Equal(t, pk, *created.PublicKey)

		// Every answer that carries the endpoint hides the private key.
		path := "/v1/endpoints/" + created.ID
		for _, r := range []*response{
			e.do("GET", path, nil),
			e.do("PATCH", path, `{"description":"signed with a key pair"}`),
			e.do("POST", path+"/disable", nil),
			e.do("POST", path+"/enable", nil),
		} {
			got := keys(t, r, http.StatusOK)
			require.Nil(t, got.Secret)
			require.Equal(t, created.PublicKey, got.PublicKey)
		}
		list := e.do("GET", "/v1/endpoints", nil)
		list.must(http.StatusOK, nil)
		require.NotContains(t, string(list.body), verify.SecretKeyPrefix)
		require.Contains(t, string(list.body), *created.PublicKey)

		// Another pair for another endpoint.
		other := keys(t, e.do("POST", "/v1/endpoints", map[string]any{
			"url": "https://example.com/hooks", "signature_scheme": "ed25519",
		}), http.StatusCreated)
		require.NotEqual(t, created.PublicKey, other.PublicKey)
	})

	t.Run("OtherSchemesShowTheirSecretAndNoPublicKey", func(t *testing.T) {
		t.Parallel()
		e := setup(t)
		for _, scheme := range []string{"standard", "hmac-sha256"} {
			got := keys(t, e.do("POST", "/v1/endpoints", map[string]any{
				"url": "https://example.com/hooks", "signature_scheme": scheme,
			}), http.StatusCreated)
			require.NotNil(t, got.Secret)
			require.True(t, strings.HasPrefix(*got.Secret, verify.SecretPrefix))
			require.Nil(t, got.PublicKey)
			require.Nil(t, got.PreviousPublicKey)
			rotated := keys(t, e.do("POST", "/v1/endpoints/"+got.ID+"/rotate-secret", nil), http.StatusOK)
			require.Nil(t, rotated.PreviousPublicKey)
			require.NotNil(t, rotated.Secret)
		}
	})

	t.Run("GivenPrivateKeyIsAccepted", func(t *testing.T) {
		t.Parallel()
		e := setup(t)
		seedForm, publicKey := edKey(t, 5)
		got := keys(t, e.do("POST", "/v1/endpoints", map[string]any{
			"url": "https://example.com/hooks", "signature_scheme": "ed25519", "secret": seedForm,
		}), http.StatusCreated)
		require.Equal(t, publicKey, *got.PublicKey)
		stored, err := e.store.EndpointGet(t.Context(), got.ID)
		require.NoError(t, err)
		require.Equal(t, seedForm, stored.Secret)

		// The 64-byte form is kept as its seed, like every key Herald makes.
		key, err := verify.Ed25519PrivateKey(seedForm)
		require.NoError(t, err)
		longForm := verify.SecretKeyPrefix + base64.StdEncoding.EncodeToString(key)
		got = keys(t, e.do("POST", "/v1/endpoints", map[string]any{
			"url": "https://example.com/hooks", "signature_scheme": "ed25519", "secret": longForm,
		}), http.StatusCreated)
		require.Equal(t, publicKey, *got.PublicKey)
		stored, err = e.store.EndpointGet(t.Context(), got.ID)
		require.NoError(t, err)
		require.Equal(t, seedForm, stored.Secret)
	})

	t.Run("BadPrivateKeyIs400NamingTheField", func(t *testing.T) {
		t.Parallel()
		e := setup(t)
		seedForm, publicKey := edKey(t, 6)
		_, otherPublic := edKey(t, 7)
		key, err := verify.Ed25519PrivateKey(seedForm)
		require.NoError(t, err)
		mismatched := verify.SecretKeyPrefix + base64.StdEncoding.EncodeToString(append(key.Seed(), mustDecode(t, otherPublic)...))
		for name, secret := range map[string]string{
			"HMACSecret":      "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
			"PublicKey":       publicKey,
			"NotBase64":       "whsk_not base64!",
			"ShortKey":        "whsk_" + base64.StdEncoding.EncodeToString(make([]byte, 16)),
			"MismatchedHalve": mismatched,
			"Empty":           "",
		} {
			msg := e.do("POST", "/v1/endpoints", map[string]any{
				"url": "https://example.com/hooks", "signature_scheme": "ed25519", "secret": secret,
			}).apiErr(http.StatusBadRequest, "invalid_secret")
			require.Contains(t, msg, "secret", name)
			require.Contains(t, msg, "ed25519", name)
			if secret != "" {
				require.NotContains(t, msg, secret, "%s: the message never repeats the key", name)
			}
		}
		msg := e.do("POST", "/v1/endpoints", map[string]any{
			"url": "https://example.com/hooks", "signature_scheme": "ed25519", "secret": publicKey,
		}).apiErr(http.StatusBadRequest, "invalid_secret")
		require.Contains(t, msg, "secret is a public key")
		// A private key is no secret of the other schemes.
		e.do("POST", "/v1/endpoints", map[string]any{
			"url": "https://example.com/hooks", "secret": seedForm,
		}).apiErr(http.StatusBadRequest, "invalid_secret")
	})

	t.Run("RotationOverlapsForADay", func(t *testing.T) {
		t.Parallel()
		e := setup(t)
		ep := keys(t, e.do("POST", "/v1/endpoints", map[string]any{
			"url": "https://example.com/hooks", "signature_scheme": "ed25519",
		}), http.StatusCreated)
		path := "/v1/endpoints/" + ep.ID
		e.clock.Advance(time.Hour)

		rotated := keys(t, e.do("POST", path+"/rotate-secret", nil), http.StatusOK)
		require.Nil(t, rotated.Secret)
		require.NotEqual(t, ep.PublicKey, rotated.PublicKey, "a new key pair")
		require.Equal(t, ep.PublicKey, rotated.PreviousPublicKey, "the old key signs on beside it")
		require.Equal(t, start.Add(25*time.Hour), *rotated.PreviousSecretExpiresAt)

		stored, err := e.store.EndpointGet(t.Context(), ep.ID)
		require.NoError(t, err)
		pk, err := verify.Ed25519PublicKey(stored.Secret)
		require.NoError(t, err)
		require.Equal(t, *rotated.PublicKey, pk)
		pk, err = verify.Ed25519PublicKey(stored.PreviousSecret)
		require.NoError(t, err)
		require.Equal(t, *ep.PublicKey, pk)

		// Shown on every read while it signs, and no longer once it stops.
		got := keys(t, e.do("GET", path, nil), http.StatusOK)
		require.Equal(t, ep.PublicKey, got.PreviousPublicKey)
		e.clock.Advance(24*time.Hour - time.Second)
		got = keys(t, e.do("GET", path, nil), http.StatusOK)
		require.Equal(t, ep.PublicKey, got.PreviousPublicKey)
		e.clock.Advance(time.Second)
		got = keys(t, e.do("GET", path, nil), http.StatusOK)
		require.Nil(t, got.PreviousPublicKey)
		require.Equal(t, rotated.PublicKey, got.PublicKey)
		require.Equal(t, start.Add(25*time.Hour), *got.PreviousSecretExpiresAt)

		// A given private key: its public key is the new one.
		given, givenPublic := edKey(t, 9)
		again := keys(t, e.do("POST", path+"/rotate-secret", map[string]any{"secret": given}), http.StatusOK)
		require.Equal(t, givenPublic, *again.PublicKey)
		require.Equal(t, rotated.PublicKey, again.PreviousPublicKey)
		msg := e.do("POST", path+"/rotate-secret", map[string]any{"secret": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}).
			apiErr(http.StatusBadRequest, "invalid_secret")
		require.Contains(t, msg, "whsk_")
	})

	t.Run("SchemeCannotChangeToOrFromEd25519", func(t *testing.T) {
		t.Parallel()
		e := setup(t)
		ed := keys(t, e.do("POST", "/v1/endpoints", map[string]any{
			"url": "https://example.com/hooks", "signature_scheme": "ed25519",
		}), http.StatusCreated)
		std := e.createEndpoint(map[string]any{})
		for _, tc := range []struct{ id, body string }{
			{ed.ID, `{"signature_scheme":"standard"}`},
			{ed.ID, `{"signature_scheme":"hmac-sha256"}`},
			{ed.ID, `{"signature_scheme":null}`},
			{std.ID, `{"signature_scheme":"ed25519"}`},
		} {
			msg := e.do("PATCH", "/v1/endpoints/"+tc.id, tc.body).apiErr(http.StatusBadRequest, "invalid_signature_scheme")
			require.Contains(t, msg, "create a new endpoint")
		}
		got := keys(t, e.do("PATCH", "/v1/endpoints/"+ed.ID, `{"signature_scheme":"ed25519"}`), http.StatusOK)
		require.Equal(t, ed.PublicKey, got.PublicKey)
		for _, field := range []string{"public_key", "previous_public_key"} {
			body, err := json.Marshal(map[string]any{field: *ed.PublicKey})
			require.NoError(t, err)
			e.do("PATCH", "/v1/endpoints/"+ed.ID, body).apiErr(http.StatusBadRequest, "read_only_field")
		}
		e.do("POST", "/v1/endpoints", map[string]any{
			"url": "https://example.com/hooks", "public_key": *ed.PublicKey,
		}).apiErr(http.StatusBadRequest, "unknown_field")
	})
}

func mustDecode(t *testing.T, publicKey string) []byte {
	t.Helper()
	raw, err := verify.ParseEd25519PublicKey(publicKey)
	require.NoError(t, err)
	return raw
}
