package tck

import (
	"errors"
	"fmt"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/babelqueue/babelqueue-go-pulsar/reactive"
)

// asyncError is one recorded failure ("flop"): an assertion of the TCK, or an
// error a test subscriber received unexpectedly.
type asyncError struct {
	err       error
	assertion bool
}

// env is the Go counterpart of the Java TestEnvironment, one per subtest.
// Callbacks on foreign goroutines only record failures (flop); the test
// goroutine checks them (verifyNoAsyncErrors*) and reports through r.
type env struct {
	r runner
	c config

	mu      sync.Mutex
	errs    []asyncError
	changed chan struct{} // capacity 1: poked on every flop

	trackMu sync.Mutex
	subs    []reactive.Subscription
}

func newEnv(r runner, c config) *env {
	e := &env{r: r, c: c, changed: make(chan struct{}, 1)}
	r.Cleanup(e.close)
	return e
}

// close cancels every subscription the TCK's subscribers received and waits
// for the ones that report Done (the helper publisher's goroutines).
func (e *env) close() {
	e.trackMu.Lock()
	subs := e.subs
	e.subs = nil
	e.trackMu.Unlock()
	for _, s := range subs {
		if r := catchPanic(s.Cancel); r != nil {
			e.r.Errorf("tck: Subscription.Cancel panicked while the subtest ended (rules 3.5, 3.7): %v", r)
		}
	}
	deadline := time.NewTimer(5*e.c.timeout + time.Second)
	defer deadline.Stop()
	for _, s := range subs {
		d, ok := s.(interface{ Done() <-chan struct{} })
		if !ok {
			continue
		}
		select {
		case <-d.Done():
		case <-deadline.C:
			e.r.Errorf("tck: a subscription did not end within %v of its cancellation", 5*e.c.timeout+time.Second)
			return
		}
	}
}

func (e *env) track(s reactive.Subscription) {
	if s == nil {
		return
	}
	e.trackMu.Lock()
	e.subs = append(e.subs, s)
	e.trackMu.Unlock()
}

func (e *env) add(a asyncError) {
	e.mu.Lock()
	e.errs = append(e.errs, a)
	e.mu.Unlock()
	select {
	case e.changed <- struct{}{}:
	default:
	}
}

// flopf records an assertion failure; safe from any goroutine.
func (e *env) flopf(format string, args ...any) {
	e.add(asyncError{err: fmt.Errorf(format, args...), assertion: true})
}

// flopErr records an error a test subscriber received; safe from any goroutine.
func (e *env) flopErr(err error) { e.add(asyncError{err: err}) }

// failf records an assertion failure and ends the test now (test goroutine only).
func (e *env) failf(format string, args ...any) {
	e.r.Helper()
	e.flopf(format, args...)
	e.verifyNoAsyncErrorsNoDelay()
	e.r.FailNow() // unreachable unless the flop raced with a clear
}

func (e *env) dropAsyncError() (asyncError, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.errs) == 0 {
		return asyncError{}, false
	}
	a := e.errs[0]
	e.errs = e.errs[1:]
	return a, true
}

// verifyNoAsyncErrorsNoDelay reports every recorded failure and ends the test
// if there was one.
func (e *env) verifyNoAsyncErrorsNoDelay() {
	e.r.Helper()
	e.mu.Lock()
	errs := append([]asyncError(nil), e.errs...)
	e.mu.Unlock()
	if len(errs) == 0 {
		return
	}
	for _, a := range errs {
		if a.assertion {
			e.r.Errorf("%v", a.err)
		} else {
			e.r.Errorf("async error during test execution: %v", a.err)
		}
	}
	e.r.FailNow()
}

// verifyNoAsyncErrors checks, waits NoSignalsTimeout, checks again.
func (e *env) verifyNoAsyncErrors() {
	e.r.Helper()
	e.verifyNoAsyncErrorsNoDelay()
	e.sleep(e.c.noSignals)
	e.verifyNoAsyncErrorsNoDelay()
}

