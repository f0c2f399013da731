package process

import "syscall"

// sysProcAttr puts the child in a process group of its own and has the
// kernel kill it when the daemon dies.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
