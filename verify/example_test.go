package verify_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"time"

	"github.com/heraldhooks/herald/verify"
)

// A receiver checks a Standard Webhooks request by hand: the endpoint's
// secret, the headers and the raw body, exactly as received.
func ExampleVerifyStandard() {
	secret := "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	body := []byte(`{"test": 2432232314}`)
	headers := http.Header{}
	headers.Set("webhook-id", "msg_p5jXN8AQM9LWM0D4loKWxJek")
	headers.Set("webhook-timestamp", "1614265330")
	headers.Set("webhook-signature", "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=")

	// In a receiver, now is time.Now() (or the zero time, which means the
	// same); here it is pinned so the example keeps passing.
	now := time.Unix(1614265330, 0).Add(time.Minute)
	fmt.Println(verify.VerifyStandard(secret, headers, body, now, 0))

	err := verify.VerifyStandard(secret, headers, []byte(`{"test": 1}`), now, 0)
	fmt.Println(errors.Is(err, verify.ErrNoMatchingSignature), err)

	err = verify.VerifyStandard(secret, headers, body, now.Add(time.Hour), 0)
	fmt.Println(errors.Is(err, verify.ErrTimestampOutOfTolerance))
	// Output:
	// <nil>
	// true no matching webhook signature
	// true
}

// The hex style signs "{timestamp}.{body}" with the whole secret string.
func ExampleVerifyHMACSHA256() {
	secret := "my endpoint secret"
	body := []byte(`{"order_id":"o_1"}`)
	ts := int64(1767225600)
	headers := http.Header{}
	headers.Set("X-Webhook-ID", "evt_1")
	headers.Set("X-Webhook-Timestamp", strconv.FormatInt(ts, 10))
	headers.Set("X-Webhook-Signature", verify.SignHMACSHA256(secret, ts, body))

	fmt.Println(verify.VerifyHMACSHA256(secret, headers, body, time.Unix(ts, 0), 0))
	// Output: <nil>
}

