package pulsartest

import (
	"sort"
	"sync"
	"time"
)

// Clock is the broker's time source. It drives delayed delivery and broker timestamps.
type Clock interface {
	// Now returns the current time.
	Now() time.Time
	// AfterFunc calls f in its own goroutine (or synchronously for a manual clock) after d; stop cancels it and
	// reports whether it did.
	AfterFunc(d time.Duration, f func()) (stop func() bool)
}

type wallClock struct{}

func (wallClock) Now() time.Time { return time.Now() }

func (wallClock) AfterFunc(d time.Duration, f func()) func() bool {
	return time.AfterFunc(d, f).Stop
}

// ManualClock is a Clock that only moves when told to. Due timers fire synchronously inside Advance and Set, in
// due order, outside the clock's lock.
type ManualClock struct {
	mu     sync.Mutex
	now    time.Time
	seq    int
	timers map[int]manualTimer
}

type manualTimer struct {
	at time.Time
	f  func()
}

// NewManualClock returns a ManualClock that reads start.
func NewManualClock(start time.Time) *ManualClock {
	return &ManualClock{now: start, timers: map[int]manualTimer{}}
}

// Now returns the clock's current time.
func (c *ManualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// AfterFunc registers f to run once the clock has been advanced by at least d.
func (c *ManualClock) AfterFunc(d time.Duration, f func()) func() bool {
	c.mu.Lock()
	c.seq++
	id := c.seq
	c.timers[id] = manualTimer{at: c.now.Add(d), f: f}
	c.mu.Unlock()
	return func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		_, ok := c.timers[id]
		delete(c.timers, id)
		return ok
	}
}

// Advance moves the clock forward by d and fires the timers that became due.
func (c *ManualClock) Advance(d time.Duration) {
	c.mu.Lock()
	t := c.now.Add(d)
	c.mu.Unlock()
	c.Set(t)
}

// Set moves the clock to t (never backwards) and fires the timers that became due.
func (c *ManualClock) Set(t time.Time) {
	c.mu.Lock()
	if t.After(c.now) {
		c.now = t
	}
	var due []manualTimer
	for id, tm := range c.timers {
		if !tm.at.After(c.now) {
			due = append(due, tm)
			delete(c.timers, id)
		}
	}
	c.mu.Unlock()
	sort.SliceStable(due, func(i, j int) bool { return due[i].at.Before(due[j].at) })
	for _, tm := range due {
		tm.f()
	}
}
