package verify

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Two key pairs from fixed seeds, so that failures print the same keys on
// every run.
var (
	testSecretKey      = seedKey(1)
	testPublicKey      = mustPublic(testSecretKey)
	testOtherSecretKey = seedKey(2)
	testOtherPublicKey = mustPublic(testOtherSecretKey)
)

// seedKey is the whsk_ key whose 32-byte seed is b repeated.
func seedKey(b byte) string {
	return SecretKeyPrefix + base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{b}, ed25519.SeedSize))
}

func mustPublic(secretKey string) string {
	pk, err := Ed25519PublicKey(secretKey)
	if err != nil {
		panic(err)
	}
	return pk
}

// ed25519Headers returns the headers of a request to body signed with each
// of secretKeys, as Herald sends them (two during a rotation).
func ed25519Headers(t *testing.T, id string, ts int64, body []byte, secretKeys ...string) http.Header {
	t.Helper()
	var sigs []string
	for _, k := range secretKeys {
		sig, err := SignEd25519(k, id, ts, body)
		require.NoError(t, err)
		sigs = append(sigs, sig)
	}
	h := http.Header{}
	h.Set(HeaderStandardID, id)
	h.Set(HeaderStandardTimestamp, strconv.FormatInt(ts, 10))
	h.Set(HeaderStandardSignature, strings.Join(sigs, " "))
	return h
}

func TestEd25519Keys(t *testing.T) {
	t.Parallel()

	t.Run("NewKeyIsASeedFromTheReader", func(t *testing.T) {
		t.Parallel()
		seed := bytes.Repeat([]byte{7}, ed25519.SeedSize)
		sk, err := NewEd25519Key(bytes.NewReader(seed))
		require.NoError(t, err)
		require.Equal(t, seedKey(7), sk)
		pk, err := Ed25519PublicKey(sk)
		require.NoError(t, err)
		require.True(t, strings.HasPrefix(pk, PublicKeyPrefix))
		raw, err := ParseEd25519PublicKey(pk)
		require.NoError(t, err)
		require.Equal(t, ed25519.NewKeyFromSeed(seed).Public(), raw)
	})

	t.Run("NewKeyDefaultsToCryptoRand", func(t *testing.T) {
		t.Parallel()
		a, err := NewEd25519Key(nil)
		require.NoError(t, err)
		b, err := NewEd25519Key(nil)
		require.NoError(t, err)
		require.NotEqual(t, a, b)
		_, err = Ed25519PrivateKey(a)
		require.NoError(t, err)
	})

	t.Run("ShortReaderFails", func(t *testing.T) {
		t.Parallel()
		_, err := NewEd25519Key(bytes.NewReader([]byte{1, 2, 3}))
		require.Error(t, err)
	})

	t.Run("SixtyFourByteFormSignsAsTheSeed", func(t *testing.T) {
		t.Parallel()
		key := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{1}, ed25519.SeedSize))
		long := SecretKeyPrefix + base64.StdEncoding.EncodeToString(key)
		a, err := SignEd25519(long, testID, testTimestamp, testBody)
		require.NoError(t, err)
		b, err := SignEd25519(testSecretKey, testID, testTimestamp, testBody)
		require.NoError(t, err)
		require.Equal(t, b, a)
		normal, err := NormalizeEd25519Key(long)
		require.NoError(t, err)
		require.Equal(t, testSecretKey, normal)
		normal, err = NormalizeEd25519Key(testSecretKey)
		require.NoError(t, err)
		require.Equal(t, testSecretKey, normal)
		pk, err := Ed25519PublicKey(long)
		require.NoError(t, err)
		require.Equal(t, testPublicKey, pk)
	})

	otherHalf := func() string {
		a := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{1}, ed25519.SeedSize))
		b := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{2}, ed25519.SeedSize))
		return SecretKeyPrefix + base64.StdEncoding.EncodeToString(append(a.Seed(), b[ed25519.SeedSize:]...))
	}()
	for _, tc := range []struct{ name, key, msg string }{
		{"NoPrefix", strings.TrimPrefix(testSecretKey, SecretKeyPrefix), "does not start with whsk_"},
		{"PublicKeyGiven", testPublicKey, "is a public key"},
		{"WhsecGiven", testSecret, "does not start with whsk_"},
		{"NotBase64", "whsk_!!!", "not whsk_ followed by base64"},
		{"Empty", "whsk_", "holds 0 bytes"},
		{"ThirtyOneBytes", SecretKeyPrefix + base64.StdEncoding.EncodeToString(make([]byte, 31)), "holds 31 bytes"},
		{"SixtyFourBytesOfAnotherPublicKey", otherHalf, "second half is not the public key"},
	} {
		t.Run("Refuses"+tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := Ed25519PrivateKey(tc.key)
			require.ErrorContains(t, err, tc.msg)
			_, err = SignEd25519(tc.key, testID, testTimestamp, testBody)
			require.ErrorContains(t, err, tc.msg)
			_, err = Ed25519PublicKey(tc.key)
			require.Error(t, err)
		})
	}

	for _, tc := range []struct{ name, key, msg string }{
		{"NoPrefix", strings.TrimPrefix(testPublicKey, PublicKeyPrefix), "does not start with whpk_"},
		{"PrivateKeyGiven", testSecretKey, "must not hold the private one"},
		{"NotBase64", "whpk_%%", "not whpk_ followed by base64"},
		{"SixtyFourBytes", PublicKeyPrefix + base64.StdEncoding.EncodeToString(make([]byte, 64)), "holds 64 bytes"},
	} {
		t.Run("RefusesPublic"+tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := ParseEd25519PublicKey(tc.key)
			require.ErrorContains(t, err, tc.msg)
		})
	}
}

