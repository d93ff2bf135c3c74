package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"

	"github.com/heraldhooks/herald"
	"github.com/heraldhooks/herald/internal/ratelimit"
)

// The endpoints an ingest group that may lease reads whole
// (fanOutWholeQuery) are kept, by consumer, while endpoints_version
// (migration 0018) stays as it was when they were read: every change of
// an endpoint's row, by any process, moves it, and the kept endpoints are
// dropped. A group reads the count once in its transaction, which holds
// SQLite's one writer, so what it finds kept is what the rows hold until
// it commits.

// maxKeptConsumers bounds the consumers whose endpoints are kept: past it
// the keep starts afresh.
const maxKeptConsumers = 10000

// endpointsVersionQuery reads the count.
const endpointsVersionQuery = `SELECT value FROM sequences WHERE name = 'endpoints_version'`

// keptEndpoint is a row of fanOutWholeQuery: the endpoint with its secrets
// as stored, and its token bucket.
type keptEndpoint struct {
	ep     herald.Endpoint
	sealed bool
	bucket ratelimit.Bucket
}

// endpointKeep holds the endpoints read at one endpoints_version. The
// kept endpoints are never changed once put: a group copies what it
// changes.
type endpointKeep struct {
	mu         sync.Mutex
	version    int64
	byConsumer map[string][]keptEndpoint
}

// sync reads endpoints_version through stmt (bound to the group's
// transaction) and drops what was kept at another. It reports false when
// the count is missing (a database not migrated this far): nothing is
// kept then.
func (k *endpointKeep) sync(ctx context.Context, stmt *sql.Stmt) (bool, error) {
	var version int64
	err := stmt.QueryRowContext(ctx).Scan(&version)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("read endpoints version: %w", err)
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.byConsumer == nil || k.version != version {
		k.version, k.byConsumer = version, map[string][]keptEndpoint{}
	}
	return true, nil
}

// get returns consumer's enabled endpoints as kept, if they are.
func (k *endpointKeep) get(consumer string) ([]keptEndpoint, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	eps, ok := k.byConsumer[consumer]
	return eps, ok
}

// put keeps consumer's enabled endpoints, read in the transaction that
// synced the keep.
func (k *endpointKeep) put(consumer string, eps []keptEndpoint) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if len(k.byConsumer) >= maxKeptConsumers {
		clear(k.byConsumer)
	}
	k.byConsumer[consumer] = eps
}
