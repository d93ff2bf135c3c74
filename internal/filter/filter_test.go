package filter

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestCompile(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, src, want string // want: "" compiles, else a part of the refusal
	}{
		{"Comparison", "payload.amount > 1000 && payload.currency == 'EUR'", ""},
		{"EventTypeAndConsumer", "event_type.startsWith('order.') && consumer_id == 'acme'", ""},
		{"OneLoopOverThePayload", "payload.items.exists(i, i.sku == 'x')", ""},
		{"SyntaxErrorNamesThePosition", "payload.amount >", "1:17: "},
		{"UnknownVariable", "amount > 3", "1:1: undeclared reference to 'amount'"},
		{"NotABool", "payload.amount + 1", "must be a bool"},
		{"StringNotBool", "event_type", "must be a bool"},
		{"NestedLoopsTooCostly", "payload.a.all(x, payload.b.all(y, payload.c.exists(z, x == y && y == z)))", "too costly"},
		{"SecondLine", "true &&\n  payload.x ==", "2:"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p, err := Compile(tc.src)
			if tc.want == "" {
				require.NoError(t, err)
				require.Equal(t, tc.src, p.Source())
				return
			}
			var fe *Error
			require.True(t, errors.As(err, &fe), "%v", err)
			require.Contains(t, fe.Error(), tc.want)
		})
	}
}

func TestDecide(t *testing.T) {
	t.Parallel()
	p, err := Compile("payload.amount > 1000 && payload.currency == 'EUR'")
	require.NoError(t, err)
	for _, tc := range []struct {
		name, payload, want string
	}{
		{"Passes", `{"amount": 1500, "currency": "EUR"}`, ""},
		{"FalseSkips", `{"amount": 10, "currency": "EUR"}`, ReasonFilter},
		{"MissingFieldIsAnError", `{"currency": "EUR"}`, ReasonFilterError},
		{"WrongTypeIsAnError", `{"amount": "lots", "currency": "EUR"}`, ReasonFilterError},
		{"NotJSONIsAnError", `not json`, ReasonFilterError},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ev := &Event{EventType: "order.paid", ConsumerID: "acme", Payload: []byte(tc.payload)}
			require.Equal(t, tc.want, Decide(p, ev))
		})
	}
	require.Empty(t, Decide(nil, &Event{Payload: []byte("not json")}), "no filter: no parse, no skip")
}

func TestRuntimeCostLimitStopsAnEvaluation(t *testing.T) {
	t.Parallel()
	// One loop passes the estimate (lists taken as 1,000 items); a payload
	// list far longer makes the run exceed MaxRuntimeCost.
	p, err := Compile("payload.items.all(i, i == 'a' || i == 'b' || i == 'c')")
	require.NoError(t, err)
	big := []byte(`{"items":[`)
	for i := range 50_000 {
		if i > 0 {
			big = append(big, ',')
		}
		big = append(big, `"a"`...)
	}
	big = append(big, "]}"...)
	_, err = p.Eval(&Event{Payload: big})
	require.ErrorContains(t, err, "cost")
	require.Equal(t, ReasonFilterError, Decide(p, &Event{Payload: big}))
}

func TestCacheCompilesOnceAndKeepsBrokenFiltersAsErrors(t *testing.T) {
	t.Parallel()
	var c Cache
	require.Nil(t, c.Program(""))
	p := c.Program("payload.x == 1")
	require.Same(t, p, c.Program("payload.x == 1"))
	broken := c.Program("payload.x ==")
	require.Equal(t, ReasonFilterError, Decide(broken, &Event{Payload: []byte(`{"x":1}`)}))
}

// BenchmarkDecide is one filter on one event, the payload parsed once for
// the event (as at fan-out, where the parse is shared by the endpoints).
func BenchmarkDecide(b *testing.B) {
	p, err := Compile("payload.amount > 1000 && payload.currency == 'EUR'")
	require.NoError(b, err)
	payload := []byte(`{"id":"ord_123","amount":1500,"currency":"EUR","customer":{"id":"cus_9","country":"FR"},"items":[{"sku":"a","qty":1},{"sku":"b","qty":2}]}`)
	b.Run("ParseAndEval", func(b *testing.B) {
		for b.Loop() {
			if Decide(p, &Event{EventType: "order.paid", ConsumerID: "acme", Payload: payload}) != "" {
				b.Fatal("skipped")
			}
		}
	})
	b.Run("EvalParsed", func(b *testing.B) {
		ev := &Event{EventType: "order.paid", ConsumerID: "acme", Payload: payload}
		for b.Loop() {
			if Decide(p, ev) != "" {
				b.Fatal("skipped")
			}
		}
	})
}

// BenchmarkCompile is what a save, a filter test or a node's first sight
// of a filter costs: the environment built and the expression compiled
// and cost-checked.
func BenchmarkCompile(b *testing.B) {
	for b.Loop() {
		if _, err := Compile("payload.amount > 1000 && payload.currency == 'EUR'"); err != nil {
			b.Fatal(err)
		}
	}
}
