// Package cputime reads the process's CPU time, for the module's benchmarks: on two cores a
// benchmark's ns/op is wall time, which hides the work of its other goroutines (a worker
// pool's, a client's, an embedded broker's), while the CPU time of the whole process
// counts it.
//
// It imports the standard library only and is imported by _test.go files only.
package cputime

import "testing"

// Report runs f, which does b.N operations, and reports the process's CPU time (user and
// system, every goroutine's) over them as the metric "cpu-ns/msg".
func Report(b *testing.B, f func()) {
	b.Helper()
	start := Process()
	f()
	b.ReportMetric(float64(Process()-start)/float64(b.N), "cpu-ns/msg")
}
