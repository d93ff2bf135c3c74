package cli_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestEndpointFilter: --filter sets an endpoint's filter on create and
// update ("" removes it), an invalid one is refused with its position,
// and test-filter shows which of the consumer's events a filter passes.
func TestEndpointFilter(t *testing.T) {
	t.Parallel()
	e := setupAPI(t)
	out := e.run("endpoints", "create", "--url", "https://example.com/hooks", "--consumer", "c1",
		"--filter", "payload.amount > 1000")
	id := field(t, out, "id")
	require.Equal(t, "payload.amount > 1000", field(t, out, "filter"))

	e.run("events", "send", "--consumer", "c1", "--type", "order.paid", "--payload", `{"amount": 5}`)
	e.run("events", "send", "--consumer", "c1", "--type", "order.paid", "--payload", `{"amount": 5000}`)
	e.run("events", "send", "--consumer", "c1", "--type", "order.refunded", "--payload", `{}`)

	out = e.run("endpoints", "test-filter", id)
	require.Contains(t, out, "1 of 3 events pass")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Regexp(t, `^EVENT\s+TYPE\s+PASS\s+ERROR`, lines[0])
	require.Regexp(t, `^evt_\S+\s+order.refunded\s+no\s+no such key`, lines[1], "newest first, a missing field an error")
	require.Regexp(t, `^evt_\S+\s+order.paid\s+yes\s+-`, lines[2])
	require.Regexp(t, `^evt_\S+\s+order.paid\s+no\s+-`, lines[3])

	out = e.run("endpoints", "test-filter", id, "--filter", "event_type == 'order.refunded'")
	require.Contains(t, out, "1 of 3 events pass")

	err := e.fail("endpoints", "update", id, "--filter", "payload.amount >")
	require.ErrorContains(t, err, "invalid_filter")
	require.ErrorContains(t, err, "1:17")

	out = e.run("endpoints", "update", id, "--filter", "payload.amount > 1")
	require.Equal(t, "payload.amount > 1", field(t, out, "filter"))
	out = e.run("endpoints", "update", id, "--filter", "")
	require.Equal(t, "none", field(t, out, "filter"))
	require.Contains(t, e.run("endpoints", "test-filter", id), "3 of 3 events pass")
}
