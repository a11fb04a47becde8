package tck

import (
	"strings"
	"sync"
	"testing"
)

// newTestEnv returns an env on a soft runner (its failures are inspected,
// not reported).
func newTestEnv(t *testing.T) (*env, *softRunner) {
	t.Helper()
	s := newSoftRunner(t, "harness")
	c, err := resolve(metaOptions)
	if err != nil {
		t.Fatal(err)
	}
	return &env{r: s, c: c, changed: make(chan struct{}, 1)}, s
}

func recorded(e *env) string {
	e.mu.Lock()
	defer e.mu.Unlock()
	var parts []string
	for _, a := range e.errs {
		parts = append(parts, a.err.Error())
	}
	return strings.Join(parts, "\n")
}

func TestReceptacleFlagsTheThirtyThirdElement(t *testing.T) {
	e, _ := newTestEnv(t)
	sub := newManualSubscriber[int](e)
	sub.OnSubscribe(noopSubscription{})
	for i := range receptacleSize {
		sub.OnNext(i)
	}
	if got := recorded(e); got != "" {
		t.Fatalf("32 elements fit, got flops: %s", got)
	}
	sub.OnNext(32)
	if got := recorded(e); !strings.Contains(got, "emitted more than expected") {
		t.Fatalf("the 33rd element must be flagged, got %q", got)
	}
}

func TestManualSubscriberFlagsSignalsBeforeOnSubscribe(t *testing.T) {
	e, _ := newTestEnv(t)
	sub := newManualSubscriber[int](e)
	sub.OnNext(1)
	sub.OnComplete()
	got := recorded(e)
	if !strings.Contains(got, "onNext(1) called before Subscriber::onSubscribe") ||
		!strings.Contains(got, "onComplete() called before Subscriber::onSubscribe") {
		t.Fatalf("signals before OnSubscribe must be flagged, got %q", got)
	}
	sub.OnSubscribe(noopSubscription{})
	sub.OnSubscribe(noopSubscription{})
	if got := recorded(e); !strings.Contains(got, "already-subscribed") {
		t.Fatalf("a second OnSubscribe must be flagged, got %q", got)
	}
}

func TestFlopsFromOtherGoroutinesAreReportedByTheTestGoroutine(t *testing.T) {
	e, s := newTestEnv(t)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() { e.flopf("flop from a foreign goroutine") })
	}
	wg.Wait()
	if s.Failed() {
		t.Fatal("a flop must not fail the test by itself")
	}
	s.exec(func(runner) { e.verifyNoAsyncErrorsNoDelay() })
	if !s.Failed() || strings.Count(s.Output(), "flop from a foreign goroutine") != 4 {
		t.Fatalf("verify must report every flop, got failed=%v output=%q", s.Failed(), s.Output())
	}
}

func TestPromiseCompletesOnce(t *testing.T) {
	e, _ := newTestEnv(t)
	p := newPromise[int](e)
	p.complete(1)
	p.complete(2)
	if v, _ := p.get(); v != 1 || !strings.Contains(recorded(e), "more than once") {
		t.Fatalf("second completion must be flagged and ignored: v=%d flops=%q", v, recorded(e))
	}
}

func TestMarkerDetectionOnlyWithinTheSignal(t *testing.T) {
	if _, ok := callerWithMarker(markerOnComplete); ok {
		t.Fatal("no marker on this stack")
	}
	var found bool
	tckSignalOnComplete[int](&funcSubscriber[int]{onComplete: func() { _, found = callerWithMarker(markerOnComplete) }})
	if !found {
		t.Fatal("the marker frame must be visible from within OnComplete")
	}
}

func TestResolveOptions(t *testing.T) {
	t.Setenv(EnvDefaultTimeout, "250")
	t.Setenv(EnvNoSignalsTimeout, "")
	c, err := resolve(Options{})
	if err != nil {
		t.Fatal(err)
	}
	if c.timeout.Milliseconds() != 250 || c.noSignals != c.timeout || c.poll != c.timeout {
		t.Fatalf("env default timeout must apply and be inherited: %+v", c)
	}
	if c.maxElements != DefaultMaxElements || c.depth != 1 || c.bufferSize != 16 || c.gc != DefaultGCTimeout {
		t.Fatalf("defaults: %+v", c)
	}
	c, err = resolve(Options{DefaultTimeout: 7, MaxElements: NoElements})
	if err != nil || c.timeout != 7 || c.maxElements != 0 {
		t.Fatalf("options beat the environment: %+v %v", c, err)
	}
	t.Setenv(EnvGCTimeout, "soon")
	if _, err := resolve(Options{}); err == nil {
		t.Fatal("an unparsable env value must be an error")
	}
}
