package api

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/textproto"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/heraldhooks/herald"
	"github.com/heraldhooks/herald/internal/sender"
	"github.com/heraldhooks/herald/internal/store"
	"github.com/heraldhooks/herald/internal/wire"
)

// fuzzServer is a Server with what the decoders read: a small payload limit,
// so the fuzzer meets it, and a logger.
func fuzzServer(allowPrivate bool) *Server {
	return &Server{maxPayload: 1 << 10, allowPrivate: allowPrivate, log: slog.New(slog.DiscardHandler)}
}

// fuzzDecodeEvent reads a single-event body as eventIngest does.
func (s *Server) fuzzDecodeEvent(body []byte) (store.EventIngestItem, error) {
	if len(strings.TrimSpace(string(body))) == 0 {
		return store.EventIngestItem{}, badRequest("invalid_json", "the request body is empty; it must be a JSON object")
	}
	var req wire.EventRequest
	if err := decodeJSON(body, &req); err != nil {
		return store.EventIngestItem{}, err
	}
	return s.eventItem(&req)
}

// fuzzDecodeBatch reads a batch body as eventIngestBatch does.
func (s *Server) fuzzDecodeBatch(body []byte) ([]store.EventIngestItem, error) {
	if len(strings.TrimSpace(string(body))) == 0 {
		return nil, badRequest("invalid_json", "the request body is empty; it must be a JSON object")
	}
	var req wire.BatchRequest
	if err := decodeJSON(body, &req); err != nil {
		return nil, err
	}
	if len(req.Events) == 0 || len(req.Events) > MaxBatchEvents {
		return nil, badRequest("invalid_events", "events must list from 1 to %d events", MaxBatchEvents)
	}
	items := make([]store.EventIngestItem, len(req.Events))
	for i, raw := range req.Events {
		var ev wire.EventRequest
		if err := decodeJSON(raw, &ev); err != nil {
			return nil, batchItemError(i, err)
		}
		item, err := s.eventItem(&ev)
		if err != nil {
			return nil, batchItemError(i, err)
		}
		items[i] = item
	}
	return items, nil
}

// requireClientError fails unless err is an answer of the 4xx kind.
func requireClientError(t *testing.T, err error) {
	t.Helper()
	var ae *apiError
	if !errors.As(err, &ae) || ae.status < 400 || ae.status > 499 || ae.code == "" || ae.message == "" {
		t.Fatalf("refused with %#v, not a 4xx answer with a code and a message", err)
	}
}

// memberSpans returns the byte spans, in obj, of the values of obj's
// top-level members whose name (unescaped) is exactly name. It is the
// test's own reading of where a value lies, by offsets into the bytes.
func memberSpans(obj []byte, name string) ([][2]int, error) {
	dec := json.NewDecoder(bytes.NewReader(obj))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, fmt.Errorf("not an object: %v %v", tok, err)
	}
	var spans [][2]int
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		key, _ := tok.(string)
		start := skipToValue(obj, int(dec.InputOffset()))
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return nil, err
		}
		if key == name {
			spans = append(spans, [2]int{start, int(dec.InputOffset())})
		}
	}
	return spans, nil
}

// elementSpans returns the byte spans, in arr, of the elements of a JSON
// array.
func elementSpans(arr []byte) ([][2]int, error) {
	dec := json.NewDecoder(bytes.NewReader(arr))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('[') {
		return nil, fmt.Errorf("not an array: %v %v", tok, err)
	}
	var spans [][2]int
	for dec.More() {
		start := skipToValue(arr, int(dec.InputOffset()))
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return nil, err
		}
		spans = append(spans, [2]int{start, int(dec.InputOffset())})
	}
	return spans, nil
}

// skipToValue skips the white space, colon and comma before a value.
func skipToValue(b []byte, i int) int {
	for i < len(b) && strings.IndexByte(" \t\r\n:,", b[i]) >= 0 {
		i++
	}
	return i
}

