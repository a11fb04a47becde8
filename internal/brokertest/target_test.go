package brokertest

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/babelqueue/babelqueue-go-pulsar/internal/leaktest"
)

func TestMain(m *testing.M) { leaktest.VerifyTestMain(m) }

// recorder is a testing.TB that records how a test was ended; like the real one, Skip and
// Fatalf end the goroutine that calls them.
type recorder struct {
	testing.TB
	skipped, failed string
}

func (*recorder) Helper()            {}
func (r *recorder) Skip(args ...any) { r.skipped = fmt.Sprint(args...); runtime.Goexit() }

func (r *recorder) Fatalf(format string, args ...any) {
	r.failed = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// TestUnavailableSkipsUnlessRequired pins the one rule of the real halves: a half that cannot
// run skips with its reason, and fails with it when REAL_PULSAR_REQUIRED=1, whatever CI says.
func TestUnavailableSkipsUnlessRequired(t *testing.T) {
	for _, c := range []struct {
		required, ci string
		fails        bool
	}{
		{"", "", false},
		{"", "true", false},
		{"1", "", true},
		{"1", "true", true},
		{"0", "true", false},
	} {
		t.Run(fmt.Sprintf("required=%q,CI=%q", c.required, c.ci), func(t *testing.T) {
			t.Setenv(EnvRequired, c.required)
			t.Setenv("CI", c.ci)
			r := &recorder{}
			done := make(chan struct{})
			go func() {
				defer close(done)
				Unavailable(r, "PULSAR_URL is not set")
			}()
			<-done
			if c.fails {
				if r.failed != "REAL_PULSAR_REQUIRED=1, but PULSAR_URL is not set" || r.skipped != "" {
					t.Fatalf("want a failure, got skip %q, failure %q", r.skipped, r.failed)
				}
				return
			}
			if r.skipped != "PULSAR_URL is not set" || r.failed != "" {
				t.Fatalf("want a skip, got skip %q, failure %q", r.skipped, r.failed)
			}
		})
	}
}
