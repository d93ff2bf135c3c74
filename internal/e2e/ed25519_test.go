package e2e

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhooks/herald/verify"
)

// edEndpointJSON is what an ed25519 endpoint's answer says of its keys.
type edEndpointJSON struct {
	ID                string  `json:"id"`
	Secret            *string `json:"secret"`
	PublicKey         *string `json:"public_key"`
	PreviousPublicKey *string `json:"previous_public_key"`
}

// edCall makes an API call about an ed25519 endpoint that must answer
// want, requires that the answer shows no private key, and decodes it.
func (e *env) edCall(want int, method, path string, body any) edEndpointJSON {
	e.t.Helper()
	var raw json.RawMessage
	e.must(want, method, path, body, &raw)
	require.NotContains(e.t, string(raw), verify.SecretKeyPrefix, "an answer never shows a private key")
	var out edEndpointJSON
	require.NoError(e.t, json.Unmarshal(raw, &out))
	return out
}

// TestEd25519DeliveriesVerifyWithThePublicKey: an ed25519 endpoint's
// webhooks carry v1a signatures that a receiver holding only the public
// key from the API verifies with the verify package, across a key
// rotation: both keys sign for 24 hours, then only the new one.
func TestEd25519DeliveriesVerifyWithThePublicKey(t *testing.T) {
	t.Parallel()
	backends(t, func(t *testing.T, db string) {
		e := setup(t, db)
		rc := newReceiver(t, e.clock, nil)
		ep := e.edCall(http.StatusCreated, "POST", "/v1/endpoints", map[string]any{
			"consumer_id": "c1", "url": rc.URL + "/hooks", "signature_scheme": "ed25519",
		})
		require.Nil(t, ep.Secret)
		require.NotNil(t, ep.PublicKey)
		oldKey := *ep.PublicKey
		verifier := func(publicKeys ...string) *verify.Verifier {
			return &verify.Verifier{Scheme: verify.SchemeEd25519, PublicKeys: publicKeys, Now: e.clock.Now}
		}
		// signatures returns the v1a signatures of the n-th request, after
		// checking the headers it shares with the standard scheme.
		signatures := func(n int, eventID, payload string) (hit, []string) {
			t.Helper()
			rc.waitHits(t, n)
			h := rc.all()[n-1]
			require.Equal(t, payload, string(h.Body), "the body is the exact accepted bytes")
			require.Equal(t, eventID, h.Headers.Get("webhook-id"))
			require.NotEmpty(t, h.Headers.Get("webhook-timestamp"))
			require.Empty(t, h.Headers.Get("X-Webhook-Signature"))
			sigs := strings.Fields(h.Headers.Get("webhook-signature"))
			for _, s := range sigs {
				require.True(t, strings.HasPrefix(s, "v1a,"), s)
			}
			return h, sigs
		}

		payload := `{"order_id":"o_1","note":"ünïcødé ✓", "n": [1, 2 ,3]}`
		ev := e.send("c1", "order.created", payload)
		h, sigs := signatures(1, ev.ID, payload)
		require.Len(t, sigs, 1)
		wh, err := verifier(oldKey).VerifyPayload(h.Headers, h.Body)
		require.NoError(t, err)
		require.Equal(t, ev.ID, wh.ID)
		require.Equal(t, "order.created", wh.EventType)
		tampered := []byte(strings.Replace(payload, "o_1", "o_2", 1))
		_, err = verifier(oldKey).VerifyPayload(h.Headers, tampered)
		require.ErrorIs(t, err, verify.ErrNoMatchingSignature)

		// Rotation: a new key pair; the old private key signs beside it.
		// Each jump of the clock waits for the last outcome to be written:
		// the receiver records a request before it answers, and a lease
		// that the jump outlived would send that webhook again.
		e.settle()
		e.tick(time.Minute)
		rotated := e.edCall(http.StatusOK, "POST", "/v1/endpoints/"+ep.ID+"/rotate-secret", nil)
		require.Nil(t, rotated.Secret)
		require.NotNil(t, rotated.PublicKey)
		newKey := *rotated.PublicKey
		require.NotEqual(t, oldKey, newKey)
		require.NotNil(t, rotated.PreviousPublicKey)
		require.Equal(t, oldKey, *rotated.PreviousPublicKey)

		ev2 := e.send("c1", "order.paid", payload)
		h, sigs = signatures(2, ev2.ID, payload)
		require.Len(t, sigs, 2, "both keys sign during the overlap")
		for _, key := range []string{newKey, oldKey} {
			_, err := verifier(key).VerifyPayload(h.Headers, h.Body)
			require.NoError(t, err, "a receiver that trusts one of the keys accepts it")
		}
		_, err = verifier(newKey, oldKey).VerifyPayload(h.Headers, h.Body)
		require.NoError(t, err)

		// A day later only the new key signs, and the API says so.
		e.settle()
		e.tick(24*time.Hour + time.Second)
		got := e.edCall(http.StatusOK, "GET", "/v1/endpoints/"+ep.ID, nil)
		require.Equal(t, newKey, *got.PublicKey)
		require.Nil(t, got.PreviousPublicKey)
		ev3 := e.send("c1", "order.shipped", payload)
		h, sigs = signatures(3, ev3.ID, payload)
		require.Len(t, sigs, 1)
		_, err = verifier(newKey).VerifyPayload(h.Headers, h.Body)
		require.NoError(t, err)
		_, err = verifier(oldKey).VerifyPayload(h.Headers, h.Body)
		require.ErrorIs(t, err, verify.ErrNoMatchingSignature, "the old key no longer signs")

		var list struct {
			Data []json.RawMessage `json:"data"`
		}
		e.must(http.StatusOK, "GET", "/v1/endpoints?consumer_id=c1", nil, &list)
		require.Len(t, list.Data, 1)
		require.NotContains(t, string(list.Data[0]), verify.SecretKeyPrefix)
	})
}
