package dispatch

import (
	"container/list"
	"context"
	"sync"
	"time"
)

// Long attempts. A node's slots bound the attempts it starts, so that it
// takes no more work than it can send. But an attempt to a receiver that
// hangs holds its slot for the endpoint's whole timeout (10 s by default,
// up to a minute), and a few thousand such receivers, each within its own
// in-flight cap, held every slot of a node: healthy endpoints waited
// behind them for minutes (BENCHMARKS "Hanging receivers beside healthy
// ones"). So an attempt that has run LongAfter gives its slot back to the
// node, when the claim loop waits for one or an ingest reserves one
// (Reserve), and runs on among at most
// LongAttempts long ones, with a worker started in its place; it writes
// its outcome as before, giving no slot back then. What a long attempt
// costs the node is a goroutine and a connection waiting: it bounds those
// (LongAttempts), not the work the node starts.

// underWay is an attempt a worker is running.
type underWay struct {
	began time.Time
	long  bool          // guarded by longAttempts.mu
	elem  *list.Element // in longAttempts.young while not long
}

// longAttempts keeps the attempts under way on this node: those not long
// yet in the order they began (begin, end and turn cost the same however
// many run), and a count of the long ones.
type longAttempts struct {
	after time.Duration
	most  int

	mu    sync.Mutex
	young list.List // of *underWay, oldest first
	longs int
}

// begin records an attempt about to start.
func (l *longAttempts) begin() *underWay {
	a := &underWay{began: time.Now()}
	l.mu.Lock()
	a.elem = l.young.PushBack(a)
	l.mu.Unlock()
	return a
}

// end records that a ended, and says whether it had turned long (its slot
// is back already, and a worker took its place).
func (l *longAttempts) end(a *underWay) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if a.long {
		l.longs--
	} else {
		l.young.Remove(a.elem)
	}
	return a.long
}

// next is how long until the oldest attempt not long yet turns long
// (l.after when none runs, 0 when one is due), and whether the long ones
// have room for it.
func (l *longAttempts) next() (time.Duration, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.longs >= l.most {
		return l.after, false
	}
	e := l.young.Front()
	if e == nil {
		return l.after, true
	}
	return max(time.Until(e.Value.(*underWay).began.Add(l.after)), 0), true
}

// turn makes up to n attempts that have run l.after long, as room under
// l.most allows, and says how many it turned: each is a slot back.
func (l *longAttempts) turn(n int) int {
	cutoff := time.Now().Add(-l.after)
	l.mu.Lock()
	defer l.mu.Unlock()
	turned := 0
	for turned < n && l.longs < l.most {
		e := l.young.Front()
		if e == nil {
			break
		}
		a := e.Value.(*underWay)
		if !a.began.Before(cutoff) {
			break
		}
		l.young.Remove(e)
		a.long, a.elem = true, nil
		l.longs++
		turned++
	}
	return turned
}

// turnLong turns up to n attempts that have run LongAfter long, starting
// a worker (spawn) in the place of each, and says how many: each is a
// slot its caller now holds.
func (d *Dispatcher) turnLong(n int, spawn func()) int {
	k := d.long.turn(n)
	for range k {
		spawn()
	}
	return k
}

// awaitSlot takes a slot for the claim loop, waiting while every slot is
// busy; meanwhile, as soon as the oldest attempt has run LongAfter (real
// time), the attempts that have turned long give their slots (with a
// worker spawned in the place of each). It says false when ctx ended
// first.
func (d *Dispatcher) awaitSlot(ctx context.Context, slots chan struct{}, spawn func()) bool {
	select {
	case <-slots:
		return true
	case <-ctx.Done():
		return false
	default:
	}
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		wait, room := d.long.next()
		if !room {
			wait = d.cfg.LongAfter // until a long one ends
		}
		timer.Reset(wait)
		select {
		case <-slots:
			return true
		case <-ctx.Done():
			return false
		case <-timer.C:
			// Every attempt that has turned long gives its slot: one
			// for this claim, the others back to the node's slots
			// (room for them there: they were out).
			k := d.turnLong(cap(slots), spawn)
			if k == 0 {
				continue
			}
			for range k - 1 {
				slots <- struct{}{}
			}
			return true
		}
	}
}
