package chaos

import (
	"bytes"
	"compress/flate"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
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

// FaultKind names a way the receiver misbehaves on command, each one a way
// a broken or hostile receiver answers in the wild.
type FaultKind string

// The faults the receiver can serve. Those that Delivered reports as taken
// answer 2xx in a way meant to hurt the sender that reads the answer; the
// others make the attempt fail.
const (
	// FaultNone is a plain 200.
	FaultNone FaultKind = ""
	// FaultHang reads the request, holds it for ReceiverOptions.Hang (longer
	// than the endpoint timeout), then answers 200 to a sender that has
	// given up by then.
	FaultHang FaultKind = "hang"
	// FaultTrickle takes over the connection and writes a 200 response one
	// byte at a time, spread over ReceiverOptions.Trickle, so that each read
	// succeeds and only a deadline on the whole attempt ends it.
	FaultTrickle FaultKind = "trickle"
	// FaultReset reads the whole request, then closes the connection with
	// SO_LINGER 0: the sender gets a TCP RST instead of an answer.
	FaultReset FaultKind = "reset"
	// Fault500 answers 500 with a short body.
	Fault500 FaultKind = "500"
	// Fault429 answers 429 with Retry-After: 1.
	Fault429 FaultKind = "429"
	// FaultGzipBomb answers 200 with Content-Encoding: gzip and a body of
	// about 1.2 MiB that inflates to more than 1 GiB.
	FaultGzipBomb FaultKind = "gzip_bomb"
	// FaultBigBody answers 200 with a 10 MiB body.
	FaultBigBody FaultKind = "big_body"
	// FaultBigHeaders answers 200 with 100 KiB of headers (X-Pad-0 to
	// X-Pad-99, 1 KiB each).
	FaultBigHeaders FaultKind = "big_headers"
	// FaultRedirect answers 302 with a Location on 127.0.0.1 where nothing
	// listens; Herald must record the 3xx, not follow it.
	FaultRedirect FaultKind = "redirect"
)

// AllFaults lists every kind but FaultNone, for the nemesis schedule.
var AllFaults = []FaultKind{
	FaultHang, FaultTrickle, FaultReset, Fault500, Fault429,
	FaultGzipBomb, FaultBigBody, FaultBigHeaders, FaultRedirect,
}

// Delivered reports whether an answer with this fault counts as the webhook
// taken: a 2xx that Herald can read (gzip_bomb, big_body, big_headers and
// none). hang, trickle, reset, 500, 429 and redirect make the attempt fail,
// so Herald must try again. A kind not listed in AllFaults is not delivered.
func (k FaultKind) Delivered() bool {
	switch k {
	case FaultNone, FaultGzipBomb, FaultBigBody, FaultBigHeaders:
		return true
	}
	return false
}

// known reports whether k is FaultNone or one of AllFaults.
func (k FaultKind) known() bool {
	return k == FaultNone || slices.Contains(AllFaults, k)
}

const (
	// receiverPath prefixes each endpoint's URL; the endpoint's name
	// follows it (/r/plain).
	receiverPath = "/r/"
	// maxArrivalBody caps the request body read: the harness's payloads are
	// far smaller, and a larger one is recorded with BodyOK false.
	maxArrivalBody = 1 << 20
	// faultEvery: while a fault is set, every third arrival gets it.
	faultEvery = 3
	// maxFaultsPerWebhook: a webhook is served at most this many faults
	// (the flaky endpoint's 500 included) at one endpoint, so it always
	// gets through within three attempts.
	maxFaultsPerWebhook = 2
	bigBodySize         = 10 << 20
	bigHeaderCount      = 100
	bigHeaderSize       = 1 << 10
	// The gzip bomb holds a 64 KiB lead of zeros, then bombSegments
	// segments of bombSegment zeros: 1 GiB and 64 KiB in all.
	bombSegment  = 128 << 10
	bombSegments = 1 << 30 / bombSegment
	// defaultHold is the default of ReceiverOptions.Hang and Trickle.
	defaultHold = 3 * time.Second
	// defaultFlakyEndpoint and defaultFlakyOneIn are the defaults of the
	// ReceiverOptions fields of the same names.
	defaultFlakyEndpoint = "flaky"
	defaultFlakyOneIn    = 10
)

// trickleResponse is what FaultTrickle writes, one byte at a time: a whole,
// valid response, so that a sender patient enough would read a 200.
const trickleResponse = "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok"

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
// times in a row, which keeps Herald's circuit breaker (5 consecutive
// failures) closed: the harness tests the faults, not the breaker.
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

// answer writes the answer fault calls for.
func (r *Receiver) answer(w http.ResponseWriter, req *http.Request, fault FaultKind) {
	h := w.Header()
	switch fault {
	case FaultHang:
		r.hang(w, req)
	case FaultTrickle:
		r.trickle(w)
	case FaultReset:
		reset(w)
	case Fault500:
		http.Error(w, "chaos: internal error", http.StatusInternalServerError)
	case Fault429:
		h.Set("Retry-After", "1")
		http.Error(w, "chaos: too many requests", http.StatusTooManyRequests)
	case FaultGzipBomb:
		h.Set("Content-Type", "application/json")
		h.Set("Content-Encoding", "gzip")
		h.Set("Content-Length", strconv.Itoa(len(r.bomb)))
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(r.bomb)
	case FaultBigBody:
		h.Set("Content-Type", "application/octet-stream")
		h.Set("Content-Length", strconv.Itoa(bigBodySize))
		w.WriteHeader(http.StatusOK)
		for left := bigBodySize; left > 0; {
			n, err := w.Write(r.filler[:min(left, len(r.filler))])
			if err != nil {
				return // the sender stopped reading, as it should
			}
			left -= n
		}
	case FaultBigHeaders:
		for i := range bigHeaderCount {
			h.Set("X-Pad-"+strconv.Itoa(i), r.pad)
		}
		w.WriteHeader(http.StatusOK)
	case FaultRedirect:
		h.Set("Location", r.redirectTo)
		w.WriteHeader(http.StatusFound)
	default:
		w.WriteHeader(http.StatusOK)
	}
}

// hold registers a handler about to wait, so that Close waits for it to
// let go; false once Close has begun, and then the handler must not wait.
func (r *Receiver) hold() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return false
	}
	r.held.Add(1)
	return true
}

