package pgstore

import (
	"cmp"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// The endpoint cache: ingest from remembered endpoints. An ingest reads its consumers'
// enabled endpoints before it can fan its events out, which costs it a
// round trip of its own: the endpoints read and the events insert, then
// the deliveries insert and the commit. Endpoints change rarely beside
// the events sent to them, so a node remembers, for each consumer it
// ingested for lately, the endpoints it read (whole, with the version of
// each: its id and config_version, which every change of an endpoint's
// configuration, secrets or enabled state moves, whatever the clock:
// migration 0022), and an ingest whose consumers it all remembers is
// written in one round trip: the events
// insert, the deliveries insert fanned out from what it remembers, and
// the commit, in one batch.
//
// The batch checks in the database, in the statement that takes the
// queue's locks (before the deliveries insert, and after the events
// insert, as the read it replaces was before it), that each consumer's
// enabled endpoints are still the ones remembered; if not,
// herald_endpoints_changed (migration 0022) fails the statement, the
// transaction rolls back, and the ingest is written again the usual way,
// its read remembered. So an ingest sees, as when it reads them, every
// endpoint change committed before its statement began: an endpoint
// created, disabled or deleted, on this node or another, before an ingest
// call began is in its fan-out or not, as it should.
//
// What the node remembers of an endpoint's health (its breaker, its
// slow-down) is what ingest leasing plans with (leasing.go); health writes
// do not move config_version, and the lock that leases checks the health on
// the row it locks, so a remembered health that has changed only makes an
// ingest queue what it could have leased. A remembered read is used for
// cacheTTL at most, so that such a plan catches up.

// cacheTTL is how long a node fans out from endpoints it read.
const cacheTTL = time.Second

// maxCachedConsumers bounds the consumers a node remembers the endpoints of;
// past it, it forgets them all and starts again.
const maxCachedConsumers = 10000

// endpointsChanged is the SQLSTATE of herald_endpoints_changed.
const endpointsChanged = "HE001"

// errEndpointsChanged is an ingest written from remembered endpoints that
// were no longer current: it was rolled back, and is to be written again
// with its endpoints read.
var errEndpointsChanged = errors.New("endpoints changed since they were read")

// cachedEndpoints are the enabled endpoints of one consumer as a node
// read them, oldest first, read whole.
type cachedEndpoints struct {
	matchers []matcher
	// version is what endpointsVersionSQL gives for them.
	version string
	readAt  time.Time
}

// endpointCache is what a node remembers of its consumers' endpoints.
// Its zero value is ready for use.
type endpointCache struct {
	mu         sync.Mutex
	byConsumer map[string]*cachedEndpoints
	// ttl is how long a read is used: cacheTTL if zero (tests set
	// it before any ingest).
	ttl time.Duration
}

// recall returns the remembered endpoints of every consumer, with their
// versions in the order of consumers, or ok false if it lacks one of them
// or one was read more than cacheTTL ago.
func (m *endpointCache) recall(consumers []string, now time.Time) (eps map[string][]matcher, versions []string, ok bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	eps = make(map[string][]matcher, len(consumers))
	versions = make([]string, len(consumers))
	for i, c := range consumers {
		r := m.byConsumer[c]
		if r == nil || now.Sub(r.readAt) > cmp.Or(m.ttl, cacheTTL) {
			return nil, nil, false
		}
		eps[c], versions[i] = r.matchers, r.version
	}
	return eps, versions, true
}

// remember keeps the endpoints read whole for consumers (those without
// one have none), read at readAt.
func (m *endpointCache) remember(consumers []string, eps map[string][]matcher, readAt time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.byConsumer == nil || len(m.byConsumer)+len(consumers) > maxCachedConsumers {
		m.byConsumer = make(map[string]*cachedEndpoints, len(consumers))
	}
	for _, c := range consumers {
		ms := eps[c]
		m.byConsumer[c] = &cachedEndpoints{matchers: ms, version: endpointsVersion(ms), readAt: readAt}
	}
}

// forget drops what is remembered of consumers.
func (m *endpointCache) forget(consumers []string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, c := range consumers {
		delete(m.byConsumer, c)
	}
}

// endpointsVersion is the version of endpoints read whole, oldest first,
// as endpointsVersionSQL writes it: each one's id and config_version.
func endpointsVersion(ms []matcher) string {
	var b strings.Builder
	for i, m := range ms {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%s@%d", m.id, m.configVersion)
	}
	return b.String()
}

// endpointsVersionSQL is the version of consumer c's enabled endpoints
// (endpointsVersion), in the order enabledEndpointsWholeSQL reads them.
const endpointsVersionSQL = `coalesce((
	SELECT string_agg(e.id || '@' || e.config_version, ',' ORDER BY e.id)
	FROM endpoints e
	WHERE e.enabled AND e.consumer_id = c.consumer_id), '')`

// endpointsCheckSQL is a column that fails its statement with
// endpointsChanged if the enabled endpoints of one of the consumers in
// the parameter named consumers are no longer the versions in the one
// named versions.
func endpointsCheckSQL(consumers, versions string) string {
	return `(SELECT count(herald_endpoints_changed(c.consumer_id))
	FROM unnest(` + consumers + `::text[], ` + versions + `::text[]) AS c(consumer_id, version)
	WHERE c.version IS DISTINCT FROM ` + endpointsVersionSQL + `)`
}

// isEndpointsChanged says whether err is herald_endpoints_changed's.
func isEndpointsChanged(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == endpointsChanged
}

// ingestLockCheckedSQL is ingestLockSQL checking, as well, that the
// endpoints of the consumers in $3 are the versions in $4.
var ingestLockCheckedSQL = ingestLockSQL + ", " + endpointsCheckSQL("$3", "$4")

// ingestLeasingCheckedSQL is ingestLeasingSQL checking, as well, that the
// endpoints of the consumers in $7 are the versions in $8.
var ingestLeasingCheckedSQL = ingestLeasingSQL + ", " + endpointsCheckSQL("$7", "$8")

// endpointsOnlyCheckSQL checks, for an ingest from remembered endpoints
// that makes no delivery, that the endpoints of the consumers in $1 are
// the versions in $2.
var endpointsOnlyCheckSQL = "SELECT " + endpointsCheckSQL("$1", "$2")

// insertedOnly makes a deliveries insert keep only the deliveries of
// events inserted, by the subquery after its unnest named u.
const insertedOnly = "\n\tWHERE EXISTS (SELECT 1 FROM events x WHERE x.id = u.event_id)"

// insertDeliveriesKeyedSQL and insertLeasingDeliveriesKeyedSQL are the
// deliveries inserts for events some of which an idempotency key taken may
// have kept out.
var (
	insertDeliveriesKeyedSQL = mustReplace(insertDeliveriesSQL,
		"consumer_id, event_type), n\n", "consumer_id, event_type), n"+insertedOnly+"\n")
	insertLeasingDeliveriesKeyedSQL = mustReplace(insertLeasingDeliveriesSQL,
		"consumer_id, event_type, ord)\n", "consumer_id, event_type, ord)"+insertedOnly+"\n")
)

// mustReplace is s with its one old replaced by new; it panics if s does
// not hold old exactly once.
func mustReplace(s, old, new string) string {
	if strings.Count(s, old) != 1 {
		panic(fmt.Sprintf("pgstore: %q is not once in a statement", old))
	}
	return strings.Replace(s, old, new, 1)
}

// deliveriesSQL is the deliveries insert for the events of the ingest c
// checks: keyed when they were written in the same batch and one has an
// idempotency key, else all.
func (c *endpointsCheck) deliveriesSQL(all, keyed string) string {
	if c == nil || !c.keyed {
		return all
	}
	return keyed
}
