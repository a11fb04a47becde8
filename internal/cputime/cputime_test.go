//go:build unix

package cputime_test

import (
	"testing"
	"time"

	"github.com/babelqueue/babelqueue-go-pulsar/internal/cputime"
)

// Process does not grow while the process sleeps, and grows while it computes: a busy loop
// sees 20 ms of CPU well before 10 s have passed, however loaded the machine.
func TestProcessCountsWorkNotSleep(t *testing.T) {
	start := cputime.Process()
	time.Sleep(50 * time.Millisecond)
	if slept := cputime.Process() - start; slept > 25*time.Millisecond {
		t.Errorf("sleeping 50 ms used %v of CPU", slept)
	}
	start = cputime.Process()
	deadline := time.Now().Add(10 * time.Second)
	for cputime.Process()-start < 20*time.Millisecond {
		if time.Now().After(deadline) {
			t.Fatalf("10 s of busy loop showed only %v of CPU", cputime.Process()-start)
		}
	}
}
