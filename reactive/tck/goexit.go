package tck

import "runtime"

// runtimeGoexit ends the calling goroutine after running its deferred calls,
// as testing.T.FailNow does.
func runtimeGoexit() { runtime.Goexit() }
