package verify

import (
	"container/list"
	"context"
	"sync"
	"time"
)

// Defaults of MemoryDeduper.
const (
	// DefaultDedupeEntries bounds the ids a MemoryDeduper keeps: about
	// 100 bytes each, so some 10 MB at most.
	DefaultDedupeEntries = 100_000
	// DefaultDedupeTTL is how long an id is remembered: longer than Herald's
	// default retry schedule (about 35 hours), so every retry of a webhook
	// that was handled is recognised.
	DefaultDedupeTTL = 48 * time.Hour
)

// MemoryDeduper is a Deduper that keeps ids in memory, bounded in number and
// in time: an id is forgotten TTL after it was marked, or earlier when more
// than MaxEntries ids are kept (the oldest go first). It suits a receiver
// that runs as one process; its memory does not survive a restart, after
// which a retry is handled again (delivery is at least once).
//
// The zero value is ready to use with the defaults. Set the fields before
// first use and do not copy a MemoryDeduper after that.
type MemoryDeduper struct {
	// MaxEntries bounds the ids kept; 0 means DefaultDedupeEntries.
	MaxEntries int
	// TTL is how long an id is kept; 0 means DefaultDedupeTTL.
	TTL time.Duration
	// Now tells the time; nil means time.Now.
	Now func() time.Time

	mu sync.Mutex
	// ids finds an id's element in order; order holds dedupeEntry values,
	// oldest mark at the front.
	ids   map[string]*list.Element
	order list.List
}

type dedupeEntry struct {
	id       string
	markedAt time.Time
}

var _ Deduper = (*MemoryDeduper)(nil)

// Seen reports whether id was marked within the last TTL and not evicted.
func (d *MemoryDeduper) Seen(_ context.Context, id string) (bool, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.forgetExpired(d.now())
	_, ok := d.ids[id]
	return ok, nil
}

// MarkSeen remembers id from now on, for TTL. Marking an id again restarts
// its TTL.
func (d *MemoryDeduper) MarkSeen(_ context.Context, id string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	now := d.now()
	d.forgetExpired(now)
	if d.ids == nil {
		d.ids = make(map[string]*list.Element)
	}
	if e, ok := d.ids[id]; ok {
		e.Value = dedupeEntry{id: id, markedAt: now}
		d.order.MoveToBack(e)
		return nil
	}
	d.ids[id] = d.order.PushBack(dedupeEntry{id: id, markedAt: now})
	limit := d.MaxEntries
	if limit <= 0 {
		limit = DefaultDedupeEntries
	}
	for d.order.Len() > limit {
		d.remove(d.order.Front())
	}
	return nil
}

// Len returns how many ids are remembered now.
func (d *MemoryDeduper) Len() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.forgetExpired(d.now())
	return d.order.Len()
}

func (d *MemoryDeduper) now() time.Time {
	if d.Now != nil {
		return d.Now()
	}
	return time.Now()
}

// forgetExpired drops the ids marked TTL or more before now. Entries are in
// the order they were marked, so the expired ones are at the front.
func (d *MemoryDeduper) forgetExpired(now time.Time) {
	ttl := d.TTL
	if ttl <= 0 {
		ttl = DefaultDedupeTTL
	}
	for e := d.order.Front(); e != nil; e = d.order.Front() {
		if now.Sub(e.Value.(dedupeEntry).markedAt) < ttl {
			return
		}
		d.remove(e)
	}
}

func (d *MemoryDeduper) remove(e *list.Element) {
	delete(d.ids, e.Value.(dedupeEntry).id)
	d.order.Remove(e)
}
