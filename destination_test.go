package herald_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/heraldhooks/herald"
)

// TestConsumerError: what an attempt's error tells the endpoint's consumer
// of the operator's network: nothing of a refused destination's address,
// nor of the resolver a lookup asked; other errors as recorded.
func TestConsumerError(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		herald.RefusedDestinationError("10.20.30.40"):                         herald.DestinationNotAllowed,
		herald.RefusedDestinationError("localhost"):                           herald.DestinationNotAllowed,
		"dial tcp: lookup hooks.example on 10.0.0.2:53: no such host":         "dial tcp: lookup hooks.example: no such host",
		"dial tcp: lookup hooks.example on [fd00::53]:53: server misbehaving": "dial tcp: lookup hooks.example: server misbehaving",
		"HTTP 500":                     "HTTP 500",
		"timed out after 10s":          "timed out after 10s",
		"destination host unreachable": "destination host unreachable",
		"dial tcp 93.184.216.34:443: connect: connection refused": "dial tcp 93.184.216.34:443: connect: connection refused",
	} {
		require.Equal(t, want, herald.ConsumerError(in), in)
	}
}