// onlyPayload returns the bytes of obj's one member named exactly
// "payload", and fails when there is not exactly one.
func onlyPayload(t *testing.T, obj []byte) []byte {
	t.Helper()
	spans, err := memberSpans(obj, "payload")
	if err != nil {
		t.Fatalf("accepted %q, which the test cannot read: %v", obj, err)
	}
	if len(spans) != 1 {
		t.Fatalf("accepted %q, which has %d members named exactly \"payload\"", obj, len(spans))
	}
	return obj[spans[0][0]:spans[0][1]]
}

// requireRoundTrip checks that payload is sent back, in an event of the
// API's answers, as the same bytes.
func requireRoundTrip(t *testing.T, s *Server, payload []byte) {
	t.Helper()
	answer, err := s.appendEvent(nil, &herald.Event{ID: "evt_1", EventType: "a", Payload: payload, CreatedAt: time.Unix(0, 0)}, nil, nil)
	if err != nil {
		t.Fatalf("answer the event: %v", err)
	}
	if got := onlyPayload(t, answer); !bytes.Equal(got, payload) {
		t.Fatalf("payload %q came back as %q", payload, got)
	}
}

var fuzzEventSeeds = []string{
	`{"event_type":"order.created","payload":{"id":1}}`,
	`{"consumer_id":"c1","event_type":"a","payload":  [1, 2.50, "\u00e9", null] ,"idempotency_key":"k"}`,
	`{"event_type":"a","payload":"caf\u00e9 \ud83d\ude00"}`,
	`{"event_type":"a","payload":1e400}`,
	`{"event_type":"a","payload":null}`,
	`{"event_type":"a","payload":{"a":{"b":[{},[]]}},"idempotency_key":""}`,
	`{"event_type":"herald.x","payload":1}`,
	`{"event_type":"a","payload":1} {}`,
	`{"event_type":"a","pay\u006coad":1}`,
	`{"event_type":"a"}`,
	`{"event_type":1,"payload":1}`,
	`{"event_type":"a","payload":1,"extra":2}`,
	"{\"event_type\":\"a\",\"payload\":\"\xff\"}",
	`[]`, `null`, ` `, ``, `{`, `"x"`,
}

// FuzzEventRequest checks the decoder of POST /v1/events: it never panics,
// refuses with a 4xx answer, and every event it accepts has as its payload
// exactly the bytes of the body's one "payload" member, which the API's
// answers then carry unchanged.
func FuzzEventRequest(f *testing.F) {
	for _, seed := range fuzzEventSeeds {
		f.Add([]byte(seed))
	}
	s := fuzzServer(false)
	f.Fuzz(func(t *testing.T, body []byte) {
		item, err := s.fuzzDecodeEvent(body)
		if err != nil {
			requireClientError(t, err)
			return
		}
		if want := onlyPayload(t, body); !bytes.Equal(item.Payload, want) {
			t.Fatalf("accepted %q with payload %q; the body's payload is %q", body, item.Payload, want)
		}
		requireRoundTrip(t, s, item.Payload)
	})
}

