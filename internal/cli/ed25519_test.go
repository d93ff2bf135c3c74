package cli_test

import (
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhooks/herald/verify"
)

// Two ed25519 key pairs from fixed seeds.
const (
	edSecretA = "whsk_AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="
	edPublicA = "whpk_A6EHv/POEL4dcN0Y50vAmWfk1jCbpQ1fHdyGZBJVMbg="
	edSecretB = "whsk_nWGxne/9WmC6hEr0kuwsxERJxWl7MmkZcDusAxyuf2A="
	edPublicB = "whpk_11qYAYKxCrfVS/7TyWQHOg7hcvPapiMlrwIaaPcHURo="
)

// ed25519Headers signs body as Herald does for an ed25519 endpoint, with
// each of secretKeys (two during a rotation).
func ed25519Headers(t *testing.T, id, eventType string, body []byte, secretKeys ...string) http.Header {
	t.Helper()
	ts := time.Now().Unix()
	var sigs []string
	for _, k := range secretKeys {
		sig, err := verify.SignEd25519(k, id, ts, body)
		require.NoError(t, err)
		sigs = append(sigs, sig)
	}
	h := http.Header{}
	h.Set("webhook-id", id)
	h.Set("webhook-timestamp", strconv.FormatInt(ts, 10))
	h.Set("webhook-signature", strings.Join(sigs, " "))
	h.Set("X-Webhook-Event", eventType)
	return h
}

func TestEndpointsEd25519(t *testing.T) {
	t.Parallel()
	publicKeyRE := regexp.MustCompile(`^whpk_[A-Za-z0-9+/]{43}=$`)

	t.Run("CreateShowsThePublicKeyOnly", func(t *testing.T) {
		t.Parallel()
		e := setupAPI(t)
		out := e.run("endpoints", "create", "--url", "https://example.com/hooks", "--signature-scheme", "ed25519")
		require.Equal(t, "ed25519", field(t, out, "signature scheme"))
		require.Regexp(t, publicKeyRE, field(t, out, "public key"))
		require.NotContains(t, out, "secret:")
		require.NotContains(t, out, "whsk_")

		var got struct {
			Secret    *string `json:"secret"`
			PublicKey string  `json:"public_key"`
		}
		e.runJSON(&got, "endpoints", "get", field(t, out, "id"))
		require.Nil(t, got.Secret)
		require.Equal(t, field(t, out, "public key"), got.PublicKey)
	})

	t.Run("RotateShowsTheNewAndThePreviousPublicKey", func(t *testing.T) {
		t.Parallel()
		e := setupAPI(t)
		id := e.createEndpoint("--signature-scheme", "ed25519")
		before := field(t, e.run("endpoints", "get", id), "public key")

		out := e.run("endpoints", "rotate-secret", id)
		require.Regexp(t, publicKeyRE, field(t, out, "public key"))
		require.NotEqual(t, before, field(t, out, "public key"))
		require.Equal(t, before, field(t, out, "previous public key"))
		require.NotEqual(t, "-", field(t, out, "previous key signs until"))
		require.NotContains(t, out, "whsk_")

		got := e.run("endpoints", "get", id)
		require.Equal(t, field(t, out, "public key"), field(t, got, "public key"))
		require.Equal(t, before, field(t, got, "previous public key"))
	})

	t.Run("OtherSchemesStillShowTheirSecret", func(t *testing.T) {
		t.Parallel()
		e := setupAPI(t)
		out := e.run("endpoints", "create", "--url", "https://example.com/hooks")
		require.Regexp(t, `^whsec_`, field(t, out, "secret"))
		require.NotContains(t, out, "public key")
	})
}

func TestListenEd25519(t *testing.T) {
	t.Parallel()
	body := []byte(`{"order_id":"o_1"}`)

	t.Run("PublicKeyVerifies", func(t *testing.T) {
		t.Parallel()
		l := startListen(t, nil, "--addr", "127.0.0.1:0", "--public-key", edPublicA)
		l.post("/hooks", body, ed25519Headers(t, "evt_1", "order.created", body, edSecretA))
		require.Regexp(t, lineRE("order.created", "evt_1", "valid", len(body)), l.next())

		l.post("/hooks", body, ed25519Headers(t, "evt_2", "order.created", body, edSecretB))
		require.Regexp(t, lineRE("order.created", "evt_2", `INVALID \(no matching webhook signature\)`, len(body)), l.next())

		tampered := []byte(`{"order_id":"o_2"}`)
		l.post("/hooks", tampered, ed25519Headers(t, "evt_3", "order.created", body, edSecretA))
		require.Regexp(t, lineRE("order.created", "evt_3", `INVALID \(no matching webhook signature\)`, len(body)), l.next())

		// An HMAC-signed webhook carries no v1a signature.
		l.post("/hooks", body, standardHeaders(t, secretA, "evt_4", "order.created", body))
		require.Regexp(t, lineRE("order.created", "evt_4", `INVALID \(no matching webhook signature: no ed25519 signature in webhook-signature\)`, len(body)), l.next())
	})

	t.Run("TwoPublicKeysDuringARotation", func(t *testing.T) {
		t.Parallel()
		l := startListen(t, nil, "--addr", "127.0.0.1:0", "--scheme", "ed25519", "--public-key", edPublicB, "--public-key", edPublicA)
		l.post("/", body, ed25519Headers(t, "evt_1", "a.b", body, edSecretB, edSecretA))
		require.Regexp(t, lineRE("a.b", "evt_1", "valid", len(body)), l.next())
		l.post("/", body, ed25519Headers(t, "evt_2", "a.b", body, edSecretA))
		require.Regexp(t, lineRE("a.b", "evt_2", "valid", len(body)), l.next())
	})

	t.Run("PublicKeyFromItsTwin", func(t *testing.T) {
		t.Parallel()
		l := startListen(t, map[string]string{"HERALD_PUBLIC_KEY": edPublicA}, "--addr", "127.0.0.1:0")
		l.post("/", body, ed25519Headers(t, "evt_1", "a.b", body, edSecretA))
		require.Regexp(t, lineRE("a.b", "evt_1", "valid", len(body)), l.next())
	})

	t.Run("RejectsBadFlags", func(t *testing.T) {
		t.Parallel()
		for _, tc := range []struct {
			name string
			args []string
			want string
		}{
			{"PrivateKeyAsPublicKey", []string{"--public-key", edSecretA}, "--public-key 1: the key is a private key"},
			{"NotAKey", []string{"--public-key", "whpk_AAAA"}, "--public-key 1"},
			{"PublicKeyWithAnHMACScheme", []string{"--scheme", "hmac-sha256", "--public-key", edPublicA}, "not --scheme hmac-sha256"},
			{"SecretForEd25519", []string{"--scheme", "ed25519", "--secret", secretA}, "--secret does not verify ed25519 webhooks"},
			{"SecretBesidePublicKey", []string{"--secret", secretA, "--public-key", edPublicA}, "--secret does not verify ed25519 webhooks"},
		} {
			_, _, err := run(t, nil, append([]string{"listen", "--addr", "127.0.0.1:0"}, tc.args...)...)
			require.ErrorContains(t, err, tc.want, tc.name)
			require.NotContains(t, err.Error(), edSecretA, "%s: a key never appears in an error", tc.name)
		}
	})
}
