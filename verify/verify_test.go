package verify

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

const (
	testSecret      = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	testOtherSecret = "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD"
	testID          = "evt_test_1"
	testTimestamp   = int64(1767225600)
)

var testBody = []byte(`{"order_id":"o_1"}`)

// standardHeaders returns the headers of a request to testBody signed with
// each of secrets, as Herald sends them (several during a rotation).
func standardHeaders(t *testing.T, id string, ts int64, body []byte, secrets ...string) http.Header {
	t.Helper()
	var sigs []string
	for _, s := range secrets {
		sig, err := SignStandard(s, id, ts, body)
		require.NoError(t, err)
		sigs = append(sigs, sig)
	}
	h := http.Header{}
	h.Set(HeaderStandardID, id)
	h.Set(HeaderStandardTimestamp, strconv.FormatInt(ts, 10))
	h.Set(HeaderStandardSignature, strings.Join(sigs, " "))
	return h
}

func hmacHeaders(id string, ts int64, body []byte, secrets ...string) http.Header {
	var sigs []string
	for _, s := range secrets {
		sigs = append(sigs, SignHMACSHA256(s, ts, body))
	}
	h := http.Header{}
	h.Set(HeaderHMACID, id)
	h.Set(HeaderHMACTimestamp, strconv.FormatInt(ts, 10))
	h.Set(HeaderHMACSignature, strings.Join(sigs, " "))
	return h
}

