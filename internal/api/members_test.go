package api_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestMemberNames checks that request bodies are read by the names the API
// documents, spelled exactly, each once: encoding/json alone took "PAYLOAD"
// for payload and kept the last of two members of one name.
func TestMemberNames(t *testing.T) {
	t.Parallel()
	e := setup(t)
	for _, tc := range []struct {
		name, path, body, code, msg string
	}{
		{"CaseVariantOfAField", "/v1/events", `{"event_type":"a","PAYLOAD":1}`, "unknown_field",
			`unknown field "PAYLOAD": names are case-sensitive; the field is "payload"`},
		{"NameGivenTwice", "/v1/events", `{"event_type":"a","payload":1,"payload":2}`, "invalid_json",
			`the request body has "payload" twice; give each member once`},
		{"BatchEventCaseVariant", "/v1/events/batch", `{"events":[{"event_type":"a","payload":1},{"Event_Type":"b","payload":1}]}`, "unknown_field",
			`events[1]: unknown field "Event_Type"`},
		{"BatchEventNameTwice", "/v1/events/batch", `{"events":[{"event_type":"a","event_type":"b","payload":1}]}`, "invalid_json",
			`events[0]: has "event_type" twice`},
		{"BatchEventsTwice", "/v1/events/batch", `{"events":[],"events":[{"event_type":"a","payload":1}]}`, "invalid_json",
			`the request body has "events" twice`},
		{"NestedCaseVariant", "/v1/endpoints", `{"url":"https://example.com","retry_policy":{"Type":"exponential","base":"1s","factor":2,"cap":"1h","attempts":3}}`, "unknown_field",
			`unknown field "Type": names are case-sensitive; the field is "type"`},
		{"HeaderGivenTwice", "/v1/endpoints", `{"url":"https://example.com","headers":{"X-Team":"a","X-Team":"b"}}`, "invalid_json",
			`the request body has "X-Team" twice in headers`},
		{"URLCaseVariant", "/v1/endpoints", `{"URL":"https://example.com"}`, "unknown_field", `the field is "url"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			msg := e.in(t).do("POST", tc.path, tc.body).apiErr(http.StatusBadRequest, tc.code)
			require.Contains(t, msg, tc.msg)
		})
	}

	t.Run("PayloadMembersAreTheClients", func(t *testing.T) {
		t.Parallel()
		// The payload is kept as its bytes: what it holds is not Herald's to
		// judge, repeated names and all.
		e := e.in(t)
		payload := `{"Payload":1,"a":1,"a":2}`
		ev := e.send("c1", "order.created", payload)
		var got eventOut
		e.do("GET", "/v1/events/"+ev.ID, nil).must(http.StatusOK, &got)
		require.Equal(t, payload, string(got.Payload))
	})
}
