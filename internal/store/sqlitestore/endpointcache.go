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

// The endpoint cache: the endpoints an ingest group that may lease reads
// whole (fanOutWholeQuery) are kept, by consumer, while endpoints_version
// (migration 0018) stays as it was when they were read: every change of
// an endpoint's row, by any process, moves it, and the kept endpoints are
// dropped. A group reads the count once in its transaction, which holds
// SQLite's one writer, so what it finds kept is what the rows hold until
// it commits.

// maxCachedConsumers bounds the consumers whose endpoints are kept: past it
// the cache starts afresh.
const maxCachedConsumers = 10000

// endpointsVersionQuery reads the count.
const endpointsVersionQuery = `SELECT value FROM sequences WHERE name = 'endpoints_version'`

// cachedEndpoint is a row of fanOutWholeQuery: the endpoint with its secrets
// as stored, and its token bucket.
type cachedEndpoint struct {
	ep     herald.Endpoint
	sealed bool
	bucket ratelimit.Bucket
}

// endpointCache holds the endpoints read at one endpoints_version. The
// kept endpoints are never changed once put: a group copies what it
// changes.
type endpointCache struct {
	mu         sync.Mutex
	version    int64
	byConsumer map[string][]cachedEndpoint
}

// sync reads endpoints_version through stmt (bound to the group's
// transaction) and drops what was kept at another. It reports false when
// the count is missing (a database not migrated this far): nothing is
// kept then.
func (k *endpointCache) sync(ctx context.Context, stmt *sql.Stmt) (bool, error) {
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
		k.version, k.byConsumer = version, map[string][]cachedEndpoint{}
	}
	return true, nil
}

// get returns consumer's enabled endpoints as kept, if they are.
func (k *endpointCache) get(consumer string) ([]cachedEndpoint, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	eps, ok := k.byConsumer[consumer]
	return eps, ok
}

// put keeps consumer's enabled endpoints, read in the transaction that
// synced the cache.
func (k *endpointCache) put(consumer string, eps []cachedEndpoint) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if len(k.byConsumer) >= maxCachedConsumers {
		clear(k.byConsumer)
	}
	k.byConsumer[consumer] = eps
}
