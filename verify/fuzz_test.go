package verify

import (
	"crypto/sha256"
	"encoding/base64"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// fuzzSigner signs and verifies one fuzzed key under one scheme.
type fuzzSigner struct {
	scheme Scheme
	secret string // what signs: a whsec_ secret, a hmac text secret or a whsk_ key
	verify Verifier
}

// newFuzzSigner makes a key of scheme from material: the key bytes of a
// standard secret, the text of an hmac-sha256 secret, or (hashed) the seed
// of an Ed25519 key.
func newFuzzSigner(t *testing.T, scheme Scheme, material []byte, now time.Time) *fuzzSigner {
	if len(material) == 0 {
		material = []byte{0}
	}
	s := &fuzzSigner{scheme: scheme, verify: Verifier{Scheme: scheme, Now: func() time.Time { return now }}}
	switch scheme {
	case SchemeStandard:
		s.secret = SecretPrefix + base64.StdEncoding.EncodeToString(material)
		s.verify.Secrets = []string{s.secret}
	case SchemeHMACSHA256:
		s.secret = string(material)
		s.verify.Secrets = []string{s.secret}
	case SchemeEd25519:
		seed := sha256.Sum256(material)
		s.secret = SecretKeyPrefix + base64.StdEncoding.EncodeToString(seed[:])
		public, err := Ed25519PublicKey(s.secret)
		if err != nil {
			t.Fatalf("public key of %s: %v", s.secret, err)
		}
		s.verify.PublicKeys = []string{public}
	}
	return s
}

// sign is the signature Herald sends for id, ts and body.
func (s *fuzzSigner) sign(t *testing.T, id string, ts int64, body []byte) string {
	var sig string
	var err error
	switch s.scheme {
	case SchemeStandard:
		sig, err = SignStandard(s.secret, id, ts, body)
	case SchemeHMACSHA256:
		sig = SignHMACSHA256(s.secret, ts, body)
	case SchemeEd25519:
		sig, err = SignEd25519(s.secret, id, ts, body)
	}
	if err != nil {
		t.Fatalf("sign with %s: %v", s.scheme, err)
	}
	return sig
}

// headers are the request headers of scheme.
func (s *fuzzSigner) headers(id, ts, sig string) http.Header {
	h := http.Header{}
	if s.scheme == SchemeHMACSHA256 {
		h[http.CanonicalHeaderKey(HeaderHMACID)] = []string{id}
		h[http.CanonicalHeaderKey(HeaderHMACTimestamp)] = []string{ts}
		h[http.CanonicalHeaderKey(HeaderHMACSignature)] = []string{sig}
		return h
	}
	h[http.CanonicalHeaderKey(HeaderStandardID)] = []string{id}
	h[http.CanonicalHeaderKey(HeaderStandardTimestamp)] = []string{ts}
	h[http.CanonicalHeaderKey(HeaderStandardSignature)] = []string{sig}
	return h
}

// verifyOne is the single-key function of the scheme.
func (s *fuzzSigner) verifyOne(h http.Header, body []byte, now time.Time) error {
	switch s.scheme {
	case SchemeStandard:
		return VerifyStandard(s.secret, h, body, now, 0)
	case SchemeHMACSHA256:
		return VerifyHMACSHA256(s.secret, h, body, now, 0)
	}
	return VerifyEd25519(s.verify.PublicKeys[0], h, body, now, 0)
}

// FuzzVerify checks every scheme: verifying never panics, and a request is
// accepted only when its signature header holds, as one of its entries, the
// signature Sign makes with that key over that id (where the scheme signs
// it), timestamp and body: the same bytes, in the spellings the decoders
// take (hex of either case, as TestVerifyHMACSHA256/UppercaseHex wants). The fuzzer chooses the key, the
// request and how the signature header is made: any text, the valid
// signature with one byte changed, the valid one among others, a signature
// of another body or by another key, or any timestamp header.
func FuzzVerify(f *testing.F) {
	const ts = int64(1767225600)
	body := []byte(`{"order_id":"o_1"}`)
	for scheme := range uint8(3) {
		f.Add(scheme, []byte("0123456789abcdef01234567"), "evt_1", ts, body, uint8(0), "v1,abc sha256=00 v1a,AAAA", uint16(0), byte(0))
		for _, pos := range []uint16{0, 9, 40} {
			f.Add(scheme, []byte("0123456789abcdef01234567"), "evt_1", ts, body, uint8(1), "", pos, byte('x'))
		}
		for mode := range uint8(6) {
			f.Add(scheme, []byte("key"), "evt_2", ts, []byte{}, mode, "x", uint16(7), byte('0'))
		}
	}
	f.Add(uint8(0), []byte{}, "", int64(-1), []byte(nil), uint8(5), "01767225600", uint16(0), byte(0))
	f.Add(uint8(1), []byte("k"), "id", ts, body, uint8(5), "+1767225600", uint16(0), byte(0))

	schemes := []Scheme{SchemeStandard, SchemeHMACSHA256, SchemeEd25519}
	f.Fuzz(func(t *testing.T, schemeN uint8, material []byte, id string, ts int64, body []byte, mode uint8, extra string, pos uint16, b byte) {
		now := time.Unix(ts, 0)
		s := newFuzzSigner(t, schemes[int(schemeN)%len(schemes)], material, now)
		valid := s.sign(t, id, ts, body)
		tsHeader := strconv.FormatInt(ts, 10)
		sigHeader := valid
		switch mode % 6 {
		case 0: // any text
			sigHeader = extra
		case 1: // the valid signature with one byte changed
			i := int(pos) % len(valid)
			sigHeader = valid[:i] + string([]byte{b}) + valid[i+1:]
		case 2: // the valid signature among others
			sigHeader = extra + " " + valid
		case 3: // a signature of another body
			sigHeader = s.sign(t, id, ts, append(append([]byte{}, body...), extra...))
		case 4: // a signature by another key
			other := newFuzzSigner(t, s.scheme, append(append([]byte{}, material...), extra+"x"...), now)
			sigHeader = other.sign(t, id, ts, body)
		case 5: // any timestamp header
			tsHeader = extra
		}
		h := s.headers(id, tsHeader, sigHeader)

		wh, err := s.verify.VerifyPayload(h, body)
		if errOne := s.verifyOne(h, body, now); (errOne == nil) != (err == nil) {
			t.Fatalf("Verifier says %v, the %s function says %v", err, s.scheme, errOne)
		}
		if err != nil {
			return
		}
		signedAt, perr := strconv.ParseInt(tsHeader, 10, 64)
		if perr != nil || strconv.FormatInt(signedAt, 10) != tsHeader {
			t.Fatalf("accepted timestamp header %q, which no signer writes", tsHeader)
		}
		want := s.sign(t, id, signedAt, body)
		found := false
		for _, entry := range strings.Fields(sigHeader) {
			found = found || sameSignature(s.scheme, entry, want)
		}
		if !found {
			t.Fatalf("%s accepted signature header %q; the signature of this request is %q", s.scheme, sigHeader, want)
		}
		if wh.ID != id || string(wh.Body) != string(body) || wh.Timestamp.Unix() != signedAt {
			t.Fatalf("accepted webhook %+v differs from the request", wh)
		}
	})
}

// sameSignature reports whether a signature header entry carries the bytes
// of want, the signature Sign wrote: hex compared without regard to case,
// base64 by the bytes it decodes to.
func sameSignature(scheme Scheme, entry, want string) bool {
	if scheme == SchemeHMACSHA256 {
		return strings.EqualFold(entry, want) && strings.HasPrefix(entry, "sha256=")
	}
	version := want[:strings.IndexByte(want, ',')+1]
	encoded, ok := strings.CutPrefix(entry, version)
	if !ok {
		return false
	}
	got, err := base64.StdEncoding.DecodeString(encoded)
	if err != nil {
		return false
	}
	wanted, err := base64.StdEncoding.DecodeString(want[len(version):])
	return err == nil && string(got) == string(wanted)
}
