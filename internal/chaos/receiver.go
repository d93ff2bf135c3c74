package chaos

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/heraldhooks/herald/verify"
)

// ReceiverOptions tune a Receiver; the zero value of each field chooses its
// default.
type ReceiverOptions struct {
	// Seed decides which webhooks the flaky endpoint fails.
	Seed uint64
	// Hang is how long FaultHang holds a request; default 3s. It should be
	// longer than the endpoints' timeout.
	Hang time.Duration
	// Trickle is how long FaultTrickle takes to write its response; default
	// 3s. It should be longer than the endpoints' timeout.
	Trickle time.Duration
	// FlakyEndpoint is the name of the endpoint that fails now and then,
	// always, with or without a fault set: it answers 500 to about one
	// webhook in FlakyOneIn, chosen by a hash of the webhook id and Seed, on
	// that webhook's first attempt only. Default "flaky".
	FlakyEndpoint string
	// FlakyOneIn is how rare the flaky endpoint's failures are; default 10.
	FlakyOneIn int
}

func (o ReceiverOptions) withDefaults() ReceiverOptions {
	if o.Hang <= 0 {
		o.Hang = defaultHold
	}
	if o.Trickle <= 0 {
		o.Trickle = defaultHold
	}
	if o.FlakyEndpoint == "" {
		o.FlakyEndpoint = defaultFlakyEndpoint
	}
	if o.FlakyOneIn <= 0 {
		o.FlakyOneIn = defaultFlakyOneIn
	}
	return o
}

// Arrival is one request the receiver took in at an endpoint's URL. It
// holds no body, so a long run's arrivals stay small.
type Arrival struct {
	// Endpoint is the name in /r/<name>.
	Endpoint string
	// WebhookID is the webhook-id header, or X-Webhook-ID for the
	// hmac-sha256 scheme.
	WebhookID string
	// EventType is the X-Webhook-Event header.
	EventType string
	// CID is the "cid" string field of the JSON payload (the harness's own
	// event id); "" if none.
	CID string
	// Seq is the "seq" integer field of the payload; 0 if none.
	Seq int64
	// At is when the request had been read in full (time.Now(), with its
	// monotonic reading).
	At time.Time
	// Fault is the fault served to this arrival; FaultNone for a plain 200.
	Fault FaultKind
	// Delivered is Fault.Delivered(): the receiver took the webhook.
	Delivered bool
	// SignatureOK: the signature verified with the endpoint's secret, in the
	// endpoint's scheme, with the default tolerance. False too when no
	// secret is known for the endpoint.
	SignatureOK bool
	// BodyOK: the body is valid JSON, at most 1 MiB, with a non-empty "cid"
	// string (the harness sends only such payloads).
	BodyOK bool
}

// Receiver is the harness's webhook receiver on 127.0.0.1: it records every
// arrival, verifies signatures and, on command, misbehaves per endpoint.
// It is safe for concurrent use.
type Receiver struct {
	opts ReceiverOptions
	ln   net.Listener
	srv  *http.Server
	// ctx is cancelled by Close; hang and trickle wait on it, so that Close
	// does not wait them out.
	ctx    context.Context
	cancel context.CancelFunc
	// Built once at start, read only afterwards.
	bomb       []byte // the gzip bomb, compressed
	filler     []byte // a chunk of the big body
	pad        string // one big header's value
	redirectTo string // where FaultRedirect points: a closed port

	strange atomic.Int64

	mu        sync.Mutex
	closed    bool
	held      sync.WaitGroup // hang and trickle handlers, which Close waits for
	arrivals  []Arrival
	secrets   map[string]endpointSecret
	faults    map[string]*faultState // by endpoint name; only endpoints with a fault set
	served    map[deliveryKey]int    // faults served per webhook and endpoint; only those served one
	flakySeen map[string]struct{}    // webhook ids seen at the flaky endpoint
}

type endpointSecret struct {
	scheme verify.Scheme
	secret string
}

// faultState is an endpoint's fault and the arrivals there since it was set.
type faultState struct {
	kind     FaultKind
	arrivals int
}

// deliveryKey is one webhook at one endpoint: a webhook id is the event's,
// the same at every endpoint the event goes to.
type deliveryKey struct {
	endpoint, webhookID string
}