func TestVerifyEd25519(t *testing.T) {
	t.Parallel()
	signedAt := time.Unix(testTimestamp, 0)
	valid, err := SignEd25519(testSecretKey, testID, testTimestamp, testBody)
	require.NoError(t, err)
	hmacValid, err := SignStandard(testSecret, testID, testTimestamp, testBody)
	require.NoError(t, err)
	withHeader := func(name, value string) http.Header {
		h := ed25519Headers(t, testID, testTimestamp, testBody, testSecretKey)
		if value == "" {
			h.Del(name)
		} else {
			h.Set(name, value)
		}
		return h
	}

	tests := []struct {
		name      string
		publicKey string
		headers   http.Header
		body      []byte
		now       time.Time
		tolerance time.Duration
		wantErr   error
		wantMsg   string
	}{
		{name: "Valid", headers: withHeader("", "")},
		{name: "TamperedBody", headers: withHeader("", ""), body: []byte(`{"order_id":"o_2"}`), wantErr: ErrNoMatchingSignature},
		{name: "EmptyBody", headers: withHeader("", ""), body: []byte{}, wantErr: ErrNoMatchingSignature},
		{name: "WrongKey", publicKey: testOtherPublicKey, headers: withHeader("", ""), wantErr: ErrNoMatchingSignature},
		{name: "SignedByAnotherKey", headers: ed25519Headers(t, testID, testTimestamp, testBody, testOtherSecretKey), wantErr: ErrNoMatchingSignature},
		{name: "OtherID", headers: withHeader(HeaderStandardID, "evt_test_2"), wantErr: ErrNoMatchingSignature},
		{name: "OtherTimestampSameSignature", headers: withHeader(HeaderStandardTimestamp, strconv.FormatInt(testTimestamp+1, 10)), wantErr: ErrNoMatchingSignature},
		{name: "TwoSignaturesDuringRotationNewFirst", headers: ed25519Headers(t, testID, testTimestamp, testBody, testOtherSecretKey, testSecretKey)},
		{name: "TwoSignaturesDuringRotationOldFirst", headers: ed25519Headers(t, testID, testTimestamp, testBody, testSecretKey, testOtherSecretKey)},
		{name: "OldAtTolerance", headers: withHeader("", ""), now: signedAt.Add(DefaultTolerance)},
		{name: "Expired", headers: withHeader("", ""), now: signedAt.Add(DefaultTolerance + time.Second), wantErr: ErrTimestampOutOfTolerance, wantMsg: "ago"},
		{name: "FutureAtTolerance", headers: withHeader("", ""), now: signedAt.Add(-DefaultTolerance)},
		{name: "Future", headers: withHeader("", ""), now: signedAt.Add(-DefaultTolerance - time.Second), wantErr: ErrTimestampOutOfTolerance, wantMsg: "future"},
		{name: "CustomTolerance", headers: withHeader("", ""), now: signedAt.Add(time.Hour), tolerance: 2 * time.Hour},
		{name: "MissingSignature", headers: withHeader(HeaderStandardSignature, ""), wantErr: ErrMissingHeaders, wantMsg: "webhook-signature"},
		{name: "HMACSignatureOnly", headers: withHeader(HeaderStandardSignature, hmacValid), wantErr: ErrNoMatchingSignature, wantMsg: "no ed25519 signature"},
		{name: "BesideHMACSignature", headers: withHeader(HeaderStandardSignature, hmacValid+" "+valid)},
		{name: "SignatureUnderV1", headers: withHeader(HeaderStandardSignature, "v1,"+strings.TrimPrefix(valid, "v1a,")), wantErr: ErrNoMatchingSignature, wantMsg: "no ed25519 signature"},
		{name: "UndecodableSignature", headers: withHeader(HeaderStandardSignature, "v1a,!!!"), wantErr: ErrNoMatchingSignature},
		{name: "TruncatedSignature", headers: withHeader(HeaderStandardSignature, valid[:len(valid)-8]), wantErr: ErrNoMatchingSignature},
		{name: "FlippedSignatureBit", headers: func() http.Header {
			sig, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(valid, "v1a,"))
			require.NoError(t, err)
			sig[10] ^= 1
			return withHeader(HeaderStandardSignature, "v1a,"+base64.StdEncoding.EncodeToString(sig))
		}(), wantErr: ErrNoMatchingSignature},
		{name: "PrivateKeyGivenAsPublic", publicKey: testSecretKey, headers: withHeader("", ""), wantErr: ErrInvalidSecret, wantMsg: "must not hold the private one"},
		{name: "MalformedPublicKey", publicKey: "whpk_AAAA", headers: withHeader("", ""), wantErr: ErrInvalidSecret},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			pk := tt.publicKey
			if pk == "" {
				pk = testPublicKey
			}
			body := tt.body
			if body == nil {
				body = testBody
			}
			now := tt.now
			if now.IsZero() {
				now = signedAt
			}
			err := VerifyEd25519(pk, tt.headers, body, now, tt.tolerance)
			if tt.wantErr == nil {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, tt.wantErr)
			require.Contains(t, err.Error(), tt.wantMsg)
		})
	}
}