func (*env) sleep(d time.Duration) {
	timer := time.NewTimer(d)
	defer timer.Stop()
	<-timer.C
}

// skipf ends the test as skipped.
func (e *env) skipf(format string, args ...any) {
	e.r.Helper()
	e.r.Logf(format, args...)
	e.r.SkipNow()
}

// catchPanic runs f and returns what it panicked with.
func catchPanic(f func()) (r any) {
	defer func() { r = recover() }()
	f()
	return nil
}

// isNilArgumentPanic reports whether a recovered value is an error matching
// reactive.ErrNilArgument.
func isNilArgumentPanic(r any) bool {
	err, ok := r.(error)
	return ok && errors.Is(err, reactive.ErrNilArgument)
}

// goid returns the current goroutine's id from the runtime.Stack header
// ("goroutine 17 [running]:"). Diagnostic and rule 1.3 use only.
func goid() uint64 {
	var buf [64]byte
	n := runtime.Stack(buf[:], false)
	s := strings.TrimPrefix(string(buf[:n]), "goroutine ")
	if i := strings.IndexByte(s, ' '); i > 0 {
		if id, err := strconv.ParseUint(s[:i], 10, 64); err == nil {
			return id
		}
	}
	return 0
}

// Terminal signals the TCK sends go through these markers, so a Subscription
// can detect calls made from within OnComplete/OnError (rule 2.3).
const (
	markerOnComplete = "tckSignalOnComplete"
	markerOnError    = "tckSignalOnError"
)

//go:noinline
func tckSignalOnComplete[T any](s reactive.Subscriber[T]) {
	s.OnComplete()
	runtime.KeepAlive(s) // keeps this frame on the stack during OnComplete
}

//go:noinline
func tckSignalOnError[T any](s reactive.Subscriber[T], err error) {
	s.OnError(err)
	runtime.KeepAlive(s)
}

// callerWithMarker returns the first function on the calling goroutine's
// stack whose name contains marker.
func callerWithMarker(marker string) (string, bool) {
	pcs := make([]uintptr, 256)
	n := runtime.Callers(2, pcs)
	frames := runtime.CallersFrames(pcs[:n])
	for {
		f, more := frames.Next()
		if strings.Contains(f.Function, marker) {
			return fmt.Sprintf("%s (%s:%d)", f.Function, f.File, f.Line), true
		}
		if !more {
			return "", false
		}
	}
}

// latch is the Java TestEnvironment.Latch: closes once.
type latch struct {
	e    *env
	once sync.Once
	ch   chan struct{}
}

func newLatch(e *env) *latch { return &latch{e: e, ch: make(chan struct{})} }

func (l *latch) close() { l.once.Do(func() { close(l.ch) }) }

func (l *latch) isClosed() bool {
	select {
	case <-l.ch:
		return true
	default:
		return false
	}
}

func (l *latch) assertClosed(msg string) {
	if !l.isClosed() {
		l.e.flopf("%s", msg)
	}
}

func (l *latch) assertOpen(msg string) {
	if l.isClosed() {
		l.e.flopf("%s", msg)
	}
}

// waitFor reports whether the latch closed within timeout.
func (l *latch) waitFor(timeout time.Duration) bool {
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case <-l.ch:
		return true
	case <-timer.C:
		return false
	}
}

func (l *latch) expectClose(timeout time.Duration, msg string) {
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case <-l.ch:
	case <-timer.C:
		l.e.flopf("%s within %v", msg, timeout)
	}
}

// promise is the Java TestEnvironment.Promise: completes once.
type promise[V any] struct {
	e    *env
	mu   sync.Mutex
	v    V
	set  bool
	done chan struct{}
}

func newPromise[V any](e *env) *promise[V] { return &promise[V]{e: e, done: make(chan struct{})} }

func (p *promise[V]) complete(v V) {
	p.mu.Lock()
	if p.set {
		p.mu.Unlock()
		p.e.flopf("cannot complete a promise more than once! present value: %v, attempted to set: %v", p.v, v)
		return
	}
	p.v, p.set = v, true
	p.mu.Unlock()
	close(p.done)
}