// StartReceiver listens on a free 127.0.0.1 port and serves until Close.
func StartReceiver(opts ReceiverOptions) (*Receiver, error) {
	opts = opts.withDefaults()
	bomb, err := gzipBomb(bombSegments)
	if err != nil {
		return nil, fmt.Errorf("build the gzip bomb: %w", err)
	}
	redirectTo, err := closedPortURL()
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listen for webhooks: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &Receiver{
		opts:       opts,
		ln:         ln,
		ctx:        ctx,
		cancel:     cancel,
		bomb:       bomb,
		filler:     bytes.Repeat([]byte{'x'}, 64<<10),
		pad:        strings.Repeat("p", bigHeaderSize),
		redirectTo: redirectTo,
		secrets:    make(map[string]endpointSecret),
		faults:     make(map[string]*faultState),
		served:     make(map[deliveryKey]int),
		flakySeen:  make(map[string]struct{}),
	}
	r.srv = &http.Server{
		Handler:           http.HandlerFunc(r.serve),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          log.New(io.Discard, "", 0),
	}
	go func() { _ = r.srv.Serve(ln) }()
	return r, nil
}

// closedPortURL returns a URL on 127.0.0.1 at a port that was free a moment
// ago and is closed now, so a sender that follows the redirect is refused.
func closedPortURL() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("find a closed port: %w", err)
	}
	addr := ln.Addr().String()
	if err := ln.Close(); err != nil {
		return "", fmt.Errorf("find a closed port: %w", err)
	}
	return "http://" + addr + "/", nil
}

// URL is where the endpoint named endpoint delivers:
// http://127.0.0.1:<port>/r/<endpoint>.
func (r *Receiver) URL(endpoint string) string {
	return "http://" + r.ln.Addr().String() + receiverPath + url.PathEscape(endpoint)
}

// SetSecret tells the receiver the endpoint's secret and scheme ("standard"
// or "hmac-sha256", as the endpoint was created; "" means standard), so its
// arrivals are verified. Until then they are recorded with SignatureOK
// false.
func (r *Receiver) SetSecret(endpoint, scheme, secret string) {
	s := verify.Scheme(scheme)
	if s == "" {
		s = verify.SchemeStandard
	}
	r.mu.Lock()
	r.secrets[endpoint] = endpointSecret{scheme: s, secret: secret}
	r.mu.Unlock()
}

// SetFault makes the endpoint misbehave with kind until it is set back to
// FaultNone. While a fault is set, the endpoint's arrivals are numbered from
// 1 from this call on, and arrival n gets the fault when n%3 == 0 and its
// webhook has been served fewer than 2 faults at this endpoint in all (the
// flaky endpoint's 500s included); the others get a plain 200. So a webhook
// always gets through within 3 attempts, and the endpoint never fails many
// times in a row in the order requests arrive, which mostly keeps Herald's
// circuit breaker (5 consecutive failures) closed: the harness tests the
// faults, not the breaker. Herald counts failures in the order it writes
// outcomes, which many attempts at once can reorder; a breaker that opens
// all the same makes the drain wait for its probe (run.go, drain).
// SetFault panics on a kind not in AllFaults: a typo in a schedule would
// otherwise pass for plain 200s.
func (r *Receiver) SetFault(endpoint string, kind FaultKind) {
	if !kind.known() {
		panic(fmt.Sprintf("chaos: unknown receiver fault %q", kind))
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if kind == FaultNone {
		delete(r.faults, endpoint)
		return
	}
	r.faults[endpoint] = &faultState{kind: kind}
}

// Arrivals returns a copy of every arrival so far, in arrival order.
func (r *Receiver) Arrivals() []Arrival {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.arrivals)
}

// Strange counts the requests that were not webhooks: a path not
// /r/<name>, or no webhook id header. Herald should send none.
func (r *Receiver) Strange() int64 { return r.strange.Load() }

// Close stops serving and closes every connection. It does not wait out
// hanging or trickling handlers: they are released at once, and Close
// returns when they have. Arrivals stay readable.
func (r *Receiver) Close() error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil
	}
	r.closed = true
	r.mu.Unlock()
	r.cancel()
	err := r.srv.Close()
	r.held.Wait()
	if err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("stop the chaos receiver: %w", err)
	}
	return nil
}

