package wire_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhooks/herald/internal/wire"
)

// keys lists the members of the JSON object b, and those that are null.
func keys(t *testing.T, b []byte) (all, nulls []string) {
	t.Helper()
	var m map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(b, &m), "%s", b)
	for k, v := range m {
		all = append(all, k)
		if string(v) == "null" {
			nulls = append(nulls, k)
		}
	}
	sort.Strings(all)
	sort.Strings(nulls)
	return all, nulls
}

func sorted(s []string) []string {
	s = append([]string(nil), s...)
	sort.Strings(s)
	return s
}

// TestNullForZero: the types whose MarshalJSON writes null for a zero
// value write exactly their fields (the null ones once, under the same
// names), null for the zero ones, and the values otherwise.
func TestNullForZero(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		zero, set any
		nulls     []string
	}{
		{
			name: "Endpoint", zero: wire.Endpoint{},
			set:   wire.Endpoint{Secret: "whsec_x", PublicKey: "whpk_x", PreviousPublicKey: "whpk_y"},
			nulls: []string{"secret", "public_key", "previous_public_key"},
		},
		{
			name: "Delivery", zero: wire.Delivery{},
			set:   wire.Delivery{LastStatusCode: 500, DeadReason: "exhausted"},
			nulls: []string{"last_status_code", "dead_reason"},
		},
		{
			name: "Attempt", zero: wire.Attempt{},
			set:   wire.Attempt{StatusCode: 200},
			nulls: []string{"status_code"},
		},
		{
			name: "APIKey", zero: wire.APIKey{Key: "hk_x"},
			set:   wire.APIKey{Key: "hk_x", ConsumerID: "c1"},
			nulls: []string{"consumer_id"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			fields := sorted(wire.FieldNames(reflect.TypeOf(tc.zero)))
			b, err := json.Marshal(tc.zero)
			require.NoError(t, err)
			all, nulls := keys(t, b)
			require.Equal(t, fields, all)
			for _, n := range tc.nulls {
				require.Contains(t, nulls, n)
			}
			b, err = json.Marshal(tc.set)
			require.NoError(t, err)
			all, nulls = keys(t, b)
			require.Equal(t, fields, all)
			for _, n := range tc.nulls {
				require.NotContains(t, nulls, n)
			}
		})
	}
	t.Run("DecodesNullAsZero", func(t *testing.T) {
		t.Parallel()
		var d wire.Delivery
		require.NoError(t, json.Unmarshal([]byte(`{"id":"dlv_1","last_status_code":null,"dead_reason":null}`), &d))
		require.Equal(t, wire.Delivery{ID: "dlv_1"}, d)
	})
	t.Run("APIKeyLeavesOutAnEmptyKey", func(t *testing.T) {
		t.Parallel()
		b, err := json.Marshal(wire.APIKey{ID: "key_1"})
		require.NoError(t, err)
		all, _ := keys(t, b)
		require.NotContains(t, all, "key")
	})
}

// TestMarshalKeepsHTML: a MarshalJSON of this package does not escape <, >
// and &, so the server's encoder, which does not either, writes them as
// they are; encoding/json's default still escapes them.
func TestMarshalKeepsHTML(t *testing.T) {
	t.Parallel()
	d := wire.Delivery{LastError: "<b>&</b>"}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	require.NoError(t, enc.Encode(d))
	require.Contains(t, buf.String(), `"last_error":"<b>&</b>"`)
	b, err := json.Marshal(d)
	require.NoError(t, err)
	require.Contains(t, string(b), `"last_error":"\u003cb\u003e\u0026\u003c/b\u003e"`)
}

func TestDuration(t *testing.T) {
	t.Parallel()
	t.Run("RoundTrip", func(t *testing.T) {
		t.Parallel()
		b, err := json.Marshal([]wire.Duration{0, wire.Duration(5 * time.Minute), wire.Duration(90 * time.Second)})
		require.NoError(t, err)
		require.Equal(t, `["0s","5m","1m30s"]`, string(b))
		var back []wire.Duration
		require.NoError(t, json.Unmarshal(b, &back))
		require.Equal(t, wire.Duration(90*time.Second), back[2])
		require.Equal(t, "5m", back[1].String())
	})
	type body struct {
		Timeout *wire.Duration `json:"timeout"`
		Policy  *struct {
			Base wire.Duration `json:"base"`
		} `json:"policy"`
		Schedule []wire.Duration `json:"schedule"`
	}
	for _, tc := range []struct {
		name, body, field string
		typ               reflect.Type
		value             string
	}{
		{"NotADuration", `{"timeout":"ten seconds"}`, "timeout", wire.DurationType, `string "ten seconds"`},
		{"Nested", `{"policy":{"base":"x"}}`, "policy.base", wire.DurationType, `string "x"`},
		{"InAList", `{"schedule":["1s",null]}`, "schedule", wire.DurationType, "null"},
		{"NotAString", `{"timeout":10}`, "timeout", reflect.TypeFor[string](), "number"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var b body
			err := json.Unmarshal([]byte(tc.body), &b)
			var typ *json.UnmarshalTypeError
			require.True(t, errors.As(err, &typ), "%v", err)
			require.Equal(t, tc.field, typ.Field)
			require.Equal(t, tc.typ, typ.Type)
			require.Equal(t, tc.value, typ.Value)
		})
	}
	t.Run("NullPointerIsAbsent", func(t *testing.T) {
		t.Parallel()
		var b body
		require.NoError(t, json.Unmarshal([]byte(`{"timeout":null}`), &b))
		require.Nil(t, b.Timeout)
	})
}

func TestFieldNames(t *testing.T) {
	t.Parallel()
	require.Equal(t, []string{"status", "dry_run", "rate"}, wire.FieldNames(reflect.TypeFor[wire.EventReplayRequest]()))
	require.NotContains(t, wire.FieldNames(reflect.TypeFor[*wire.EndpointRequest]()), "Reset")
}
