package testwait_test

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/babelqueue/babelqueue-go-pulsar/internal/testwait"
)

// recorder is a testing.TB whose Fatalf records the message and ends the goroutine, as
// the real one does.
type recorder struct {
	testing.TB
	msg string
}

func (*recorder) Helper() {}

func (r *recorder) Fatalf(format string, args ...any) {
	r.msg = fmt.Sprintf(format, args...)
	panic(r)
}

func run(tb testing.TB, f func(tb testing.TB)) (failed string) {
	tb.Helper()
	r := &recorder{TB: tb}
	defer func() {
		if v := recover(); v != nil {
			if v != r {
				panic(v)
			}
			failed = r.msg
		}
	}()
	f(r)
	return ""
}

func TestEventuallyReturnsOnceTheConditionHolds(t *testing.T) {
	var calls atomic.Int32
	msg := run(t, func(tb testing.TB) {
		tb.Helper()
		testwait.Eventually(tb, time.Minute, func() bool { return calls.Add(1) == 5 }, "five calls")
	})
	if msg != "" {
		t.Fatalf("failed: %s", msg)
	}
	if n := calls.Load(); n != 5 {
		t.Fatalf("cond called %d times, want 5", n)
	}
}

func TestEventuallyFailsWithTheBoundAndTheMessage(t *testing.T) {
	msg := run(t, func(tb testing.TB) {
		tb.Helper()
		testwait.Eventually(tb, 20*time.Millisecond, func() bool { return false }, "%d of %d orders", 1, 2)
	})
	if want := "timed out after 20ms waiting for: 1 of 2 orders"; msg != want {
		t.Fatalf("message %q, want %q", msg, want)
	}
}
