package bench

import (
	"hash/maphash"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// tallyShards is how many independently locked maps a Tally spreads its
// ids over, so the receiver's handlers and the senders rarely wait on one
// another.
const tallyShards = 64

// keySize bounds the ids a Tally keeps inline: an id shorter than keySize
// bytes (an event id and an endpoint number, "evt_…#12", is 35) is copied
// into a fixed array, which keeps the maps free of pointers, so the garbage
// collector does not scan millions of entries while the run is measured.
// Longer ids go to a slower map of strings.
const keySize = 40

// missingSample is how many missing ids a report names, for a look with
// `herald deliveries list`.
const missingSample = 10

// key is an id of fewer than keySize bytes, zero-padded, its length in
// the last byte.
type key [keySize]byte

func makeKey[T string | []byte](id T) (key, bool) {
	var k key
	if len(id) >= keySize {
		return k, false
	}
	copy(k[:], id)
	k[keySize-1] = byte(len(id))
	return k, true
}

func (k *key) String() string { return string(k[:k[keySize-1]]) }

// entry is what a Tally knows of one id. Times are nanoseconds since the
// Tally's base.
type entry struct {
	accepted int64
	arrived  int64 // the first arrival
	arrivals uint32
	known    bool // Accepted was called
}

type shard struct {
	mu   sync.Mutex
	m    map[key]entry
	long map[string]entry
	_    [40]byte // keeps neighbouring shards' locks off one cache line
}

// Tally counts, for each expected delivery, when Herald accepted it and
// when (and how often) it arrived, and turns that into a Report: how many
// arrived, how many never did, how many came more than once, and the
// latency between the two. An id is whatever names one delivery; the
// bench uses the event id (the webhook-id header) and the endpoint's
// number. Accepted and Arrived may come in either order (a fast delivery
// can reach the receiver before the ingest answer reaches the sender) and
// from many goroutines at once.
type Tally struct {
	base     time.Time
	seed     maphash.Seed
	shards   [tallyShards]shard
	accepted atomic.Int64 // distinct ids accepted
	complete atomic.Int64 // distinct ids both accepted and arrived
	arrivals atomic.Int64 // every arrival, repeats included
	// series, when set, gets each delivery's latency as it completes.
	series atomic.Pointer[Series]
}

// track has each delivery that completes from now on (accepted and
// arrived) recorded in s too, by its first arrival.
func (t *Tally) track(s *Series) { t.series.Store(s) }

// NewTally returns an empty Tally with room for about expected ids made
// up front, so that the maps do not grow while the run is measured.
func NewTally(expected int) *Tally {
	t := &Tally{base: time.Now(), seed: maphash.MakeSeed()}
	per := expected/tallyShards + 1
	for i := range t.shards {
		t.shards[i].m = make(map[key]entry, per)
	}
	return t
}

func (t *Tally) shardOf(id string) *shard {
	return &t.shards[maphash.String(t.seed, id)%tallyShards]
}

func (t *Tally) shardOfBytes(id []byte) *shard {
	return &t.shards[maphash.Bytes(t.seed, id)%tallyShards]
}

// Accepted records that the delivery id was accepted at at: Herald
// answered the ingest call that created it. A second call for the same id
// keeps the first time.
func (t *Tally) Accepted(id string, at time.Time) {
	ns := at.Sub(t.base).Nanoseconds()
	s := t.shardOf(id)
	k, short := makeKey(id)
	s.mu.Lock()
	e := s.get(k, short, id)
	if !e.known {
		e.known, e.accepted = true, ns
		t.accepted.Add(1)
		if e.arrivals > 0 {
			t.complete.Add(1)
			if sr := t.series.Load(); sr != nil {
				sr.Add(t.base.Add(time.Duration(e.arrived)), 0) // arrived before accept: latency 0
			}
		}
		s.put(k, short, id, e)
	}
	s.mu.Unlock()
}

// Arrived records that the delivery id reached the receiver at at.
func (t *Tally) Arrived(id string, at time.Time) {
	k, short := makeKey(id)
	t.arrive(t.shardOf(id), k, short, id, at)
}

// arrivedBytes is Arrived for an id the receiver assembled in a buffer:
// it makes no string unless the id is too long to keep inline.
func (t *Tally) arrivedBytes(id []byte, at time.Time) {
	k, short := makeKey(id)
	var long string
	if !short {
		long = string(id)
	}
	t.arrive(t.shardOfBytes(id), k, short, long, at)
}

func (t *Tally) arrive(s *shard, k key, short bool, id string, at time.Time) {
	ns := at.Sub(t.base).Nanoseconds()
	t.arrivals.Add(1)
	s.mu.Lock()
	e := s.get(k, short, id)
	if e.arrivals == 0 {
		e.arrived = ns
		if e.known {
			t.complete.Add(1)
			if sr := t.series.Load(); sr != nil {
				sr.Add(at, max(time.Duration(ns-e.accepted), 0))
			}
		}
	} else if ns < e.arrived {
		// Receiver goroutines may record out of order; the first is the
		// earliest.
		e.arrived = ns
	}
	e.arrivals++
	s.put(k, short, id, e)
	s.mu.Unlock()
}

func (s *shard) get(k key, short bool, id string) entry {
	if short {
		return s.m[k]
	}
	return s.long[id]
}

func (s *shard) put(k key, short bool, id string, e entry) {
	if short {
		s.m[k] = e
		return
	}
	if s.long == nil {
		s.long = make(map[string]entry)
	}
	s.long[id] = e
}

// Progress says how many distinct ids were accepted, how many of those
// have arrived, and how many arrivals there were in all. It is cheap
// enough to call every few milliseconds while draining.
func (t *Tally) Progress() (accepted, arrived, arrivals int64) {
	return t.accepted.Load(), t.complete.Load(), t.arrivals.Load()
}

// Latency summarizes the time from acceptance to first arrival.
type Latency struct {
	// Samples is how many deliveries it was measured on.
	Samples int
	P50     time.Duration
	P90     time.Duration
	P99     time.Duration
	Max     time.Duration
}

// Percentile returns the nearest-rank p-quantile (0 < p <= 1) of sorted
// ascending values, or 0 when there are none.
func Percentile(sorted []time.Duration, p float64) time.Duration {
	n := len(sorted)
	if n == 0 {
		return 0
	}
	rank := int(math.Ceil(p*float64(n))) - 1 // counted from 0
	return sorted[min(max(rank, 0), n-1)]
}

// Counts is what a Tally found.
type Counts struct {
	// Expected is how many distinct deliveries were accepted.
	Expected int64
	// Delivered is how many of them arrived at least once.
	Delivered int64
	// Missing is how many were accepted but never arrived.
	Missing int64
	// Duplicated is how many ids (accepted or not) arrived more than once,
	// and Repeats how many arrivals there were beyond each id's first.
	Duplicated int64
	Repeats    int64
	// Unexpected is how many ids arrived that were never accepted (an
	// ingest call that failed on the sender's side after the server had
	// committed, or a stray request).
	Unexpected int64
	// ArrivedBeforeAccept is how many deliveries reached the receiver
	// before their ingest answer reached the sender. Their latency counts
	// as zero.
	ArrivedBeforeAccept int64
	// FirstAccept, FirstArrival and LastArrival bound the run: the
	// earliest acceptance, and the earliest and the latest first arrival
	// of an id (a repeat does not move them); zero when there was none.
	FirstAccept  time.Time
	FirstArrival time.Time
	LastArrival  time.Time
	// Latency is from acceptance to first arrival, over the delivered ids.
	Latency Latency
	// MissingSample names up to ten missing ids.
	MissingSample []string
}

// Report counts what the Tally holds. It may be called while arrivals
// still come in; each shard is read under its lock.
func (t *Tally) Report() Counts {
	var c Counts
	lat := make([]time.Duration, 0, t.complete.Load()+16)
	var firstAcc, firstArr, lastArr int64
	var anyAcc, anyArr bool
	// visit counts one entry and says whether it is missing.
	visit := func(e entry) (missing bool) {
		if e.known {
			c.Expected++
			if !anyAcc || e.accepted < firstAcc {
				firstAcc, anyAcc = e.accepted, true
			}
		}
		if e.arrivals > 0 {
			if !anyArr || e.arrived < firstArr {
				firstArr = e.arrived
			}
			if !anyArr || e.arrived > lastArr {
				lastArr = e.arrived
			}
			anyArr = true
		}
		if e.arrivals > 1 {
			c.Duplicated++
			c.Repeats += int64(e.arrivals - 1)
		}
		switch {
		case e.known && e.arrivals > 0:
			c.Delivered++
			d := time.Duration(e.arrived - e.accepted)
			if d < 0 {
				c.ArrivedBeforeAccept++
				d = 0
			}
			lat = append(lat, d)
		case e.known:
			c.Missing++
			return true
		default:
			c.Unexpected++
		}
		return false
	}
	for i := range t.shards {
		s := &t.shards[i]
		s.mu.Lock()
		for k, e := range s.m {
			if visit(e) && len(c.MissingSample) < missingSample {
				c.MissingSample = append(c.MissingSample, k.String())
			}
		}
		for id, e := range s.long {
			if visit(e) && len(c.MissingSample) < missingSample {
				c.MissingSample = append(c.MissingSample, id)
			}
		}
		s.mu.Unlock()
	}
	if anyAcc {
		c.FirstAccept = t.base.Add(time.Duration(firstAcc))
	}
	if anyArr {
		c.FirstArrival = t.base.Add(time.Duration(firstArr))
		c.LastArrival = t.base.Add(time.Duration(lastArr))
	}
	slices.Sort(lat)
	slices.Sort(c.MissingSample)
	c.Latency = Latency{
		Samples: len(lat),
		P50:     Percentile(lat, 0.50),
		P90:     Percentile(lat, 0.90),
		P99:     Percentile(lat, 0.99),
		Max:     Percentile(lat, 1),
	}
	return c
}
