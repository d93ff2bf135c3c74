package verify

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
)

// SecretPrefix starts every secret Herald makes. It is not part of the key.
const SecretPrefix = "whsec_"

// StandardKey turns a Standard Webhooks secret into its HMAC key: the
// base64-decoded part after "whsec_" (the prefix is optional).
func StandardKey(secret string) ([]byte, error) {
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, SecretPrefix))
	if err != nil {
		return nil, fmt.Errorf("secret is not whsec_ followed by base64: %w", err)
	}
	return key, nil
}

// SignStandard returns the Standard Webhooks signature of body:
// "v1," + base64(HMAC-SHA256(key, "{id}.{timestamp}.{body}")).
func SignStandard(secret, id string, timestamp int64, body []byte) (string, error) {
	key, err := StandardKey(secret)
	if err != nil {
		return "", err
	}
	return "v1," + base64.StdEncoding.EncodeToString(standardMAC(key, id, timestamp, body)), nil
}

func standardMAC(key []byte, id string, timestamp int64, body []byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(id))
	m.Write([]byte{'.'})
	m.Write([]byte(strconv.FormatInt(timestamp, 10)))
	m.Write([]byte{'.'})
	m.Write(body)
	return m.Sum(nil)
}

// SignHMACSHA256 returns the hex-style signature of body:
// "sha256=" + hex(HMAC-SHA256(secret, "{timestamp}.{body}")), where the key is
// the whole secret string as UTF-8 bytes, as receivers written with
// hmac.new(secret.encode(), ...) or PHP's hash_hmac use it.
func SignHMACSHA256(secret string, timestamp int64, body []byte) string {
	return "sha256=" + hex.EncodeToString(hmacSHA256MAC(secret, timestamp, body))
}

func hmacSHA256MAC(secret string, timestamp int64, body []byte) []byte {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(strconv.FormatInt(timestamp, 10)))
	m.Write([]byte{'.'})
	m.Write(body)
	return m.Sum(nil)
}
