package redistest

import (
	"os/exec"
	"syscall"
)

// dieWithTest asks the kernel to kill the redis-server when the test binary dies, so that a
// test binary killed by its timeout or a crash leaves no server behind (a cleanup does not
// run then).
func dieWithTest(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
