package herald

import (
	"fmt"
	"regexp"
	"strings"
)

// refusedDestination ends the first clause of an attempt's error when
// Herald refused to connect to its destination (a loopback, private,
// link-local or otherwise non-public address, while private networks are
// not allowed).
const refusedDestination = " is a private or loopback address;"

// DestinationNotAllowed is what the endpoint's consumer reads of such an
// error (ConsumerError).
const DestinationNotAllowed = "destination not allowed"

// RefusedDestinationError is an attempt's error for a destination Herald
// refused: it names the address (an IP address, or the host name refused
// before any lookup) and the flag that allows it, for the operator.
func RefusedDestinationError(addr string) string {
	return fmt.Sprintf("destination %s%s start Herald with --allow-private-networks (HERALD_ALLOW_PRIVATE_NETWORKS=true) to allow it",
		addr, refusedDestination)
}

// ConsumerError is an attempt's error as the endpoint's consumer reads it
// (a consumer key's API calls, the portal, the herald.* notifications): a
// refused destination is DestinationNotAllowed, without the address, which
// would tell a consumer what a name resolves to inside the operator's
// network; a failed lookup loses the resolver's address; any other error
// is as it was recorded. The operator's views and logs keep the whole
// error.
func ConsumerError(msg string) string {
	if strings.HasPrefix(msg, "destination ") && strings.Contains(msg, refusedDestination) {
		return DestinationNotAllowed
	}
	return resolverAddress.ReplaceAllString(msg, "lookup $1:")
}

// resolverAddress finds, in a failed lookup's error, the address of the
// resolver asked ("lookup hooks.example on 10.0.0.2:53: no such host"):
// the operator's, which its consumers need not know.
var resolverAddress = regexp.MustCompile(`lookup (\S+) on \S+:`)
