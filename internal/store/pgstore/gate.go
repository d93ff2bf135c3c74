package pgstore

// An endpoint's gate: a transaction-level advisory lock per endpoint
// (class gateClass, "HRLG"; the second key the hash of schema and
// endpoint) that the writers deciding on an endpoint's health, state or
// settings (the breaker's path, disabling, deleting, a change of settings
// or secrets) take exclusively, waiting, in id order, before they lock its
// row FOR UPDATE; and that leasing ingests and claims try to take shared,
// leaving the endpoint out when they cannot. Their row locks (FOR KEY
// SHARE, FOR NO KEY UPDATE) do not conflict with one another, and a row
// lock that conflicts with no holder is granted at once, even to a
// transaction that comes after a FOR UPDATE writer began to wait: on a
// busy endpoint, ingests and claims overlapping one another would keep
// that writer waiting as long as they come. An advisory lock that is
// waited for is refused to later tries of a conflicting mode, so the
// writer waits only for those under way.
const gateClass = 1213353031

// gateTryShared is the condition that tries the gate of the endpoint
// whose id is the expression id, shared.
func gateTryShared(id string) string {
	return "pg_try_advisory_xact_lock_shared(1213353031, hashtext(current_schema() || ':' || " + id + "))"
}

// gateEndpointsSQL takes the gates of the endpoints in $1 exclusively, in
// id order, waiting for the ingests and claims under way.
const gateEndpointsSQL = `
SELECT count(pg_advisory_xact_lock(1213353031, hashtext(current_schema() || ':' || g.id)))
FROM (SELECT DISTINCT u.id FROM unnest($1::text[]) AS u(id) ORDER BY u.id) AS g`

// gateOutcomeEndpointsSQL is gateEndpointsSQL for the endpoints of the
// deliveries in $1.
const gateOutcomeEndpointsSQL = `
SELECT count(pg_advisory_xact_lock(1213353031, hashtext(current_schema() || ':' || g.id)))
FROM (SELECT DISTINCT endpoint_id AS id FROM deliveries WHERE id = ANY($1::text[]) ORDER BY 1) AS g`
