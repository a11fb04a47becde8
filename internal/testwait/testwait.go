// Package testwait is the module's one polling wait for tests: [Eventually] asks a condition
// again and again until it holds, and fails the test when a bound passes first. Delivery,
// settlement and broker state change on goroutines of their own, so a test waits for what
// it can observe instead of sleeping for a guessed time.
//
// It imports the standard library only, so that every package's tests may use it (those of
// messaging and reactive too, which must not pull in the Pulsar client); it is imported by
// _test.go files and test-support packages only.
package testwait

import (
	"fmt"
	"testing"
	"time"
)

// The polling interval starts at minPoll and doubles up to maxPoll: a short wait ends soon
// after the condition holds, a long one costs little CPU.
const (
	minPoll = time.Millisecond
	maxPoll = 10 * time.Millisecond
)

// Eventually calls cond until it returns true, and fails the test (tb.Fatalf, so from the
// test's goroutine only) when within has passed first, with a message that names the bound
// and says what was awaited: msg formatted with args (as by fmt.Sprintf; args are
// evaluated once, when Eventually is called). cond is called at once, then at intervals
// growing from 1 ms to 10 ms, on the caller's goroutine.
func Eventually(tb testing.TB, within time.Duration, cond func() bool, msg string, args ...any) {
	tb.Helper()
	deadline := time.NewTimer(within)
	defer deadline.Stop()
	poll := minPoll
	for !cond() {
		tick := time.NewTimer(poll)
		select {
		case <-deadline.C:
			tick.Stop()
			if cond() {
				return
			}
			tb.Fatalf("timed out after %s waiting for: %s", within, fmt.Sprintf(msg, args...))
		case <-tick.C:
		}
		poll = min(2*poll, maxPoll)
	}
}
