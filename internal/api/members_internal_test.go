package api

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/heraldhooks/herald/internal/wire"
)

// TestFlatBodiesReadAsTheWalkReadsThem: the scan of a flat body's
// top-level names (objectNames) answers every body as walkMembers does,
// and finds the names itself where it can: an event's, which every ingest
// call checks.
func TestFlatBodiesReadAsTheWalkReadsThem(t *testing.T) {
	t.Parallel()
	require.NotNil(t, flatFields(reflect.TypeFor[*wire.EventRequest]()), "an event's body is flat")
	require.Nil(t, flatFields(reflect.TypeFor[*wire.BatchRequest]()), "a batch holds objects")
	for _, tc := range []struct {
		body    string
		scanned bool // objectNames tells the names without the walk
	}{
		{`{"event_type":"a","payload":{"x":1}}`, true},
		{` { "event_type" : "a" , "payload" : [1, {"a": "}"}, "\"}"] , "consumer_id":"c" } `, true},
		{`{"event_type":"a","payload":{"Payload":1,"a":1,"a":2}}`, true},
		{`{"event_type":"a","PAYLOAD":1}`, true},
		{`{"event_type":"a","payload":1,"payload":2}`, true},
		{`{"event_type":"a","Event_Type":"b"}`, true},
		{"{\n\t" + `"idempotency_key":"k,}",` + "\r\n" + `"payload":"{\\\"}"}`, true},
		{`{}`, true},
		{`{"payload":{"a":{"b":{"c":[[[]]]}}},"event_type":"t"}`, true},
		{`{"event_typ\u0065":"a","payload":1}`, false},
		{`{"\u0070ayload":1,"payload":2}`, false},
		{`null`, false},
	} {
		body := []byte(tc.body)
		var req wire.EventRequest
		require.NoError(t, json.Unmarshal(body, &req), tc.body)
		names, ok := objectNames(body)
		require.Equal(t, tc.scanned, ok, tc.body)
		walked := walkMembers(json.NewDecoder(bytes.NewReader(body)), reflect.TypeOf(&req), "")
		require.Equal(t, walked, checkMemberNames(body, &req), tc.body)
		if ok {
			require.Equal(t, walked, checkNames(names, flatFields(reflect.TypeOf(&req))), tc.body)
		}
	}
}

// BenchmarkEventBodyNames measures the check of an event body's member
// names (an event with a 1 KiB payload): the scan of its top-level names
// that ingest takes, the decoding walk that other bodies take, and the
// whole decode (decodeJSON) with the scan.
func BenchmarkEventBodyNames(b *testing.B) {
	body := []byte(`{"consumer_id":"c1","event_type":"order.created","payload":{"order_id":"o_1","pad":"` +
		strings.Repeat("x", 1024-28) + `"}}`)
	t := reflect.TypeFor[*wire.EventRequest]()
	b.Run("scan", func(b *testing.B) {
		for b.Loop() {
			if err := checkMemberNames(body, &wire.EventRequest{}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("walk", func(b *testing.B) {
		for b.Loop() {
			if err := walkMembers(json.NewDecoder(bytes.NewReader(body)), t, ""); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("decode", func(b *testing.B) {
		for b.Loop() {
			if err := decodeJSON(body, &wire.EventRequest{}); err != nil {
				b.Fatal(err)
			}
		}
	})
}
