package router

import (
	"syscall"
	"unsafe"
)

// decisionCPUTime returns the CPU time consumed by the calling thread, in
// nanoseconds. Benchmarks time single decisions with it as well as with the
// wall clock, because on a shared machine the wall clock also counts the
// time the thread waited for a CPU.
func decisionCPUTime() int64 {
	const clockThreadCPUTimeID = 3
	var ts syscall.Timespec
	_, _, errno := syscall.Syscall(syscall.SYS_CLOCK_GETTIME, clockThreadCPUTimeID, uintptr(unsafe.Pointer(&ts)), 0)
	if errno != 0 {
		return 0
	}
	return ts.Nano()
}

const haveDecisionCPUTime = true
