package chaos

import (
	"bytes"
	"compress/flate"
	"encoding/binary"
	"hash/crc32"
	"net"
	"net/http"
	"slices"
	"strconv"
	"time"
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
	// X-Pad-99, 1 KiB each): past the 64 KiB Herald's sender reads
	// (sender.MaxResponseHeaderBytes), so the attempt fails and is tried
	// again.
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
// taken: a 2xx that Herald can read (gzip_bomb, big_body and none). hang,
// trickle, reset, 500, 429, redirect and big_headers (past what the sender
// reads) make the attempt fail, so Herald must try again. A kind not
// listed in AllFaults is not delivered.
func (k FaultKind) Delivered() bool {
	switch k {
	case FaultNone, FaultGzipBomb, FaultBigBody:
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
