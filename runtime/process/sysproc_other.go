//go:build unix && !linux

package process

import "syscall"

// sysProcAttr puts the child in a process group of its own. Outside Linux
// there is no parent-death signal: a daemon killed with SIGKILL leaves its
// engines running.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