func TestVerifyStandard(t *testing.T) {
	t.Parallel()
	signedAt := time.Unix(testTimestamp, 0)
	valid, err := SignStandard(testSecret, testID, testTimestamp, testBody)
	require.NoError(t, err)
	withHeader := func(name, value string) http.Header {
		h := standardHeaders(t, testID, testTimestamp, testBody, testSecret)
		if value == "" {
			h.Del(name)
		} else {
			h.Set(name, value)
		}
		return h
	}

	tests := []struct {
		name      string
		secret    string
		headers   http.Header
		body      []byte
		now       time.Time
		tolerance time.Duration
		wantErr   error
		wantMsg   string
	}{
		{name: "Valid", headers: withHeader("", "")},
		{name: "SecretWithoutPrefix", secret: strings.TrimPrefix(testSecret, SecretPrefix), headers: withHeader("", "")},
		{name: "HeaderNamesAnyCase", headers: http.Header{
			"Webhook-Id": {testID}, "Webhook-Timestamp": {strconv.FormatInt(testTimestamp, 10)}, "Webhook-Signature": {valid},
		}},
		{name: "TamperedBody", headers: withHeader("", ""), body: []byte(`{"order_id":"o_2"}`), wantErr: ErrNoMatchingSignature},
		{name: "EmptyBody", headers: withHeader("", ""), body: []byte{}, wantErr: ErrNoMatchingSignature},
		{name: "WrongSecret", secret: testOtherSecret, headers: withHeader("", ""), wantErr: ErrNoMatchingSignature},
		{name: "OtherID", headers: withHeader(HeaderStandardID, "evt_test_2"), wantErr: ErrNoMatchingSignature},
		{name: "OtherTimestampSameSignature", headers: withHeader(HeaderStandardTimestamp, strconv.FormatInt(testTimestamp+1, 10)), wantErr: ErrNoMatchingSignature},
		{name: "OldAtTolerance", headers: withHeader("", ""), now: signedAt.Add(DefaultTolerance)},
		{name: "Expired", headers: withHeader("", ""), now: signedAt.Add(DefaultTolerance + time.Second), wantErr: ErrTimestampOutOfTolerance, wantMsg: "ago"},
		{name: "FutureAtTolerance", headers: withHeader("", ""), now: signedAt.Add(-DefaultTolerance)},
		{name: "Future", headers: withHeader("", ""), now: signedAt.Add(-DefaultTolerance - time.Second), wantErr: ErrTimestampOutOfTolerance, wantMsg: "future"},
		{name: "CustomTolerance", headers: withHeader("", ""), now: signedAt.Add(time.Hour), tolerance: 2 * time.Hour},
		{name: "CustomToleranceExceeded", headers: withHeader("", ""), now: signedAt.Add(time.Minute), tolerance: 30 * time.Second, wantErr: ErrTimestampOutOfTolerance},
		{name: "ZeroNowIsWallClock", headers: withHeader("", ""), now: time.Time{}, wantErr: ErrTimestampOutOfTolerance},
		{name: "MissingID", headers: withHeader(HeaderStandardID, ""), wantErr: ErrMissingHeaders, wantMsg: "webhook-id"},
		{name: "MissingTimestamp", headers: withHeader(HeaderStandardTimestamp, ""), wantErr: ErrMissingHeaders, wantMsg: "webhook-timestamp"},
		{name: "MissingSignature", headers: withHeader(HeaderStandardSignature, ""), wantErr: ErrMissingHeaders, wantMsg: "webhook-signature"},
		{name: "MissingAll", headers: http.Header{}, wantErr: ErrMissingHeaders, wantMsg: "webhook-id, webhook-timestamp, webhook-signature"},
		{name: "HMACHeadersOnly", headers: hmacHeaders(testID, testTimestamp, testBody, testSecret), wantErr: ErrMissingHeaders},
		{name: "TimestampNotANumber", headers: withHeader(HeaderStandardTimestamp, "yesterday"), wantErr: ErrInvalidTimestamp},
		{name: "TimestampWithPlus", headers: withHeader(HeaderStandardTimestamp, "+"+strconv.FormatInt(testTimestamp, 10)), wantErr: ErrInvalidTimestamp},
		{name: "TimestampWithLeadingZero", headers: withHeader(HeaderStandardTimestamp, "0"+strconv.FormatInt(testTimestamp, 10)), wantErr: ErrInvalidTimestamp},
		{name: "TimestampNegative", headers: withHeader(HeaderStandardTimestamp, "-1"), wantErr: ErrInvalidTimestamp},
		{name: "TimestampMilliseconds", headers: withHeader(HeaderStandardTimestamp, strconv.FormatInt(testTimestamp*1000, 10)), wantErr: ErrTimestampOutOfTolerance},
		{name: "TimestampOverflow", headers: withHeader(HeaderStandardTimestamp, "99999999999999999999"), wantErr: ErrInvalidTimestamp},
		{name: "SeveralSignaturesLastValid", headers: withHeader(HeaderStandardSignature, "v1,AAAA v1,bm90IGEgc2lnbmF0dXJl "+valid)},
		{name: "SeveralSignaturesFirstValid", headers: withHeader(HeaderStandardSignature, valid+" v1,AAAA")},
		{name: "ExtraSpaces", headers: withHeader(HeaderStandardSignature, "  v1,AAAA   "+valid+"  ")},
		{name: "OtherVersionsIgnored", headers: withHeader(HeaderStandardSignature, "v1a,bm90IGEgc2lnbmF0dXJl v2,xyz "+valid)},
		{name: "ValidMACUnderOtherVersion", headers: withHeader(HeaderStandardSignature, "v2"+strings.TrimPrefix(valid, "v1")), wantErr: ErrNoMatchingSignature, wantMsg: "no standard signature"},
		{name: "UndecodableSignature", headers: withHeader(HeaderStandardSignature, "v1,!!!not-base64"), wantErr: ErrNoMatchingSignature},
		{name: "SignatureWithoutVersion", headers: withHeader(HeaderStandardSignature, strings.TrimPrefix(valid, "v1,")), wantErr: ErrNoMatchingSignature},
		{name: "TruncatedSignature", headers: withHeader(HeaderStandardSignature, valid[:len(valid)-8]), wantErr: ErrNoMatchingSignature},
		{name: "InvalidSecret", secret: "whsec_not base64!", headers: withHeader("", ""), wantErr: ErrInvalidSecret},
		{name: "EmptySecret", secret: "whsec_", headers: withHeader("", ""), wantErr: ErrInvalidSecret},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			secret := tt.secret
			if secret == "" {
				secret = testSecret
			}
			body := tt.body
			if body == nil {
				body = testBody
			}
			now := tt.now
			if now.IsZero() && tt.name != "ZeroNowIsWallClock" {
				now = signedAt
			}
			err := VerifyStandard(secret, tt.headers, body, now, tt.tolerance)
			if tt.wantErr == nil {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, tt.wantErr)
			require.Contains(t, err.Error(), tt.wantMsg)
		})
	}
}