// Middleware guards a receiver's handler: forged, altered or stale requests
// get 401, and a webhook delivered twice reaches the handler once.
func ExampleMiddleware() {
	// List both secrets while the endpoint's secret is being rotated.
	v := &verify.Verifier{Secrets: []string{"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}}
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		wh, _ := verify.WebhookFromContext(r.Context())
		body, _ := io.ReadAll(r.Body) // the body is still there to read
		fmt.Printf("handling %s %s %s\n", wh.ID, wh.EventType, body)
		w.WriteHeader(http.StatusNoContent)
	})
	receiver := verify.Middleware(v, handler)
	// In a real receiver: http.Handle("/webhooks", receiver)

	deliver := func(id string, body []byte, secret string) {
		ts := time.Now().Unix()
		sig, _ := verify.SignStandard(secret, id, ts, body)
		r := httptest.NewRequest(http.MethodPost, "/webhooks", bytes.NewReader(body))
		r.Header.Set("webhook-id", id)
		r.Header.Set("webhook-timestamp", strconv.FormatInt(ts, 10))
		r.Header.Set("webhook-signature", sig)
		r.Header.Set("X-Webhook-Event", "order.created")
		w := httptest.NewRecorder()
		receiver.ServeHTTP(w, r)
		fmt.Printf("%d %q\n", w.Code, w.Body.String())
	}
	deliver("evt_1", []byte(`{"order_id":"o_1"}`), "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	deliver("evt_1", []byte(`{"order_id":"o_1"}`), "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	deliver("evt_2", []byte(`{"order_id":"o_2"}`), "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD")
	// Output:
	// handling evt_1 order.created {"order_id":"o_1"}
	// 204 ""
	// 200 "duplicate webhook ignored\n"
	// 401 "no matching webhook signature\n"
}

// An endpoint with signature scheme ed25519 is checked with its public key
// (public_key in Herald's API), which can verify webhooks but not forge
// them: the receiver holds no secret.
func ExampleVerifyEd25519() {
	publicKey := "whpk_11qYAYKxCrfVS/7TyWQHOg7hcvPapiMlrwIaaPcHURo="
	body := []byte(`{"test": 2432232314}`)
	headers := http.Header{}
	headers.Set("webhook-id", "msg_p5jXN8AQM9LWM0D4loKWxJek")
	headers.Set("webhook-timestamp", "1614265330")
	headers.Set("webhook-signature", "v1a,fldxM4gAKugP6nnt1hdz3sgGfZ6d99nzrMFnZOELIxbzEHoVmAb2ADpkJK7zgPePmPsle0zV9jSeGlHFG2NVAw==")

	now := time.Unix(1614265330, 0).Add(time.Minute) // time.Now() in a receiver
	fmt.Println(verify.VerifyEd25519(publicKey, headers, body, now, 0))

	err := verify.VerifyEd25519(publicKey, headers, []byte(`{"test": 1}`), now, 0)
	fmt.Println(errors.Is(err, verify.ErrNoMatchingSignature))
	// Output:
	// <nil>
	// true
}

// SignEd25519 makes the v1a signature Herald sends, from the endpoint's
// private key; Ed25519PublicKey gives the public key that checks it.
func ExampleSignEd25519() {
	secretKey := "whsk_nWGxne/9WmC6hEr0kuwsxERJxWl7MmkZcDusAxyuf2A="
	publicKey, _ := verify.Ed25519PublicKey(secretKey)
	sig, _ := verify.SignEd25519(secretKey, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, []byte(`{"test": 2432232314}`))
	fmt.Println(publicKey)
	fmt.Println(sig)
	// Output:
	// whpk_11qYAYKxCrfVS/7TyWQHOg7hcvPapiMlrwIaaPcHURo=
	// v1a,fldxM4gAKugP6nnt1hdz3sgGfZ6d99nzrMFnZOELIxbzEHoVmAb2ADpkJK7zgPePmPsle0zV9jSeGlHFG2NVAw==
}

// While an ed25519 endpoint's key is rotated, Herald signs with the new and
// the old private key (two v1a signatures) for 24 hours; a receiver lists
// both public keys, then drops the old one.
func ExampleVerifier_ed25519() {
	oldKey, _ := verify.NewEd25519Key(nil) // in Herald; receivers never see these
	newKey, _ := verify.NewEd25519Key(nil)
	oldPublic, _ := verify.Ed25519PublicKey(oldKey)
	newPublic, _ := verify.Ed25519PublicKey(newKey)

	v := &verify.Verifier{Scheme: verify.SchemeEd25519, PublicKeys: []string{newPublic, oldPublic}}
	receiver := verify.Middleware(v, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		wh, _ := verify.WebhookFromContext(r.Context())
		fmt.Printf("handling %s\n", wh.ID)
	}))

	deliver := func(id string, keys ...string) {
		body := []byte(`{"order_id":"o_1"}`)
		ts := time.Now().Unix()
		var sigs []string
		for _, k := range keys {
			sig, _ := verify.SignEd25519(k, id, ts, body)
			sigs = append(sigs, sig)
		}
		r := httptest.NewRequest(http.MethodPost, "/webhooks", bytes.NewReader(body))
		r.Header.Set("webhook-id", id)
		r.Header.Set("webhook-timestamp", strconv.FormatInt(ts, 10))
		r.Header.Set("webhook-signature", strings.Join(sigs, " "))
		w := httptest.NewRecorder()
		receiver.ServeHTTP(w, r)
		fmt.Println(w.Code)
	}
	deliver("evt_1", newKey, oldKey) // during the rotation
	deliver("evt_2", newKey)         // after it
	forged, _ := verify.NewEd25519Key(nil)
	deliver("evt_3", forged)
	// Output:
	// handling evt_1
	// 200
	// handling evt_2
	// 200
	// 401
}