// FuzzEventBatch checks the decoder of POST /v1/events/batch in the same
// way, event by event, each payload found by offsets into the whole body.
func FuzzEventBatch(f *testing.F) {
	for _, seed := range fuzzEventSeeds {
		f.Add([]byte(`{"events":[` + seed + `]}`))
	}
	f.Add([]byte(`{"events":[{"event_type":"a","payload":1}, {"event_type":"b","payload":{"x":[true]}}]}`))
	f.Add([]byte(`{"events":[]}`))
	f.Add([]byte(`{"events":null}`))
	f.Add([]byte(`{"events":[null]}`))
	f.Add([]byte(`{"events":{}}`))
	s := fuzzServer(false)
	f.Fuzz(func(t *testing.T, body []byte) {
		items, err := s.fuzzDecodeBatch(body)
		if err != nil {
			requireClientError(t, err)
			return
		}
		events, err := memberSpans(body, "events")
		if err != nil || len(events) != 1 {
			t.Fatalf("accepted %q, which has %d members named exactly \"events\" (%v)", body, len(events), err)
		}
		elements, err := elementSpans(body[events[0][0]:events[0][1]])
		if err != nil || len(elements) != len(items) {
			t.Fatalf("accepted %q as %d events; the test reads %d (%v)", body, len(items), len(elements), err)
		}
		for i, el := range elements {
			obj := body[events[0][0]+el[0] : events[0][0]+el[1]]
			if want := onlyPayload(t, obj); !bytes.Equal(items[i].Payload, want) {
				t.Fatalf("accepted events[%d] of %q with payload %q; its payload is %q", i, body, items[i].Payload, want)
			}
			requireRoundTrip(t, s, items[i].Payload)
		}
	})
}

// FuzzValidateURL checks endpoint URL validation: it never panics, and a URL
// it accepts is accepted again, to the same destination, once parsed and
// written back by net/url (as a client or a later PATCH might), and written
// back the same the second time.
func FuzzValidateURL(f *testing.F) {
	for _, u := range []string{
		"https://example.com/hooks", "http://example.com:8080/a/b?x=1&y=%20#frag", "HTTPS://Example.COM/x",
		"https://user:pa%20ss@example.com/x", "https://93.184.215.14/x", "https://[2606:4700::1111]:8443/x",
		"http://127.0.0.1:9000/hook", "http://0x7f.1/", "http://2130706433/", "http://127.1./", "http://localhost/",
		"https://example.com/caf\u00e9", "https://example.com/%zz", "https://example.com/a%2Fb", "https://example.com?",
		"https://example.com#", "https://example.com/;x", "https://exa mple.com/", "ftp://example.com/", "//example.com/",
		"https:example.com", "https://example.com:/x", "https://example.com:0/", "https://[fe80::1%25eth0]/x",
		"https://example.com/" + strings.Repeat("a", 2020),
	} {
		f.Add(u, false)
		f.Add(u, true)
	}
	f.Fuzz(func(t *testing.T, raw string, allowPrivate bool) {
		s := fuzzServer(allowPrivate)
		if err := s.validateURL(raw); err != nil {
			requireClientError(t, err)
			return
		}
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatalf("accepted %q, which net/url cannot parse: %v", raw, err)
		}
		again := u.String()
		if err := s.validateURL(again); err != nil {
			t.Fatalf("accepted %q but not %q, its form written by net/url: %v", raw, again, err)
		}
		u2, err := url.Parse(again)
		if err != nil {
			t.Fatalf("%q, written by net/url, does not parse: %v", again, err)
		}
		if u2.Scheme != u.Scheme || u2.Hostname() != u.Hostname() || u2.Port() != u.Port() {
			t.Fatalf("%q goes to %s://%s port %q; %q to %s://%s port %q",
				raw, u.Scheme, u.Hostname(), u.Port(), again, u2.Scheme, u2.Hostname(), u2.Port())
		}
		if u2.String() != again {
			t.Fatalf("%q is written %q, then %q", raw, again, u2.String())
		}
	})
}

