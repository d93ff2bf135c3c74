// Package clock injects time (DESIGN.md, invariant 7): the real clock for
// production, and a test clock that only moves when a test advances it, so a
// test of a 24-hour retry schedule never sleeps.
package clock

import (
	"sort"
	"sync"
	"time"
)

// Clock tells the time and waits.
type Clock interface {
	// Now is the current time on this clock.
	Now() time.Time
	// StoreNow is the time to hand to the store: zero for the real clock, so
	// the database clock decides leases and due times across nodes; the
	// test clock's time otherwise.
	StoreNow() time.Time
	// NewTimer fires once after d on this clock.
	NewTimer(d time.Duration) Timer
}

// Timer is a one-shot timer on a Clock.
type Timer interface {
	C() <-chan time.Time
	// Stop prevents the timer from firing; it reports whether it did.
	Stop() bool
}

// Real is the wall clock.
type Real struct{}

// Now returns time.Now().
func (Real) Now() time.Time { return time.Now() }

// StoreNow returns the zero time: the database clock decides.
func (Real) StoreNow() time.Time { return time.Time{} }

// NewTimer wraps time.NewTimer.
func (Real) NewTimer(d time.Duration) Timer { return realTimer{time.NewTimer(d)} }

type realTimer struct{ t *time.Timer }

func (r realTimer) C() <-chan time.Time { return r.t.C }
func (r realTimer) Stop() bool          { return r.t.Stop() }

// Test is a clock that moves only when Advance or Set is called. It is safe
// for concurrent use.
type Test struct {
	mu     sync.Mutex
	now    time.Time
	timers []*testTimer
}

// NewTest returns a test clock set to start.
func NewTest(start time.Time) *Test {
	return &Test{now: start}
}

// Now returns the test time.
func (c *Test) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// StoreNow returns the test time, so the store follows the test clock too.
func (c *Test) StoreNow() time.Time { return c.Now() }

// NewTimer returns a timer that fires when the clock is advanced past d.
func (c *Test) NewTimer(d time.Duration) Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &testTimer{clock: c, at: c.now.Add(d), ch: make(chan time.Time, 1)}
	if d <= 0 {
		t.ch <- c.now
		t.fired = true
		return t
	}
	c.timers = append(c.timers, t)
	return t
}

// Advance moves the clock forward by d and fires every timer that is due.
func (c *Test) Advance(d time.Duration) {
	c.mu.Lock()
	c.setLocked(c.now.Add(d))
	c.mu.Unlock()
}

// Set moves the clock to t (never backwards) and fires every due timer.
func (c *Test) Set(t time.Time) {
	c.mu.Lock()
	if t.After(c.now) {
		c.setLocked(t)
	}
	c.mu.Unlock()
}

// Waiters is how many timers are waiting; tests use it to know that a
// goroutine has gone to sleep on the clock before they advance it.
func (c *Test) Waiters() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.timers)
}

func (c *Test) setLocked(t time.Time) {
	c.now = t
	sort.Slice(c.timers, func(i, j int) bool { return c.timers[i].at.Before(c.timers[j].at) })
	kept := c.timers[:0]
	for _, tm := range c.timers {
		if !tm.at.After(t) {
			tm.fired = true
			tm.ch <- t
			continue
		}
		kept = append(kept, tm)
	}
	for i := len(kept); i < len(c.timers); i++ {
		c.timers[i] = nil
	}
	c.timers = kept
}

type testTimer struct {
	clock *Test
	at    time.Time
	ch    chan time.Time
	fired bool
}

func (t *testTimer) C() <-chan time.Time { return t.ch }

func (t *testTimer) Stop() bool {
	c := t.clock
	c.mu.Lock()
	defer c.mu.Unlock()
	if t.fired {
		return false
	}
	for i, tm := range c.timers {
		if tm == t {
			c.timers = append(c.timers[:i], c.timers[i+1:]...)
			break
		}
	}
	t.fired = true
	return true
}
