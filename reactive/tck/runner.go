package tck

import (
	"fmt"
	"runtime/debug"
	"strings"
	"sync"
	"testing"
)

// runner is the part of *testing.T the verifications use. realT adapts a
// *testing.T; softRunner runs a body on its own goroutine and records the
// outcome, for optional tests (a failure becomes a skip) and for the TCK's
// own meta-tests (which must see required checks fail without failing).
type runner interface {
	Helper()
	Name() string
	Logf(format string, args ...any)
	Errorf(format string, args ...any)
	FailNow()
	SkipNow()
	Failed() bool
	Cleanup(f func())
	Run(name string, f func(r runner)) bool
	// T is the *testing.T handed to factories.
	T() *testing.T
}

type realT struct{ t *testing.T }

func (r realT) Helper()                           { r.t.Helper() }
func (r realT) Name() string                      { return r.t.Name() }
func (r realT) Logf(format string, args ...any)   { r.t.Helper(); r.t.Logf(format, args...) }
func (r realT) Errorf(format string, args ...any) { r.t.Helper(); r.t.Errorf(format, args...) }
func (r realT) FailNow()                          { r.t.FailNow() }
func (r realT) SkipNow()                          { r.t.SkipNow() }
func (r realT) Failed() bool                      { return r.t.Failed() }
func (r realT) Cleanup(f func())                  { r.t.Cleanup(f) }
func (r realT) T() *testing.T                     { return r.t }

func (r realT) Run(name string, f func(r runner)) bool {
	return r.t.Run(name, func(t *testing.T) { f(realT{t: t}) })
}

// softRunner records failures and skips instead of reporting them; FailNow and
// SkipNow end the body's goroutine like testing.T does.
type softRunner struct {
	t    *testing.T
	name string

	mu       sync.Mutex
	logs     []string
	failed   bool
	skipped  bool
	cleanups []func()
	children []*softRunner
}

func newSoftRunner(t *testing.T, name string) *softRunner {
	t.Helper()
	return &softRunner{t: t, name: name}
}

func (*softRunner) Helper()         {}
func (s *softRunner) Name() string  { return s.name }
func (s *softRunner) T() *testing.T { return s.t }
func (s *softRunner) FailNow()      { s.fail(); runtimeGoexit() }
func (s *softRunner) SkipNow()      { s.mu.Lock(); s.skipped = true; s.mu.Unlock(); runtimeGoexit() }

func (s *softRunner) Cleanup(f func()) {
	s.mu.Lock()
	s.cleanups = append(s.cleanups, f)
	s.mu.Unlock()
}

func (s *softRunner) fail() { s.mu.Lock(); s.failed = true; s.mu.Unlock() }

func (s *softRunner) Logf(format string, args ...any) {
	s.mu.Lock()
	s.logs = append(s.logs, fmt.Sprintf(format, args...))
	s.mu.Unlock()
}

func (s *softRunner) Errorf(format string, args ...any) {
	s.Logf(format, args...)
	s.fail()
}

func (s *softRunner) Failed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failed {
		return true
	}
	for _, c := range s.children {
		if c.Failed() {
			return true
		}
	}
	return false
}

// Skipped reports whether the body called SkipNow.
func (s *softRunner) Skipped() bool { s.mu.Lock(); defer s.mu.Unlock(); return s.skipped }

// Output joins the recorded messages.
func (s *softRunner) Output() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.Join(s.logs, "\n")
}

// Child returns the direct child run with the given name, or nil.
func (s *softRunner) Child(name string) *softRunner {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.children {
		if c.name == s.name+"/"+name {
			return c
		}
	}
	return nil
}

// Run runs f on a new goroutine with a child runner and waits for it,
// including the child's cleanups; a panic in f is a failure.
func (s *softRunner) Run(name string, f func(r runner)) bool {
	c := newSoftRunner(s.t, s.name+"/"+name)
	s.mu.Lock()
	s.children = append(s.children, c)
	s.mu.Unlock()
	c.exec(f)
	return !c.Failed()
}

func (s *softRunner) exec(f func(r runner)) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer s.runCleanups()
		defer func() {
			if r := recover(); r != nil {
				s.Errorf("panic: %v\n%s", r, debug.Stack())
			}
		}()
		f(s)
	}()
	<-done
}

func (s *softRunner) runCleanups() {
	for {
		s.mu.Lock()
		n := len(s.cleanups)
		if n == 0 {
			s.mu.Unlock()
			return
		}
		f := s.cleanups[n-1]
		s.cleanups = s.cleanups[:n-1]
		s.mu.Unlock()
		f()
	}
}
