package bench

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/heraldhooks/herald/verify"
)

// receiverPath prefixes each endpoint's URL on the receiver; the endpoint's
// number follows it (/e/12).
const receiverPath = "/e/"

// receiver is the bench's webhook receiver: it records each delivery's
// arrival in a Tally, under the webhook-id header and the endpoint number
// in the path, and answers 200, at once or, as a slow receiver, delay
// later. It logs nothing and, unless asked to verify, reads no more of a
// request than net/http must.
type receiver struct {
	tally *Tally
	// check, when set, verifies each webhook's signature with its
	// endpoint's secret and compares its body with the payload sent.
	check   *bodyCheck
	srv     *http.Server
	ln      net.Listener
	delay   time.Duration
	strange atomic.Int64 // requests with no webhook-id or a path not /e/N
	hung    hangCount    // requests to hanging endpoints (/h/N)
}

// bodyCheck is what --verify compares a delivery with.
type bodyCheck struct {
	payload []byte
	mu      sync.RWMutex
	secrets map[string]string // endpoint number → secret
	invalid atomic.Int64      // bad signature
	changed atomic.Int64      // body differs from the payload sent
}

func (c *bodyCheck) setSecret(num, secret string) {
	c.mu.Lock()
	c.secrets[num] = secret
	c.mu.Unlock()
}

func (c *bodyCheck) secret(num string) string {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.secrets[num]
}

// startReceiver listens on a free 127.0.0.1 port and serves until close,
// answering each delivery delay after it came.
func startReceiver(tally *Tally, check *bodyCheck, delay time.Duration) (*receiver, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listen for webhooks: %w", err)
	}
	r := &receiver{tally: tally, check: check, ln: ln, delay: delay}
	r.srv = &http.Server{
		Handler:           r,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          log.New(io.Discard, "", 0),
	}
	go func() { _ = r.srv.Serve(ln) }()
	return r, nil
}

// url is where endpoint number num delivers.
func (r *receiver) url(num int) string { return r.urlFor(strconv.Itoa(num)) }

// urlFor is where the endpoint named num in the path delivers.
func (r *receiver) urlFor(num string) string {
	return "http://" + r.ln.Addr().String() + receiverPath + num
}

func (r *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	now := time.Now()
	if strings.HasPrefix(req.URL.Path, hangPath) {
		r.hang(w, req)
		return
	}
	num, ok := strings.CutPrefix(req.URL.Path, receiverPath)
	id := req.Header.Get(verify.HeaderStandardID)
	if id == "" {
		id = req.Header.Get(verify.HeaderHMACID)
	}
	if !ok || len(num) == 0 || id == "" {
		r.strange.Add(1)
		w.WriteHeader(http.StatusOK)
		return
	}
	if r.check != nil {
		r.verify(req, num, now)
	}
	var buf [keySize]byte
	k := append(buf[:0], id...)
	k = append(k, '#')
	k = append(k, num...)
	r.tally.arrivedBytes(k, now)
	if r.delay > 0 {
		// A slow receiver: it answers delay after the delivery came (real
		// time, which is what a bench measures), or not at all if Herald
		// gives up first. The body is read to its end first: net/http
		// notices a client gone (and ends the request's context) only
		// once nothing of the body is left to read.
		_, _ = io.Copy(io.Discard, req.Body)
		t := time.NewTimer(r.delay - time.Since(now))
		select {
		case <-t.C:
		case <-req.Context().Done():
			t.Stop()
			return
		}
	}
	w.WriteHeader(http.StatusOK)
}

// verify checks one request's signature and body. A failure is counted,
// and the request is still answered 200, so Herald does not retry it.
func (r *receiver) verify(req *http.Request, num string, now time.Time) {
	body, err := io.ReadAll(io.LimitReader(req.Body, MaxPayloadSize+1))
	if err != nil || !bytes.Equal(body, r.check.payload) {
		r.check.changed.Add(1)
	}
	if err := verify.VerifyStandard(r.check.secret(num), req.Header, body, now, verify.DefaultTolerance); err != nil {
		r.check.invalid.Add(1)
	}
}

// close stops the receiver at once, closing every connection: the report
// is made by then, and a request still coming in no longer counts.
func (r *receiver) close() error {
	if err := r.srv.Close(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("stop the receiver: %w", err)
	}
	return nil
}