// serve takes one request: it checks it is a webhook, reads and records it,
// then answers with the fault its arrival drew.
func (r *Receiver) serve(w http.ResponseWriter, req *http.Request) {
	name, ok := strings.CutPrefix(req.URL.Path, receiverPath)
	if !ok || name == "" || strings.Contains(name, "/") {
		r.strange.Add(1)
		http.NotFound(w, req)
		return
	}
	id := req.Header.Get(verify.HeaderStandardID)
	if id == "" {
		id = req.Header.Get(verify.HeaderHMACID)
	}
	if id == "" {
		r.strange.Add(1)
		http.Error(w, "no webhook id", http.StatusBadRequest)
		return
	}
	body, err := io.ReadAll(io.LimitReader(req.Body, maxArrivalBody+1))
	if err != nil {
		// The sender gave up before its body was through: nothing arrived,
		// and nobody is left to answer.
		return
	}
	a := Arrival{
		Endpoint:    name,
		WebhookID:   id,
		EventType:   req.Header.Get(verify.HeaderEvent),
		SignatureOK: r.signatureOK(name, req.Header, body),
	}
	if len(body) <= maxArrivalBody {
		a.CID, a.Seq, a.BodyOK = parsePayload(body)
	}
	a = r.arrive(a)
	r.answer(w, req, a.Fault)
}

// signatureOK verifies a request with its endpoint's secret; false when the
// endpoint has none.
func (r *Receiver) signatureOK(endpoint string, header http.Header, body []byte) bool {
	r.mu.Lock()
	s, ok := r.secrets[endpoint]
	r.mu.Unlock()
	if !ok {
		return false
	}
	now := time.Now()
	switch s.scheme {
	case verify.SchemeStandard:
		return verify.VerifyStandard(s.secret, header, body, now, verify.DefaultTolerance) == nil
	case verify.SchemeHMACSHA256:
		return verify.VerifyHMACSHA256(s.secret, header, body, now, verify.DefaultTolerance) == nil
	}
	return false
}

// parsePayload reads the harness's fields from a payload: ok when it is
// valid JSON with a non-empty "cid" string. seq is 0 unless "seq" is an
// integer.
func parsePayload(body []byte) (cid string, seq int64, ok bool) {
	var p struct {
		CID json.RawMessage `json:"cid"`
		Seq json.RawMessage `json:"seq"`
	}
	if err := json.Unmarshal(body, &p); err != nil {
		return "", 0, false
	}
	if len(p.Seq) > 0 {
		seq, _ = strconv.ParseInt(string(p.Seq), 10, 64)
	}
	if len(p.CID) == 0 || json.Unmarshal(p.CID, &cid) != nil {
		return "", seq, false
	}
	return cid, seq, cid != ""
}

// arrive stamps and records an arrival with the fault it draws. Both happen
// under one lock, so the record's order is the order faults are dealt in.
func (r *Receiver) arrive(a Arrival) Arrival {
	r.mu.Lock()
	defer r.mu.Unlock()
	a.At = time.Now()
	a.Fault = r.drawFault(a.Endpoint, a.WebhookID)
	a.Delivered = a.Fault.Delivered()
	r.arrivals = append(r.arrivals, a)
	return a
}

// drawFault decides the fault for one arrival, as SetFault and
// ReceiverOptions.FlakyEndpoint describe. r.mu is held.
func (r *Receiver) drawFault(endpoint, webhookID string) FaultKind {
	key := deliveryKey{endpoint: endpoint, webhookID: webhookID}
	kind, n := FaultNone, 0
	if st := r.faults[endpoint]; st != nil {
		st.arrivals++
		kind, n = st.kind, st.arrivals
	}
	if endpoint == r.opts.FlakyEndpoint {
		if _, seen := r.flakySeen[webhookID]; !seen {
			r.flakySeen[webhookID] = struct{}{}
			if r.flakyFails(webhookID) {
				r.served[key]++
				return Fault500
			}
		}
	}
	if kind != FaultNone && n%faultEvery == 0 && r.served[key] < maxFaultsPerWebhook {
		r.served[key]++
		return kind
	}
	return FaultNone
}

// flakyFails reports whether the flaky endpoint fails this webhook's first
// attempt: a hash of the seed and the id, so a run is repeatable from its
// seed, whatever order the webhooks come in.
func (r *Receiver) flakyFails(webhookID string) bool {
	h := sha256.New()
	_ = binary.Write(h, binary.LittleEndian, r.opts.Seed)
	_, _ = io.WriteString(h, webhookID)
	sum := h.Sum(nil)
	return binary.LittleEndian.Uint64(sum)%uint64(r.opts.FlakyOneIn) == 0
}