// FuzzValidateHeaders checks custom header validation with two headers: it
// never panics; what it accepts the sender accepts too (or a delivery would
// fail on it), and it crosses the wire (written as net/http writes headers,
// read back as a receiver reads them) as the same headers with the same
// values, which it accepts again.
func FuzzValidateHeaders(f *testing.F) {
	for _, h := range [][4]string{
		{"X-Team", "a", "Authorization", "Bearer x\ty"},
		{"X-Empty", "", "X-Tab", "a\tb"},
		{"webhook-id", "x", "X-Ok", "y"},
		{"Content-Type", "text/plain", "X-Ok", "y"},
		{"X Team", "x", "X-Ok", "y"},
		{"X-Team", "a\r\nX-Other: b", "X-Ok", "y"},
		{"X-Utf8", "caf\u00e9", "X-Bytes", "\xff\xfe"},
		{"!#$%&'*+-.^_`|~", "v", "0", "w"},
	} {
		f.Add(h[0], h[1], h[2], h[3])
	}
	f.Fuzz(func(t *testing.T, name1, value1, name2, value2 string) {
		headers := map[string]string{name1: value1, name2: value2}
		if name1 == name2 {
			headers = map[string]string{name1: value1}
		}
		if err := validateHeaders(headers); err != nil {
			requireClientError(t, err)
			return
		}
		for name, value := range headers {
			if err := sender.CheckHeader(name, value); err != nil {
				t.Fatalf("the API accepted header %q: %q, which the sender refuses: %v", name, value, err)
			}
		}
		h := http.Header{}
		for name, value := range headers {
			h.Set(name, value)
		}
		var wire bytes.Buffer
		if err := h.Write(&wire); err != nil {
			t.Fatalf("write headers: %v", err)
		}
		wire.WriteString("\r\n")
		read, err := textproto.NewReader(bufio.NewReader(&wire)).ReadMIMEHeader()
		if err != nil {
			t.Fatalf("read back %q: %v", wire.String(), err)
		}
		back := make(map[string]string, len(read))
		for name, values := range read {
			if len(values) != 1 {
				t.Fatalf("accepted %q, which arrives as %q: %q", headers, name, values)
			}
			back[name] = values[0]
		}
		if len(back) != len(headers) {
			t.Fatalf("accepted %d headers %q, which arrive as %d: %q", len(headers), headers, len(back), back)
		}
		for name, value := range headers {
			if got, ok := back[textproto.CanonicalMIMEHeaderKey(name)]; !ok || got != value {
				t.Fatalf("accepted %q: %q, which arrives as %q", name, value, got)
			}
		}
		if err := validateHeaders(back); err != nil {
			t.Fatalf("accepted %q, but not %q as it arrives: %v", headers, back, err)
		}
	})
}

// FuzzCursor checks list cursors: decoding any string never panics, and a
// cursor it accepts is exactly what encoding made of the store's cursor it
// decodes to, which is one a store makes (an id: printable ASCII, which
// PostgreSQL takes as text, where a NUL byte or invalid UTF-8 is an error
// and so a 500); encoding a store cursor decodes back to it.
func FuzzCursor(f *testing.F) {
	for _, c := range []string{"ep_01hx", "evt_01hwt0d7g0sjvqwh6xm4yd37rs", "x", "dlv_" + strings.Repeat("z", 26)} {
		f.Add(encodeCursor(c), c)
	}
	for _, s := range []string{"", "AAAA", "***", "bm90LWEtY3Vyc29y", "aGMxOg", "aGMxOmE=", "aGMxOgBh"} {
		f.Add(s, "")
	}
	f.Fuzz(func(t *testing.T, given, storeCursor string) {
		_, decoded, err := pageParams(url.Values{"cursor": {given}})
		switch {
		case err != nil:
			requireClientError(t, err)
		case given == "" && decoded != "":
			t.Fatalf("no cursor decoded as %q", decoded)
		case given != "" && encodeCursor(decoded) != given:
			t.Fatalf("accepted cursor %q as %q, which encodes as %q", given, decoded, encodeCursor(decoded))
		case strings.IndexFunc(decoded, func(r rune) bool { return r < '!' || r > '~' }) >= 0:
			t.Fatalf("accepted cursor %q as %q, which no store makes", given, decoded)
		}
		if storeCursor == "" {
			return
		}
		_, back, err := pageParams(url.Values{"cursor": {encodeCursor(storeCursor)}})
		if err == nil && back != storeCursor {
			t.Fatalf("store cursor %q came back as %q", storeCursor, back)
		}
	})
}
