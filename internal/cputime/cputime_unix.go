//go:build unix

package cputime

import (
	"syscall"
	"time"
)

// Process returns the CPU time the process has used so far, user and system
// (getrusage(RUSAGE_SELF)). It panics if the call fails, which it does not on a valid
// RUSAGE_SELF.
func Process() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		panic("cputime: getrusage: " + err.Error())
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