func TestVerifyHMACSHA256(t *testing.T) {
	t.Parallel()
	const secret = "a plain secret"
	signedAt := time.Unix(testTimestamp, 0)
	valid := SignHMACSHA256(secret, testTimestamp, testBody)
	withSignature := func(sig string) http.Header {
		h := hmacHeaders(testID, testTimestamp, testBody, secret)
		h.Set(HeaderHMACSignature, sig)
		return h
	}

	tests := []struct {
		name    string
		secret  string
		headers http.Header
		body    []byte
		now     time.Time
		wantErr error
	}{
		{name: "Valid", headers: hmacHeaders(testID, testTimestamp, testBody, secret)},
		{name: "UppercaseHex", headers: withSignature("sha256=" + strings.ToUpper(strings.TrimPrefix(valid, "sha256=")))},
		{name: "SeveralSignaturesOneValid", headers: withSignature("sha256=00ff sha1=abcd " + valid)},
		{name: "IDNotSigned", headers: func() http.Header {
			h := hmacHeaders(testID, testTimestamp, testBody, secret)
			h.Set(HeaderHMACID, "evt_other")
			return h
		}()},
		{name: "TamperedBody", headers: hmacHeaders(testID, testTimestamp, testBody, secret), body: []byte(`{}`), wantErr: ErrNoMatchingSignature},
		{name: "WrongSecret", secret: "another secret", headers: hmacHeaders(testID, testTimestamp, testBody, secret), wantErr: ErrNoMatchingSignature},
		{name: "PrefixIsPartOfKey", secret: "whsec_" + secret, headers: hmacHeaders(testID, testTimestamp, testBody, secret), wantErr: ErrNoMatchingSignature},
		{name: "WhsecSecretUsedWhole", secret: testSecret, headers: hmacHeaders(testID, testTimestamp, testBody, testSecret)},
		{name: "OtherTimestamp", headers: func() http.Header {
			h := hmacHeaders(testID, testTimestamp, testBody, secret)
			h.Set(HeaderHMACTimestamp, strconv.FormatInt(testTimestamp-60, 10))
			return h
		}(), wantErr: ErrNoMatchingSignature},
		{name: "Expired", headers: hmacHeaders(testID, testTimestamp, testBody, secret), now: signedAt.Add(10 * time.Minute), wantErr: ErrTimestampOutOfTolerance},
		{name: "Future", headers: hmacHeaders(testID, testTimestamp, testBody, secret), now: signedAt.Add(-10 * time.Minute), wantErr: ErrTimestampOutOfTolerance},
		{name: "NoPrefix", headers: withSignature(strings.TrimPrefix(valid, "sha256=")), wantErr: ErrNoMatchingSignature},
		{name: "NotHex", headers: withSignature("sha256=zz"), wantErr: ErrNoMatchingSignature},
		{name: "MissingID", headers: func() http.Header {
			h := hmacHeaders(testID, testTimestamp, testBody, secret)
			h.Del(HeaderHMACID)
			return h
		}(), wantErr: ErrMissingHeaders},
		{name: "StandardHeadersOnly", headers: standardHeaders(t, testID, testTimestamp, testBody, testSecret), wantErr: ErrMissingHeaders},
		{name: "EmptySecret", secret: "-", headers: hmacHeaders(testID, testTimestamp, testBody, secret), wantErr: ErrInvalidSecret},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := tt.secret
			switch s {
			case "":
				s = secret
			case "-":
				s = ""
			}
			body := tt.body
			if body == nil {
				body = testBody
			}
			now := tt.now
			if now.IsZero() {
				now = signedAt
			}
			err := VerifyHMACSHA256(s, tt.headers, body, now, 0)
			if tt.wantErr == nil {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, tt.wantErr)
		})
	}
}

