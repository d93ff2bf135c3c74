package verify

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// vector is one entry of testdata/vectors.json.
type vector struct {
	Name      string `json:"name"`
	Scheme    Scheme `json:"scheme"`
	Secret    string `json:"secret"`
	ID        string `json:"id"`
	Timestamp int64  `json:"timestamp"`
	Body      string `json:"body"`
	Signature string `json:"signature"`
}

func loadVectors(t *testing.T) []vector {
	t.Helper()
	raw, err := os.ReadFile("testdata/vectors.json")
	require.NoError(t, err)
	var file struct {
		Vectors []vector `json:"vectors"`
	}
	require.NoError(t, json.Unmarshal(raw, &file))
	require.NotEmpty(t, file.Vectors)
	return file.Vectors
}

// vectorHeaders returns the headers a sender puts on the vector's request.
func vectorHeaders(v vector) http.Header {
	h := http.Header{}
	ts := strconv.FormatInt(v.Timestamp, 10)
	if v.Scheme == SchemeStandard {
		h.Set(HeaderStandardID, v.ID)
		h.Set(HeaderStandardTimestamp, ts)
		h.Set(HeaderStandardSignature, v.Signature)
	} else {
		h.Set(HeaderHMACID, v.ID)
		h.Set(HeaderHMACTimestamp, ts)
		h.Set(HeaderHMACSignature, v.Signature)
	}
	return h
}

func TestVectors(t *testing.T) {
	t.Parallel()
	for _, v := range loadVectors(t) {
		t.Run(v.Name, func(t *testing.T) {
			t.Parallel()
			body := []byte(v.Body)
			signedAt := time.Unix(v.Timestamp, 0)
			verifyFunc := VerifyStandard
			switch v.Scheme {
			case SchemeStandard:
				got, err := SignStandard(v.Secret, v.ID, v.Timestamp, body)
				require.NoError(t, err)
				require.Equal(t, v.Signature, got)
			case SchemeHMACSHA256:
				require.Equal(t, v.Signature, SignHMACSHA256(v.Secret, v.Timestamp, body))
				verifyFunc = VerifyHMACSHA256
			default:
				t.Fatalf("vector %s: unknown scheme %q", v.Name, v.Scheme)
			}

			require.NoError(t, verifyFunc(v.Secret, vectorHeaders(v), body, signedAt.Add(time.Minute), 0))

			tampered := append(bytes.Clone(body), ' ')
			require.ErrorIs(t, verifyFunc(v.Secret, vectorHeaders(v), tampered, signedAt, 0), ErrNoMatchingSignature)

			verifier := &Verifier{Secrets: []string{v.Secret}, Scheme: v.Scheme, Now: func() time.Time { return signedAt }}
			r := httptest.NewRequest(http.MethodPost, "/hooks", bytes.NewReader(body))
			r.Header = vectorHeaders(v)
			wh, err := verifier.Verify(r)
			require.NoError(t, err)
			require.Equal(t, v.ID, wh.ID)
			require.Equal(t, signedAt, wh.Timestamp)
			require.Equal(t, body, wh.Body)
			restored, err := io.ReadAll(r.Body)
			require.NoError(t, err)
			require.Equal(t, body, restored)
		})
	}
}