// hang holds the request for Options.Hang, then answers 200. It lets go
// early when the sender hangs up or the receiver closes.
func (r *Receiver) hang(w http.ResponseWriter, req *http.Request) {
	if !r.hold() {
		return
	}
	defer r.held.Done()
	t := time.NewTimer(r.opts.Hang)
	defer t.Stop()
	select {
	case <-t.C:
		w.WriteHeader(http.StatusOK)
	case <-req.Context().Done():
	case <-r.ctx.Done():
	}
}

// trickle takes over the connection and writes trickleResponse a byte at a
// time, the first at once and the last after Options.Trickle. It stops when
// a write fails (the sender hung up) or the receiver closes.
func (r *Receiver) trickle(w http.ResponseWriter) {
	if !r.hold() {
		return
	}
	defer r.held.Done()
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return
	}
	defer conn.Close()
	step := max(r.opts.Trickle/time.Duration(len(trickleResponse)-1), time.Microsecond)
	tick := time.NewTicker(step)
	defer tick.Stop()
	for i := range len(trickleResponse) {
		if i > 0 {
			select {
			case <-tick.C:
			case <-r.ctx.Done():
				return
			}
		}
		if _, err := conn.Write([]byte{trickleResponse[i]}); err != nil {
			return
		}
	}
}

// reset takes over the connection and closes it with SO_LINGER 0, which
// makes the kernel send a RST in place of the usual FIN.
func reset(w http.ResponseWriter) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = conn.Close()
}

// gzipBomb returns one gzip member holding 64 KiB and then segments times
// bombSegment of zeros, compressed about 900:1 (deflate's limit is 1032:1).
// Only the lead and one segment are compressed: deflate blocks written after
// a sync flush start on a byte boundary and carry their own Huffman tables,
// and blocks that encode zeros with back-references no farther than the
// 32 KiB window decode to the same zeros wherever they are repeated, once
// zeros fill the window. So one segment's blocks are repeated segments
// times, between the lead's blocks and the final block. The default level
// compresses zeros as tightly as the best, in half the time.
func gzipBomb(segments int) ([]byte, error) {
	const lead = 64 << 10 // more than the 32 KiB window
	const segment = bombSegment
	zeros := make([]byte, segment)

	var deflated bytes.Buffer
	fw, err := flate.NewWriter(&deflated, flate.DefaultCompression)
	if err != nil {
		return nil, err
	}
	if _, err := fw.Write(zeros[:lead]); err != nil {
		return nil, err
	}
	if err := fw.Flush(); err != nil {
		return nil, err
	}
	leadLen := deflated.Len()
	if _, err := fw.Write(zeros); err != nil {
		return nil, err
	}
	if err := fw.Flush(); err != nil {
		return nil, err
	}
	seg := bytes.Clone(deflated.Bytes()[leadLen:])
	deflated.Truncate(leadLen)
	if err := fw.Close(); err != nil { // appends the final block after the lead
		return nil, err
	}
	final := deflated.Bytes()[leadLen:]

	crc := crc32.ChecksumIEEE(zeros[:lead])
	for range segments {
		crc = crc32.Update(crc, crc32.IEEETable, zeros)
	}
	size := uint64(lead) + uint64(segments)*segment

	// RFC 1952: magic, deflate, no flags, no time, no extra flags, unknown OS.
	out := make([]byte, 0, 10+leadLen+segments*len(seg)+len(final)+8)
	out = append(out, 0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 255)
	out = append(out, deflated.Bytes()[:leadLen]...)
	for range segments {
		out = append(out, seg...)
	}
	out = append(out, final...)
	out = binary.LittleEndian.AppendUint32(out, crc)
	out = binary.LittleEndian.AppendUint32(out, uint32(size)) // the size mod 2^32, as RFC 1952 says
	return out, nil
}
