package etcdtest

import (
	"os/exec"
	"syscall"
)

// setProcAttr makes the kernel kill the etcd server if the test process dies
// without cleaning up (a timeout panic, a kill), so no server outlives it.
func setProcAttr(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
