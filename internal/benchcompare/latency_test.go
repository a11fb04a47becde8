//go:build unix

package benchcompare_test

import (
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// stampProp is the property that carries a message's scheduled send time: nanoseconds since
// latencyEpoch on the monotonic clock. Producer and consumers are in the same process, so
// the one clock serves both ends, whichever broker the run uses.
const stampProp = "bench-sent-ns"

// latencyPercentiles are the judged percentiles and their targets: the SDK's latency over
// the raw client's at the same rate, at most (issue 27, item 2).
var latencyPercentiles = [...]struct {
	name   string
	q      float64 // the quantile in percent, as hdrhistogram takes it
	target float64
}{
	{"p50", 50, 1.10},
	{"p99", 99, 1.10},
	{"p99.9", 99.9, 1.25},
}

const (
	// latencyMaxUsec is the highest latency the histograms track, 60 s; a higher one is
	// recorded as 60 s.
	latencyMaxUsec = 60_000_000
)

// latencyRecorder collects the latencies one consumer side measures, a window at a time.
// The side calls take with each message's properties the moment it has the message (the raw
// Receive returned it, the SDK handler was called with it): the latency is that moment
// minus the message's scheduled send time, so a send that went out late, or waited for the
// producer, counts from when it was due. It is safe for concurrent use.
type latencyRecorder struct {
	now func() time.Duration // the clock the stamps are read against (a fake one in tests)

	mu      sync.Mutex
	hist    *hdrhistogram.Histogram // µs, 1 µs … 60 s, 3 significant digits
	want    int                     // the messages the window waits for
	got     int                     // the messages received in the window
	stamped int                     // of which carried a readable stamp
	last    time.Duration           // when the last of them was received
	done    chan struct{}           // closed once got reaches want, or on a failure
	closed  bool                    // done is closed
	err     error                   // the consumer side's first failure
}

// newLatencyRecorder returns a recorder reading the clock now, waiting for no window yet.
func newLatencyRecorder(now func() time.Duration) *latencyRecorder {
	r := &latencyRecorder{now: now, hist: hdrhistogram.New(1, latencyMaxUsec, 3)}
	r.expect(0)
	return r
}

// expect starts a window of n messages: what was recorded before is dropped.
func (r *latencyRecorder) expect(n int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.hist.Reset()
	r.want, r.got, r.stamped, r.last = n, 0, 0, 0
	r.done, r.closed = make(chan struct{}), false
	if n == 0 {
		r.finishLocked()
	}
}

// take records a message the consumer side has just received, by its properties. A message
// without a stamp (a burst's) is counted but has no latency.
func (r *latencyRecorder) take(props map[string]string) {
	at := r.now()
	due, err := strconv.ParseInt(props[stampProp], 10, 64)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got++
	r.last = at
	if err == nil {
		r.stamped++
		usec := min(max((at-time.Duration(due)).Microseconds(), 0), latencyMaxUsec)
		if err := r.hist.RecordValue(usec); err != nil && r.err == nil {
			r.err = fmt.Errorf("recording %d µs: %w", usec, err)
		}
	}
	if r.got == r.want {
		r.finishLocked()
	}
}

// fail records a failure of the consumer side and ends the window's wait.
func (r *latencyRecorder) fail(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err == nil {
		r.err = err
	}
	r.finishLocked()
}

func (r *latencyRecorder) finishLocked() {
	if !r.closed {
		r.closed = true
		close(r.done)
	}
}

// latencyStats are what one window measured: its latencies in µs at latencyPercentiles and
// their maximum, the messages that carried a stamp, and when the last message came.
type latencyStats struct {
	pct     [len(latencyPercentiles)]float64
	max     float64
	stamped int
	last    time.Duration
}

// wait waits until the window's messages have all been received, or the consumer side
// failed, or timeout passed, and returns the window's figures.
func (r *latencyRecorder) wait(timeout time.Duration) (latencyStats, error) {
	r.mu.Lock()
	done := r.done
	r.mu.Unlock()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case <-done:
	case <-timer.C:
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err != nil {
		return latencyStats{}, r.err
	}
	if r.got < r.want {
		return latencyStats{}, fmt.Errorf("received %d of %d messages in %v", r.got, r.want, timeout)
	}
	s := latencyStats{max: float64(r.hist.Max()), stamped: r.stamped, last: r.last}
	for i, p := range latencyPercentiles {
		s.pct[i] = float64(r.hist.ValueAtQuantile(p.q))
	}
	return s, nil
}

// openLoop sends n messages at rate a second on a fixed schedule: message i is due at
// start + i/rate, start being now() when it begins. It sleeps until a message is due and
// sends one that is already late at once, without moving the later ones: the schedule is
// the intended load whatever the system under test does, and a stall of the sender (a full
// producer queue, a slow call) shows up as latency of every message it held back, counted
// from when each was due. A closed-loop sender would instead wait out the stall and send
// fewer messages during it, the coordinated omission that hides the tail.
func openLoop(n int, rate float64, now func() time.Duration, sleep func(time.Duration), send func(due time.Duration) error) error {
	start := now()
	for i := range n {
		due := start + time.Duration(float64(i)*float64(time.Second)/rate)
		if d := due - now(); d > 0 {
			sleep(d)
		}
		if err := send(due); err != nil {
			return fmt.Errorf("message %d of %d: %w", i+1, n, err)
		}
	}
	return nil
}

// The open-loop generator keeps its schedule through a stall, and the recorder counts every
// message from when it was due: a send stalled for 5 ms makes the messages it held back
// late by 4, 3, 2 and 1 ms, where a closed-loop sender would record no latency at all.
func TestOpenLoopCountsFromTheSchedule(t *testing.T) {
	var now time.Duration // the fake clock
	clock := func() time.Duration { return now }
	rec := newLatencyRecorder(clock)
	const n = 10
	rec.expect(n)
	var dues []time.Duration
	err := openLoop(n, 1000, clock, func(d time.Duration) { now += d }, func(due time.Duration) error {
		dues = append(dues, due)
		rec.take(map[string]string{stampProp: strconv.FormatInt(int64(due), 10)}) // received at once
		if len(dues) == 3 {
			now += 5 * time.Millisecond // the third send stalls the sender
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for i, due := range dues {
		if want := time.Duration(i) * time.Millisecond; due != want {
			t.Errorf("message %d was due at %v, want %v: the schedule moved", i, due, want)
		}
	}
	st, err := rec.wait(time.Second)
	if err != nil {
		t.Fatal(err)
	}
	// The latencies are 0, 0, 0, 4, 3, 2, 1, 0, 0, 0 ms: the median 0, the tail 4 ms.
	if st.stamped != n || st.pct[0] != 0 || !near(st.pct[1], 4000) || !near(st.max, 4000) {
		t.Errorf("stamped %d, p50 %v µs, p99 %v µs, max %v µs; want 10, 0, 4000, 4000", st.stamped, st.pct[0], st.pct[1], st.max)
	}
	if err := openLoop(1, 1000, clock, func(time.Duration) {}, func(time.Duration) error { return errors.New("refused") }); err == nil {
		t.Error("openLoop hid a failed send")
	}
}

// near reports whether x is within the histogram's precision (3 significant digits) of want.
func near(x, want float64) bool { return x >= want*0.999 && x <= want*1.001 }

// The recorder counts a message without a stamp (a burst's) without a latency, waits for the
// window's count, and reports a consumer failure or a short window as an error.
func TestLatencyRecorder(t *testing.T) {
	now := 10 * time.Millisecond
	rec := newLatencyRecorder(func() time.Duration { return now })
	rec.expect(2)
	rec.take(map[string]string{})
	rec.take(map[string]string{stampProp: strconv.FormatInt(int64(9*time.Millisecond), 10)})
	st, err := rec.wait(time.Second)
	if err != nil || st.stamped != 1 || !near(st.max, 1000) || st.last != now {
		t.Errorf("got %+v, %v; want 1 stamped message of 1000 µs received at %v", st, err, now)
	}
	rec.expect(2)
	rec.take(map[string]string{})
	if _, err := rec.wait(time.Millisecond); err == nil {
		t.Error("a window short of a message did not fail")
	}
	rec.expect(1)
	rec.fail(errors.New("receive failed"))
	if _, err := rec.wait(time.Minute); err == nil || err.Error() != "receive failed" {
		t.Errorf("wait after a failure = %v", err)
	}
}