func (p *promise[V]) isCompleted() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.set
}

// get returns the value and whether it is set, without flopping.
func (p *promise[V]) get() (V, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.v, p.set
}

// value returns the value; on the test goroutine a missing value ends the test.
func (p *promise[V]) value() V {
	v, ok := p.get()
	if !ok {
		p.e.failf("cannot access promise value before completion")
	}
	return v
}

func (p *promise[V]) expectCompletion(timeout time.Duration, msg string) {
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case <-p.done:
	case <-timer.C:
		p.e.flopf("%s within %v", msg, timeout)
	}
}

// receptacleSize is the Java QUEUE_SIZE: 2 × TEST_BUFFER_SIZE.
const receptacleSize = 32

type item[V any] struct {
	v   V
	end bool
}

// receptacle is the Java TestEnvironment.Receptacle: a bounded queue of
// received values and the end-of-stream.
type receptacle[V any] struct {
	e         *env
	what      string
	ch        chan item[V]
	completed *latch
}

func newReceptacle[V any](e *env, what string) *receptacle[V] {
	return &receptacle[V]{e: e, what: what, ch: make(chan item[V], receptacleSize), completed: newLatch(e)}
}

func (r *receptacle[V]) add(v V) {
	r.completed.assertOpen(fmt.Sprintf("unexpected element %v received after stream completed", v))
	select {
	case r.ch <- item[V]{v: v}:
	default:
		r.e.flopf("received more than bufferSize (%d) %s signals: the publisher probably emitted more than expected", receptacleSize, r.what)
	}
}

func (r *receptacle[V]) complete() {
	r.completed.assertOpen("unexpected additional complete signal received")
	r.completed.close()
	select {
	case r.ch <- item[V]{end: true}:
	default:
		r.e.flopf("received more than bufferSize (%d) signals before the end of the stream", receptacleSize)
	}
}

func (r *receptacle[V]) poll(timeout time.Duration) (item[V], bool) {
	if timeout <= 0 {
		select {
		case it := <-r.ch:
			return it, true
		default:
			return item[V]{}, false
		}
	}
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case it := <-r.ch:
		return it, true
	case <-timer.C:
		return item[V]{}, false
	}
}

func (r *receptacle[V]) next(timeout time.Duration, msg string) V {
	r.e.r.Helper()
	it, ok := r.poll(timeout)
	switch {
	case !ok:
		r.e.failf("%s within %v", msg, timeout)
	case it.end:
		r.e.failf("expected element but got end-of-stream")
	}
	return it.v
}

func (r *receptacle[V]) nextOrEndOfStream(timeout time.Duration, msg string) (V, bool) {
	it, ok := r.poll(timeout)
	if !ok {
		r.e.flopf("%s within %v", msg, timeout)
		return it.v, false
	}
	return it.v, !it.end
}

func (r *receptacle[V]) nextN(n int64, timeout time.Duration, msg string) []V {
	deadline := time.Now().Add(timeout)
	out := make([]V, 0, min(n, receptacleSize))
	for range n {
		out = append(out, r.next(time.Until(deadline), msg))
	}
	return out
}

func (r *receptacle[V]) expectCompletion(timeout time.Duration, msg string) {
	it, ok := r.poll(timeout)
	switch {
	case !ok:
		r.e.flopf("%s within %v", msg, timeout)
	case !it.end:
		r.e.flopf("expected end-of-stream but got element [%v]", it.v)
	}
}

func (r *receptacle[V]) expectNone(within time.Duration, prefix string) {
	r.e.sleep(within)
	if it, ok := r.poll(0); ok {
		if it.end {
			r.e.flopf("expected no element but got end-of-stream")
		} else {
			r.e.flopf("%s [%v]", prefix, it.v)
		}
	}
}

// recoverInto turns a panic of code under test on the test goroutine into a
// test failure with its stack.
func (e *env) recoverInto(r any) {
	if r != nil {
		e.r.Errorf("tck: panic in the implementation under test: %v\n%s", r, debug.Stack())
		e.r.FailNow()
	}
}
