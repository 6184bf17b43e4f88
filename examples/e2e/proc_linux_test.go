package e2e

import (
	"os/exec"
	"syscall"
)

// setProcAttr makes the kernel kill a started server if the test process dies
// without cleaning up (a timeout panic, a kill), so no server outlives the test.
func setProcAttr(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