func TestVerifierEd25519(t *testing.T) {
	t.Parallel()
	signedAt := time.Unix(testTimestamp, 0)
	at := func() time.Time { return signedAt }
	request := func(h http.Header) *http.Request {
		r := httptest.NewRequest(http.MethodPost, "/hooks", bytes.NewReader(testBody))
		r.Header = h
		return r
	}

	t.Run("RotationAcceptsOldAndNewKey", func(t *testing.T) {
		t.Parallel()
		v := &Verifier{Scheme: SchemeEd25519, PublicKeys: []string{testOtherPublicKey, testPublicKey}, Now: at}
		for name, signers := range map[string][]string{
			"Both":    {testOtherSecretKey, testSecretKey},
			"NewOnly": {testOtherSecretKey},
			"OldOnly": {testSecretKey},
		} {
			wh, err := v.Verify(request(ed25519Headers(t, testID, testTimestamp, testBody, signers...)))
			require.NoError(t, err, name)
			require.Equal(t, testID, wh.ID)
			require.Equal(t, testBody, wh.Body)
		}
		_, err := v.Verify(request(ed25519Headers(t, testID, testTimestamp, testBody, seedKey(3))))
		require.ErrorIs(t, err, ErrNoMatchingSignature)
	})

	t.Run("OneKeySeesBothSignaturesOfARotation", func(t *testing.T) {
		t.Parallel()
		h := ed25519Headers(t, testID, testTimestamp, testBody, testOtherSecretKey, testSecretKey)
		for _, pk := range []string{testPublicKey, testOtherPublicKey} {
			_, err := (&Verifier{Scheme: SchemeEd25519, PublicKeys: []string{pk}, Now: at}).Verify(request(h))
			require.NoError(t, err)
		}
	})

	t.Run("UsesNowAndTolerance", func(t *testing.T) {
		t.Parallel()
		h := ed25519Headers(t, testID, testTimestamp, testBody, testSecretKey)
		late := func() time.Time { return signedAt.Add(10 * time.Minute) }
		_, err := (&Verifier{Scheme: SchemeEd25519, PublicKeys: []string{testPublicKey}, Now: late}).Verify(request(h))
		require.ErrorIs(t, err, ErrTimestampOutOfTolerance)
		_, err = (&Verifier{Scheme: SchemeEd25519, PublicKeys: []string{testPublicKey}, Now: late, Tolerance: 15 * time.Minute}).Verify(request(h))
		require.NoError(t, err)
	})

	t.Run("Misconfigured", func(t *testing.T) {
		t.Parallel()
		h := ed25519Headers(t, testID, testTimestamp, testBody, testSecretKey)
		for _, tc := range []struct {
			name string
			v    Verifier
			want error
			msg  string
		}{
			{"NoPublicKey", Verifier{Scheme: SchemeEd25519}, ErrNoSecrets, "public keys"},
			{"SecretsForEd25519", Verifier{Scheme: SchemeEd25519, Secrets: []string{testSecret}, PublicKeys: []string{testPublicKey}}, ErrInvalidSecret, "not secrets"},
			{"PublicKeysForStandard", Verifier{PublicKeys: []string{testPublicKey}}, ErrInvalidSecret, "ed25519 only"},
			{"PrivateKey", Verifier{Scheme: SchemeEd25519, PublicKeys: []string{testPublicKey, testSecretKey}}, ErrInvalidSecret, "public key 2"},
		} {
			tc.v.Now = at
			_, err := tc.v.Verify(request(h))
			require.ErrorIs(t, err, tc.want, tc.name)
			require.ErrorContains(t, err, tc.msg, tc.name)
		}
	})

	t.Run("MiddlewareVerifiesAndAnswers500WhenMisconfigured", func(t *testing.T) {
		t.Parallel()
		handled := 0
		next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { handled++ })
		serve := func(v *Verifier, h http.Header) int {
			w := httptest.NewRecorder()
			Middleware(v, next).ServeHTTP(w, request(h))
			return w.Code
		}
		now := func() time.Time { return time.Unix(testTimestamp, 0) }
		good := &Verifier{Scheme: SchemeEd25519, PublicKeys: []string{testPublicKey}, Now: now}
		require.Equal(t, http.StatusOK, serve(good, ed25519Headers(t, testID, testTimestamp, testBody, testSecretKey)))
		require.Equal(t, http.StatusUnauthorized, serve(good, ed25519Headers(t, testID, testTimestamp, testBody, testOtherSecretKey)))
		wrongKind := &Verifier{Scheme: SchemeEd25519, PublicKeys: []string{testSecretKey}, Now: now}
		require.Equal(t, http.StatusInternalServerError, serve(wrongKind, ed25519Headers(t, testID, testTimestamp, testBody, testSecretKey)))
		require.Equal(t, 1, handled)
	})
}
