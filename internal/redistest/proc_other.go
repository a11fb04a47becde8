//go:build !linux

package redistest

import "os/exec"

// dieWithTest does nothing where the kernel has no parent-death signal: the test's cleanup
// stops the server.
func dieWithTest(*exec.Cmd) {}
