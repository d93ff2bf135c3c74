package schema

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/heraldhooks/herald/internal/clock"
	"github.com/heraldhooks/herald/internal/logkey"
	"github.com/heraldhooks/herald/internal/store"
)

// DefaultRefresh is how often at most a node reads the catalog's generation
// (one row) to learn of changes made on other nodes: the longest a schema
// written through one node goes unenforced on another is about this long.
const DefaultRefresh = time.Second

// CacheConfig wires a Cache.
type CacheConfig struct {
	// Store holds the catalog; required.
	Store store.EventTypeStore
	// Clock decides when the cache is due a look at the generation.
	// Default clock.Real.
	Clock clock.Clock
	// Refresh is how long a look at the generation holds (DefaultRefresh
	// when zero).
	Refresh time.Duration
	// Logger receives schemas that no longer compile and failed reads.
	Logger *slog.Logger
}

// Cache holds one node's compiled schemas of the catalog, for ingest to
// check payloads against. It is safe for concurrent use.
//
// Staying current: the store moves the catalog's generation on with every
// write, on any node. The cache reads the generation when Refresh has
// passed since its last look (by the caller that finds it due; the others
// go on with what it has meanwhile), and reloads the catalog only when the
// generation moved. A write made through this node calls Invalidate, so
// the next check on this node looks at once. A change made through
// another node is thus enforced here within Refresh plus one read of the
// generation; one made here, from the next check on.
//
// When the catalog cannot be read, the cache keeps what it has and looks
// again at the next check; with nothing loaded yet, Check answers the
// error. A stored schema that no longer compiles (it compiled when it was
// written) is logged and its type accepted unchecked: failing open, since
// refusing every event of a type for Herald's own fault would lose them.
type Cache struct {
	store   store.EventTypeStore
	clock   clock.Clock
	refresh time.Duration
	log     *slog.Logger

	snap  atomic.Pointer[snapshot]
	dirty atomic.Bool
	mu    sync.Mutex // held while the catalog is read
}

// snapshot is the catalog as of one generation.
type snapshot struct {
	generation int64
	lookedAt   time.Time
	// schemas holds the types that have a schema; Schema nil where it
	// failed to compile.
	schemas map[string]compiled
}

type compiled struct {
	raw    string
	schema *Schema
}

// NewCache returns a cache that loads the catalog at its first check.
func NewCache(cfg CacheConfig) *Cache {
	c := &Cache{store: cfg.Store, clock: cfg.Clock, refresh: cfg.Refresh, log: cfg.Logger}
	if c.clock == nil {
		c.clock = clock.Real{}
	}
	if c.refresh <= 0 {
		c.refresh = DefaultRefresh
	}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	return c
}

// MismatchError is a payload that breaks its event type's schema.
type MismatchError struct {
	EventType string
	Violation *Violation
}

func (e *MismatchError) Error() string {
	return fmt.Sprintf("payload does not match event type %s: %v", e.EventType, e.Violation)
}

// Check checks payload, which must be JSON, against the schema of
// eventType: nil when it matches or the type has no schema (or no catalog
// entry), a *MismatchError when it breaks the schema, another error when
// the catalog could not be read at all.
func (c *Cache) Check(ctx context.Context, eventType string, payload []byte) error {
	snap, err := c.current(ctx)
	if err != nil {
		return err
	}
	sc, ok := snap.schemas[eventType]
	if !ok || sc.schema == nil {
		return nil
	}
	if err := sc.schema.Check(payload); err != nil {
		v, ok := err.(*Violation)
		if !ok {
			return err
		}
		return &MismatchError{EventType: eventType, Violation: v}
	}
	return nil
}

// Invalidate makes the next check look at the catalog's generation: the
// API calls it after each catalog write it makes.
func (c *Cache) Invalidate() { c.dirty.Store(true) }

// current is the snapshot to check against, looked at again when due.
func (c *Cache) current(ctx context.Context) (*snapshot, error) {
	snap := c.snap.Load()
	if snap != nil && !c.dirty.Load() && c.clock.Now().Sub(snap.lookedAt) < c.refresh {
		return snap, nil
	}
	return c.look(ctx)
}

// lookTimeout bounds one look at the catalog.
const lookTimeout = 10 * time.Second

// look reads the generation and, when it moved, the whole catalog. One
// caller looks at a time; those who waited find its snapshot fresh. The
// look is the node's, not the caller's: a caller that goes away does not
// cut it short for the others.
func (c *Cache) look(ctx context.Context) (*snapshot, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), lookTimeout)
	defer cancel()
	now := c.clock.Now()
	old := c.snap.Load()
	if old != nil && !c.dirty.Load() && now.Sub(old.lookedAt) < c.refresh {
		return old, nil
	}
	// Cleared before the read: an Invalidate that comes during it makes
	// the next check look again.
	c.dirty.Store(false)
	// The generation is read before the catalog: a write that commits in
	// between is then read with a generation older than its own, and the
	// next look reloads. Read the other way round, a snapshot could carry
	// a write's generation without its contents, and keep them out for
	// good.
	gen, err := c.store.EventTypeGeneration(ctx)
	if err == nil && old != nil && gen == old.generation {
		fresh := *old
		fresh.lookedAt = now
		c.snap.Store(&fresh)
		return &fresh, nil
	}
	var schemas map[string]compiled
	if err == nil {
		schemas, err = c.load(ctx, old)
	}
	if err != nil {
		if old != nil {
			c.log.Warn("could not read the event type catalog; checking payloads against the copy held", logkey.Error, err)
			return old, nil
		}
		return nil, fmt.Errorf("read the event type catalog: %w", err)
	}
	snap := &snapshot{generation: gen, lookedAt: now, schemas: schemas}
	c.snap.Store(snap)
	return snap, nil
}

// load reads every entry and compiles the schemas, reusing those of old
// whose text did not change.
func (c *Cache) load(ctx context.Context, old *snapshot) (map[string]compiled, error) {
	out := map[string]compiled{}
	cursor := ""
	for {
		page, err := c.store.EventTypeList(ctx, &store.EventTypeListParams{Cursor: cursor, Limit: store.MaxListLimit})
		if err != nil {
			return nil, err
		}
		for _, e := range page.Items {
			if e.Schema == nil {
				continue
			}
			raw := string(e.Schema)
			if old != nil {
				if prev, ok := old.schemas[e.Name]; ok && prev.raw == raw {
					out[e.Name] = prev
					continue
				}
			}
			s, err := Compile(e.Name, e.Schema)
			if err != nil {
				c.log.Error("a stored event type schema does not compile; its events are accepted unchecked",
					logkey.EventType, e.Name, logkey.Error, err)
			}
			out[e.Name] = compiled{raw: raw, schema: s}
		}
		if cursor = page.NextCursor; cursor == "" {
			return out, nil
		}
	}
}
