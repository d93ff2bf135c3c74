package chaos

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhooks/herald/verify"
)

// shortHold keeps the tests' hang and trickle faults short; the clients
// that must time out on them wait half as long.
const (
	shortHold     = 200 * time.Millisecond
	clientTimeout = 100 * time.Millisecond
)

// setupReceiver starts a receiver with short faults, closed at the end of
// the test.
func setupReceiver(t *testing.T, opts ReceiverOptions) *Receiver {
	t.Helper()
	if opts.Hang == 0 {
		opts.Hang = shortHold
	}
	if opts.Trickle == 0 {
		opts.Trickle = shortHold
	}
	r, err := StartReceiver(opts)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, r.Close()) })
	return r
}

// newClient returns a client of its own that, like Herald's sender, does
// not follow redirects. A zero timeout means 10s.
func newClient(t *testing.T, timeout time.Duration, tr *http.Transport) *http.Client {
	t.Helper()
	if timeout == 0 {
		timeout = 10 * time.Second
	}
	if tr == nil {
		tr = &http.Transport{}
	}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{
		Transport:     tr,
		Timeout:       timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// payload is a harness payload for webhook id.
func payload(id string) []byte {
	return fmt.Appendf(nil, `{"cid":"c-%s","seq":1}`, id)
}

// post sends a webhook with the webhook-id header (unless id is "") and
// any extra headers. It does not fail the test itself, so goroutines may
// call it.
func post(c *http.Client, target, id string, body []byte, header http.Header) (*http.Response, error) {
	req, err := http.NewRequest(http.MethodPost, target, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	if id != "" {
		req.Header.Set(verify.HeaderStandardID, id)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	return c.Do(req)
}

// postStatus sends webhook id with a harness payload and returns the status,
// having read and closed the body.
func postStatus(t *testing.T, c *http.Client, target, id string) int {
	t.Helper()
	resp, err := post(c, target, id, payload(id), nil)
	require.NoError(t, err)
	_, _ = io.Copy(io.Discard, resp.Body)
	require.NoError(t, resp.Body.Close())
	return resp.StatusCode
}

// armFault sets kind on endpoint and sends the two arrivals that come
// before the first faulty one, so the test's next arrival gets the fault.
func armFault(t *testing.T, r *Receiver, c *http.Client, endpoint string, kind FaultKind) {
	t.Helper()
	r.SetFault(endpoint, kind)
	for i := range 2 {
		require.Equal(t, http.StatusOK, postStatus(t, c, r.URL(endpoint), fmt.Sprintf("warm-%s-%d", kind, i)))
	}
}

// waitArrivals waits until the receiver has recorded n arrivals and returns
// them; a fault may hold the answer after the arrival is recorded.
func waitArrivals(t *testing.T, r *Receiver, n int) []Arrival {
	t.Helper()
	require.Eventually(t, func() bool { return len(r.Arrivals()) >= n }, 5*time.Second, 5*time.Millisecond)
	return r.Arrivals()
}

// lastArrival checks the receiver holds n arrivals and the last served kind.
func lastArrival(t *testing.T, r *Receiver, n int, kind FaultKind) Arrival {
	t.Helper()
	got := waitArrivals(t, r, n)
	require.Len(t, got, n)
	a := got[n-1]
	require.Equal(t, kind, a.Fault)
	require.Equal(t, kind.Delivered(), a.Delivered)
	return a
}

func TestReceiverFaultKindDelivered(t *testing.T) {
	t.Parallel()
	tests := []struct {
		kind      FaultKind
		delivered bool
	}{
		{FaultNone, true},
		{FaultHang, false},
		{FaultTrickle, false},
		{FaultReset, false},
		{Fault500, false},
		{Fault429, false},
		{FaultGzipBomb, true},
		{FaultBigBody, true},
		{FaultBigHeaders, false},
		{FaultRedirect, false},
		{FaultKind("bogus"), false},
	}
	for _, tt := range tests {
		require.Equal(t, tt.delivered, tt.kind.Delivered(), "kind %q", tt.kind)
	}
	require.Len(t, AllFaults, 9)
	require.NotContains(t, AllFaults, FaultNone)
}

// TestReceiverFaults sees each fault as Herald's sender would: from a Go
// client with a short timeout that does not follow redirects.
func TestReceiverFaults(t *testing.T) {
	t.Parallel()
	const ep = "hostile"

	t.Run("HangOutlastsTheTimeout", func(t *testing.T) {
		t.Parallel()
		r := setupReceiver(t, ReceiverOptions{})
		armFault(t, r, newClient(t, 0, nil), ep, FaultHang)
		_, err := post(newClient(t, clientTimeout, nil), r.URL(ep), "w-hang", payload("w-hang"), nil)
		requireTimeout(t, err)
		lastArrival(t, r, 3, FaultHang)
	})

	t.Run("HangAnswers200Late", func(t *testing.T) {
		t.Parallel()
		r := setupReceiver(t, ReceiverOptions{})
		c := newClient(t, 0, nil)
		armFault(t, r, c, ep, FaultHang)
		start := time.Now()
		require.Equal(t, http.StatusOK, postStatus(t, c, r.URL(ep), "w-late"))
		require.GreaterOrEqual(t, time.Since(start), shortHold)
	})

	t.Run("TrickleOutlastsTheTimeout", func(t *testing.T) {
		t.Parallel()
		r := setupReceiver(t, ReceiverOptions{})
		armFault(t, r, newClient(t, 0, nil), ep, FaultTrickle)
		_, err := post(newClient(t, clientTimeout, nil), r.URL(ep), "w-trickle", payload("w-trickle"), nil)
		requireTimeout(t, err)
		lastArrival(t, r, 3, FaultTrickle)
	})

	t.Run("TrickleWritesAWholeResponse", func(t *testing.T) {
		t.Parallel()
		r := setupReceiver(t, ReceiverOptions{})
		c := newClient(t, 0, nil)
		armFault(t, r, c, ep, FaultTrickle)
		start := time.Now()
		resp, err := post(c, r.URL(ep), "w-slow", payload("w-slow"), nil)
		require.NoError(t, err)
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		require.Equal(t, "ok", string(body))
		require.GreaterOrEqual(t, time.Since(start), shortHold*9/10)
	})

	t.Run("ResetBreaksTheConnection", func(t *testing.T) {
		t.Parallel()
		r := setupReceiver(t, ReceiverOptions{})
		c := newClient(t, 0, nil)
		armFault(t, r, c, ep, FaultReset)
		_, err := post(c, r.URL(ep), "w-reset", payload("w-reset"), nil)
		require.Error(t, err)
		require.ErrorIs(t, err, syscall.ECONNRESET)
		lastArrival(t, r, 3, FaultReset)
	})

	t.Run("Status500", func(t *testing.T) {
		t.Parallel()
		r := setupReceiver(t, ReceiverOptions{})
		c := newClient(t, clientTimeout, nil)
		armFault(t, r, c, ep, Fault500)
		resp, err := post(c, r.URL(ep), "w-500", payload("w-500"), nil)
		require.NoError(t, err)
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		require.Equal(t, http.StatusInternalServerError, resp.StatusCode)
		require.NotEmpty(t, body)
		require.Less(t, len(body), 100)
		lastArrival(t, r, 3, Fault500)
	})

	t.Run("Status429WithRetryAfter", func(t *testing.T) {
		t.Parallel()
		r := setupReceiver(t, ReceiverOptions{})
		c := newClient(t, clientTimeout, nil)
		armFault(t, r, c, ep, Fault429)
		resp, err := post(c, r.URL(ep), "w-429", payload("w-429"), nil)
		require.NoError(t, err)
		require.NoError(t, resp.Body.Close())
		require.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
		require.Equal(t, "1", resp.Header.Get("Retry-After"))
		lastArrival(t, r, 3, Fault429)
	})

	t.Run("RedirectToAClosedPort", func(t *testing.T) {
		t.Parallel()
		r := setupReceiver(t, ReceiverOptions{})
		c := newClient(t, clientTimeout, nil)
		armFault(t, r, c, ep, FaultRedirect)
		resp, err := post(c, r.URL(ep), "w-302", payload("w-302"), nil)
		require.NoError(t, err)
		require.NoError(t, resp.Body.Close())
		require.Equal(t, http.StatusFound, resp.StatusCode)
		loc, err := url.Parse(resp.Header.Get("Location"))
		require.NoError(t, err)
		require.Equal(t, "http", loc.Scheme)
		require.Equal(t, "127.0.0.1", loc.Hostname())
		conn, err := net.DialTimeout("tcp", loc.Host, time.Second)
		if err == nil {
			_ = conn.Close()
		}
		require.Error(t, err, "something listens where the redirect points")
		lastArrival(t, r, 3, FaultRedirect)
	})

	t.Run("GzipBombIsSmallAndInflatesPastAGiB", func(t *testing.T) {
		t.Parallel()
		r := setupReceiver(t, ReceiverOptions{})
		c := newClient(t, 0, nil)
		armFault(t, r, c, ep, FaultGzipBomb)

		// Transparently inflated, as a client that asks for gzip sees it:
		// read only the first 4 KiB, as Herald does.
		resp, err := post(c, r.URL(ep), "w-bomb", payload("w-bomb"), nil)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		require.True(t, resp.Uncompressed)
		head := make([]byte, 4<<10)
		_, err = io.ReadFull(resp.Body, head)
		require.NoError(t, err)
		require.Equal(t, make([]byte, 4<<10), head)
		require.NoError(t, resp.Body.Close())
		lastArrival(t, r, 3, FaultGzipBomb)

		// Raw, as Herald's sender (DisableCompression) sees it.
		raw := newClient(t, 0, &http.Transport{DisableCompression: true})
		armFault(t, r, raw, ep, FaultGzipBomb) // arrivals 4 and 5; 6 gets the bomb
		resp, err = post(raw, r.URL(ep), "w-bomb-raw", payload("w-bomb-raw"), nil)
		require.NoError(t, err)
		defer resp.Body.Close()
		require.Equal(t, "gzip", resp.Header.Get("Content-Encoding"))
		compressed, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		require.Less(t, len(compressed), 2<<20)
		require.Equal(t, strconv.Itoa(len(compressed)), resp.Header.Get("Content-Length"))
		// RFC 1952's trailer ends with the inflated size (mod 2^32).
		size := binary.LittleEndian.Uint32(compressed[len(compressed)-4:])
		require.GreaterOrEqual(t, size, uint32(1<<30))
		zr, err := gzip.NewReader(bytes.NewReader(compressed))
		require.NoError(t, err)
		_, err = io.ReadFull(zr, head)
		require.NoError(t, err)
		require.Equal(t, make([]byte, 4<<10), head)
	})

	t.Run("BigBody", func(t *testing.T) {
		t.Parallel()
		r := setupReceiver(t, ReceiverOptions{})
		c := newClient(t, 0, nil)
		armFault(t, r, c, ep, FaultBigBody)
		resp, err := post(c, r.URL(ep), "w-big", payload("w-big"), nil)
		require.NoError(t, err)
		defer resp.Body.Close()
		n, err := io.Copy(io.Discard, resp.Body)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		require.Equal(t, int64(10<<20), n)
		lastArrival(t, r, 3, FaultBigBody)
	})

	t.Run("BigHeaders", func(t *testing.T) {
		t.Parallel()
		r := setupReceiver(t, ReceiverOptions{})
		c := newClient(t, clientTimeout*10, nil)
		armFault(t, r, c, ep, FaultBigHeaders)
		resp, err := post(c, r.URL(ep), "w-headers", payload("w-headers"), nil)
		require.NoError(t, err)
		require.NoError(t, resp.Body.Close())
		require.Equal(t, http.StatusOK, resp.StatusCode)
		total := 0
		for k, vs := range resp.Header {
			for _, v := range vs {
				total += len(k) + len(v)
			}
		}
		require.GreaterOrEqual(t, total, 100_000)
		require.Len(t, resp.Header.Values("X-Pad-99"), 1)
		lastArrival(t, r, 3, FaultBigHeaders)
	})
}

// requireTimeout checks err is a client timeout, as Herald's attempt
// deadline gives.
func requireTimeout(t *testing.T, err error) {
	t.Helper()
	require.Error(t, err)
	var ne net.Error
	require.True(t, errors.As(err, &ne) && ne.Timeout(), "not a timeout: %v", err)
}

func TestReceiverGzipBombInflatesInFull(t *testing.T) {
	t.Parallel()
	// Three segments rather than 1024: the same construction, inflated in
	// full (which also checks the CRC and size in the trailer).
	bomb, err := gzipBomb(3)
	require.NoError(t, err)
	zr, err := gzip.NewReader(bytes.NewReader(bomb))
	require.NoError(t, err)
	zr.Multistream(false)
	var n int64
	buf := make([]byte, 64<<10)
	for {
		k, err := zr.Read(buf)
		require.Equal(t, make([]byte, k), buf[:k], "a byte that is not zero near %d", n)
		n += int64(k)
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
	}
	require.Equal(t, int64(64<<10+3*bombSegment), n)
	require.Less(t, len(bomb), 5<<10)
}

func TestReceiverFaultRule(t *testing.T) {
	t.Parallel()
	const ep = "hostile"

	t.Run("EveryThirdArrivalAtMostTwicePerWebhook", func(t *testing.T) {
		t.Parallel()
		r := setupReceiver(t, ReceiverOptions{})
		c := newClient(t, 0, nil)
		r.SetFault(ep, Fault500)
		var got []int
		for range 9 {
			got = append(got, postStatus(t, c, r.URL(ep), "w-a"))
		}
		// Arrivals 3 and 6 fail; 9 would, but w-a has had its two faults.
		require.Equal(t, []int{200, 200, 500, 200, 200, 500, 200, 200, 200}, got)
		// Another webhook still draws the fault at arrival 12.
		got = got[:0]
		for range 3 {
			got = append(got, postStatus(t, c, r.URL(ep), "w-b"))
		}
		require.Equal(t, []int{200, 200, 500}, got)
		// The same webhook at another endpoint has its own count.
		r.SetFault("other", Fault500)
		got = got[:0]
		for range 3 {
			got = append(got, postStatus(t, c, r.URL("other"), "w-a"))
		}
		require.Equal(t, []int{200, 200, 500}, got)

		arrivals := r.Arrivals()
		require.Len(t, arrivals, 15)
		for i, a := range arrivals {
			want := FaultNone
			if i == 2 || i == 5 || i == 11 || i == 14 {
				want = Fault500
			}
			require.Equal(t, want, a.Fault, "arrival %d", i+1)
			require.Equal(t, want == FaultNone, a.Delivered, "arrival %d", i+1)
		}
	})

	t.Run("NoneStopsAndSettingAgainCountsAfresh", func(t *testing.T) {
		t.Parallel()
		r := setupReceiver(t, ReceiverOptions{})
		c := newClient(t, 0, nil)
		r.SetFault(ep, Fault429)
		require.Equal(t, 200, postStatus(t, c, r.URL(ep), "x-1"))
		require.Equal(t, 200, postStatus(t, c, r.URL(ep), "x-2"))
		r.SetFault(ep, FaultNone)
		for i := range 6 {
			require.Equal(t, 200, postStatus(t, c, r.URL(ep), fmt.Sprintf("y-%d", i)))
		}
		r.SetFault(ep, Fault429)
		require.Equal(t, 200, postStatus(t, c, r.URL(ep), "z-1"))
		require.Equal(t, 200, postStatus(t, c, r.URL(ep), "z-2"))
		require.Equal(t, 429, postStatus(t, c, r.URL(ep), "z-3"))
	})

	t.Run("OtherEndpointsUnaffected", func(t *testing.T) {
		t.Parallel()
		r := setupReceiver(t, ReceiverOptions{})
		c := newClient(t, 0, nil)
		r.SetFault(ep, Fault500)
		for i := range 6 {
			require.Equal(t, 200, postStatus(t, c, r.URL("plain"), fmt.Sprintf("p-%d", i)))
		}
	})

	t.Run("ConcurrentArrivalsDrawExactlyOneInThree", func(t *testing.T) {
		t.Parallel()
		r := setupReceiver(t, ReceiverOptions{})
		c := newClient(t, 0, nil)
		r.SetFault(ep, Fault500)
		const workers, each = 4, 30
		statuses := make(chan int, workers*each)
		var wg sync.WaitGroup
		for w := range workers {
			wg.Go(func() {
				for i := range each {
					resp, err := post(c, r.URL(ep), fmt.Sprintf("c-%d-%d", w, i), payload("c"), nil)
					if err != nil {
						statuses <- 0
						continue
					}
					_, _ = io.Copy(io.Discard, resp.Body)
					_ = resp.Body.Close()
					statuses <- resp.StatusCode
				}
			})
		}
		wg.Wait()
		close(statuses)
		failed := 0
		for s := range statuses {
			require.Contains(t, []int{200, 500}, s)
			if s == 500 {
				failed++
			}
		}
		require.Equal(t, workers*each/3, failed)
		require.Len(t, r.Arrivals(), workers*each)
	})

	t.Run("UnknownKindPanics", func(t *testing.T) {
		t.Parallel()
		r := setupReceiver(t, ReceiverOptions{})
		require.Panics(t, func() { r.SetFault(ep, FaultKind("teapot")) })
	})
}

func TestReceiverFlakyEndpoint(t *testing.T) {
	t.Parallel()
	const webhooks = 200
	ids := make([]string, webhooks)
	for i := range ids {
		ids[i] = fmt.Sprintf("msg_%04d", i)
	}
	// firstFailures sends every id once to endpoint and returns those that
	// failed.
	firstFailures := func(t *testing.T, r *Receiver, c *http.Client, endpoint string) []string {
		var failed []string
		for _, id := range ids {
			switch s := postStatus(t, c, r.URL(endpoint), id); s {
			case http.StatusOK:
			case http.StatusInternalServerError:
				failed = append(failed, id)
			default:
				t.Fatalf("status %d for %s", s, id)
			}
		}
		return failed
	}

	t.Run("FailsAboutOneInNFirstAttemptsOnly", func(t *testing.T) {
		t.Parallel()
		r := setupReceiver(t, ReceiverOptions{Seed: 7, FlakyEndpoint: "shaky", FlakyOneIn: 10})
		c := newClient(t, 0, nil)
		failed := firstFailures(t, r, c, "shaky")
		require.GreaterOrEqual(t, len(failed), 5)
		require.LessOrEqual(t, len(failed), 45)
		for _, id := range failed {
			require.Equal(t, http.StatusOK, postStatus(t, c, r.URL("shaky"), id), "second attempt of %s", id)
		}
		for _, a := range r.Arrivals()[:webhooks] {
			require.Equal(t, a.Fault == Fault500, !a.Delivered)
		}
		require.Empty(t, firstFailures(t, r, c, "plain"))
	})

	t.Run("SameSeedSameFailures", func(t *testing.T) {
		t.Parallel()
		a := setupReceiver(t, ReceiverOptions{Seed: 7})
		b := setupReceiver(t, ReceiverOptions{Seed: 7})
		other := setupReceiver(t, ReceiverOptions{Seed: 8})
		c := newClient(t, 0, nil)
		fa := firstFailures(t, a, c, "flaky")
		require.NotEmpty(t, fa)
		require.Equal(t, fa, firstFailures(t, b, c, "flaky"))
		require.NotEqual(t, fa, firstFailures(t, other, c, "flaky"))
	})

	t.Run("FlakyFailureCountsTowardTheCap", func(t *testing.T) {
		t.Parallel()
		r := setupReceiver(t, ReceiverOptions{Seed: 7, FlakyOneIn: 1})
		c := newClient(t, 0, nil)
		r.SetFault("flaky", Fault500)
		// Arrival 1 fails as flaky, 3 as the fault; 6 is w's third failure,
		// so it gets through.
		var got []int
		for range 6 {
			got = append(got, postStatus(t, c, r.URL("flaky"), "w"))
		}
		require.Equal(t, []int{500, 200, 500, 200, 200, 200}, got)
	})
}

func TestReceiverSignatures(t *testing.T) {
	t.Parallel()
	standardSecret := func(fill byte) string {
		return verify.SecretPrefix + base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{fill}, 32))
	}
	signStandard := func(secret string) func(t *testing.T, id string, body []byte) http.Header {
		return func(t *testing.T, id string, body []byte) http.Header {
			ts := time.Now().Unix()
			sig, err := verify.SignStandard(secret, id, ts, body)
			require.NoError(t, err)
			h := http.Header{}
			h.Set(verify.HeaderStandardTimestamp, strconv.FormatInt(ts, 10))
			h.Set(verify.HeaderStandardSignature, sig)
			return h
		}
	}
	signHMAC := func(secret string) func(t *testing.T, id string, body []byte) http.Header {
		return func(t *testing.T, id string, body []byte) http.Header {
			ts := time.Now().Unix()
			h := http.Header{}
			h.Set(verify.HeaderHMACID, id)
			h.Set(verify.HeaderHMACTimestamp, strconv.FormatInt(ts, 10))
			h.Set(verify.HeaderHMACSignature, verify.SignHMACSHA256(secret, ts, body))
			return h
		}
	}
	tests := []struct {
		name   string
		scheme string
		secret string
		right  func(t *testing.T, id string, body []byte) http.Header
		wrong  func(t *testing.T, id string, body []byte) http.Header
		// standardID: the scheme sends webhook-id; otherwise X-Webhook-ID only.
		standardID bool
	}{
		{"Standard", "standard", standardSecret(1), signStandard(standardSecret(1)), signStandard(standardSecret(2)), true},
		{"HMACSHA256", "hmac-sha256", "s3cret-key", signHMAC("s3cret-key"), signHMAC("another-key"), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := setupReceiver(t, ReceiverOptions{})
			c := newClient(t, 0, nil)
			r.SetSecret("signed", tt.scheme, tt.secret)
			send := func(endpoint, id string, body []byte, h http.Header) {
				sentID := ""
				if tt.standardID {
					sentID = id
				}
				resp, err := post(c, r.URL(endpoint), sentID, body, h)
				require.NoError(t, err)
				require.NoError(t, resp.Body.Close())
				require.Equal(t, http.StatusOK, resp.StatusCode)
			}
			send("signed", "w-right", payload("w-right"), tt.right(t, "w-right", payload("w-right")))
			send("signed", "w-wrong", payload("w-wrong"), tt.wrong(t, "w-wrong", payload("w-wrong")))
			send("signed", "w-altered", payload("w-altered"), tt.right(t, "w-altered", payload("w-other")))
			send("unknown", "w-nosecret", payload("w-nosecret"), tt.right(t, "w-nosecret", payload("w-nosecret")))

			got := r.Arrivals()
			require.Len(t, got, 4)
			want := []struct {
				id string
				ok bool
			}{{"w-right", true}, {"w-wrong", false}, {"w-altered", false}, {"w-nosecret", false}}
			for i, w := range want {
				require.Equal(t, w.id, got[i].WebhookID)
				require.Equal(t, w.ok, got[i].SignatureOK, w.id)
			}
			require.Zero(t, r.Strange())
		})
	}
}

func TestReceiverArrivalFields(t *testing.T) {
	t.Parallel()

	t.Run("ParsedFromThePayload", func(t *testing.T) {
		t.Parallel()
		r := setupReceiver(t, ReceiverOptions{})
		c := newClient(t, 0, nil)
		body := []byte(`{"cid":"c-7","seq":7,"pad":"` + strings.Repeat("x", 2000) + `"}`)
		before := time.Now()
		resp, err := post(c, r.URL("plain"), "evt_7", body, http.Header{verify.HeaderEvent: {"order.created"}})
		require.NoError(t, err)
		require.NoError(t, resp.Body.Close())
		after := time.Now()
		require.Equal(t, http.StatusOK, resp.StatusCode)

		got := r.Arrivals()
		require.Len(t, got, 1)
		a := got[0]
		require.Equal(t, "plain", a.Endpoint)
		require.Equal(t, "evt_7", a.WebhookID)
		require.Equal(t, "order.created", a.EventType)
		require.Equal(t, "c-7", a.CID)
		require.Equal(t, int64(7), a.Seq)
		require.True(t, a.BodyOK)
		require.Equal(t, FaultNone, a.Fault)
		require.True(t, a.Delivered)
		require.False(t, a.SignatureOK)
		require.False(t, a.At.Before(before))
		require.False(t, a.At.After(after))
	})

	t.Run("BodiesThatAreNotPayloads", func(t *testing.T) {
		t.Parallel()
		tests := []struct {
			name string
			body string
			cid  string
			seq  int64
		}{
			{"NotJSON", `not json`, "", 0},
			{"NoCID", `{"seq":3}`, "", 3},
			{"EmptyCID", `{"cid":"","seq":3}`, "", 3},
			{"CIDNotAString", `{"cid":7}`, "", 0},
			{"AnArray", `[{"cid":"c-1"}]`, "", 0},
			{"Truncated", `{"cid":"c-1","seq":1`, "", 0},
			{"TooLarge", `{"cid":"c-1","pad":"` + strings.Repeat("x", maxArrivalBody) + `"}`, "", 0},
		}
		r := setupReceiver(t, ReceiverOptions{})
		c := newClient(t, 0, nil)
		for i, tt := range tests {
			resp, err := post(c, r.URL("plain"), tt.name, []byte(tt.body), nil)
			require.NoError(t, err, tt.name)
			require.NoError(t, resp.Body.Close())
			a := r.Arrivals()[i]
			require.Equal(t, tt.name, a.WebhookID)
			require.False(t, a.BodyOK, tt.name)
			require.Equal(t, tt.cid, a.CID, tt.name)
			require.Equal(t, tt.seq, a.Seq, tt.name)
		}
	})
}

func TestReceiverStrange(t *testing.T) {
	t.Parallel()
	r := setupReceiver(t, ReceiverOptions{})
	c := newClient(t, 0, nil)
	base := strings.TrimSuffix(r.URL("x"), "/r/x")

	resp, err := post(c, base+"/other", "w-1", payload("w-1"), nil)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	require.Equal(t, http.StatusNotFound, resp.StatusCode)
	require.Equal(t, int64(1), r.Strange())

	resp, err = post(c, r.URL("plain"), "", payload("w-2"), nil)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
	require.Equal(t, int64(2), r.Strange())

	resp, err = post(c, base+"/r/", "w-3", payload("w-3"), nil)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	require.Equal(t, int64(3), r.Strange())

	require.Empty(t, r.Arrivals())
}

func TestReceiverCloseReleasesHeldRequests(t *testing.T) {
	t.Parallel()
	r, err := StartReceiver(ReceiverOptions{Hang: time.Minute, Trickle: time.Minute})
	require.NoError(t, err)
	t.Cleanup(func() { _ = r.Close() })
	c := newClient(t, 0, nil)
	armFault(t, r, c, "h", FaultHang)
	armFault(t, r, c, "t", FaultTrickle)

	done := make(chan error, 2)
	for _, ep := range []string{"h", "t"} {
		go func() {
			resp, err := post(c, r.URL(ep), "held-"+ep, payload("held"), nil)
			if err == nil {
				_, err = io.Copy(io.Discard, resp.Body)
				_ = resp.Body.Close()
			}
			done <- err
		}()
	}
	waitArrivals(t, r, 6)

	start := time.Now()
	require.NoError(t, r.Close())
	require.Less(t, time.Since(start), 5*time.Second)
	for range 2 {
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatal("a held request was not released by Close")
		}
	}
	require.NoError(t, r.Close(), "a second Close")
	require.Len(t, r.Arrivals(), 6)
}