func TestVerifier(t *testing.T) {
	t.Parallel()
	signedAt := time.Unix(testTimestamp, 0)
	at := func() time.Time { return signedAt }
	request := func(h http.Header, body []byte) *http.Request {
		r := httptest.NewRequest(http.MethodPost, "/hooks", bytes.NewReader(body))
		r.Header = h
		return r
	}

	t.Run("ReturnsWebhookAndRestoresBody", func(t *testing.T) {
		t.Parallel()
		h := standardHeaders(t, testID, testTimestamp, testBody, testSecret)
		h.Set(HeaderEvent, "order.created")
		r := request(h, testBody)
		wh, err := (&Verifier{Secrets: []string{testSecret}, Now: at}).Verify(r)
		require.NoError(t, err)
		require.Equal(t, &Webhook{ID: testID, Timestamp: signedAt, EventType: "order.created", Body: testBody}, wh)
		again, err := io.ReadAll(r.Body)
		require.NoError(t, err)
		require.Equal(t, testBody, again)
	})

	t.Run("RotationAcceptsOldAndNewSecret", func(t *testing.T) {
		t.Parallel()
		v := &Verifier{Secrets: []string{testOtherSecret, testSecret}, Now: at}
		for name, signers := range map[string][]string{
			"Both":     {testOtherSecret, testSecret},
			"NewOnly":  {testOtherSecret},
			"OldOnly":  {testSecret},
			"OldFirst": {testSecret, testOtherSecret},
		} {
			_, err := v.Verify(request(standardHeaders(t, testID, testTimestamp, testBody, signers...), testBody))
			require.NoError(t, err, name)
		}
		third := "whsec_" + strings.Repeat("A", 32)
		_, err := v.Verify(request(standardHeaders(t, testID, testTimestamp, testBody, third), testBody))
		require.ErrorIs(t, err, ErrNoMatchingSignature)
	})

	t.Run("RotationHMACSHA256", func(t *testing.T) {
		t.Parallel()
		v := &Verifier{Secrets: []string{"new", "old"}, Scheme: SchemeHMACSHA256, Now: at}
		_, err := v.Verify(request(hmacHeaders(testID, testTimestamp, testBody, "old"), testBody))
		require.NoError(t, err)
		_, err = v.Verify(request(hmacHeaders(testID, testTimestamp, testBody, "new", "old"), testBody))
		require.NoError(t, err)
		_, err = v.Verify(request(hmacHeaders(testID, testTimestamp, testBody, "older"), testBody))
		require.ErrorIs(t, err, ErrNoMatchingSignature)
	})

	t.Run("UsesNowAndTolerance", func(t *testing.T) {
		t.Parallel()
		h := standardHeaders(t, testID, testTimestamp, testBody, testSecret)
		late := func() time.Time { return signedAt.Add(10 * time.Minute) }
		_, err := (&Verifier{Secrets: []string{testSecret}, Now: late}).Verify(request(h, testBody))
		require.ErrorIs(t, err, ErrTimestampOutOfTolerance)
		_, err = (&Verifier{Secrets: []string{testSecret}, Now: late, Tolerance: 15 * time.Minute}).Verify(request(h, testBody))
		require.NoError(t, err)
	})

	t.Run("BodyTooLarge", func(t *testing.T) {
		t.Parallel()
		h := standardHeaders(t, testID, testTimestamp, testBody, testSecret)
		v := &Verifier{Secrets: []string{testSecret}, Now: at, MaxBodyBytes: int64(len(testBody)) - 1}
		_, err := v.Verify(request(h, testBody))
		require.ErrorIs(t, err, ErrBodyTooLarge)
		v.MaxBodyBytes = int64(len(testBody))
		_, err = v.Verify(request(h, testBody))
		require.NoError(t, err)
	})

	t.Run("Misconfigured", func(t *testing.T) {
		t.Parallel()
		h := standardHeaders(t, testID, testTimestamp, testBody, testSecret)
		_, err := (&Verifier{Now: at}).Verify(request(h, testBody))
		require.ErrorIs(t, err, ErrNoSecrets)
		_, err = (&Verifier{Secrets: []string{testSecret}, Scheme: "ed448", Now: at}).Verify(request(h, testBody))
		require.ErrorIs(t, err, ErrUnknownScheme)
		_, err = (&Verifier{Secrets: []string{testSecret, "whsec_%%%"}, Now: at}).Verify(request(h, testBody))
		require.ErrorIs(t, err, ErrInvalidSecret)
	})

	t.Run("VerifyPayload", func(t *testing.T) {
		t.Parallel()
		h := hmacHeaders(testID, testTimestamp, testBody, "s")
		wh, err := (&Verifier{Secrets: []string{"s"}, Scheme: SchemeHMACSHA256, Now: at}).VerifyPayload(h, testBody)
		require.NoError(t, err)
		require.Equal(t, testID, wh.ID)
		require.Empty(t, wh.EventType)
	})
}
