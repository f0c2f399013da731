//go:build linux

package tokenizer

import (
	"syscall"
	"testing"
	"time"
)

// processCPU returns the CPU time the process has used so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// reportCPU adds a cpu-ns/op metric: on a machine shared with other work,
// wall time per op overstates the cost, CPU time does not.
func reportCPU(b *testing.B) func() { return reportCPUTokens(b, 0) }

// reportCPUTokens also reports tokens per CPU second when tokensPerOp > 0.
func reportCPUTokens(b *testing.B, tokensPerOp int) func() {
	start := processCPU()
	return func() {
		cpu := processCPU() - start
		b.ReportMetric(float64(cpu)/float64(b.N), "cpu-ns/op")
		if tokensPerOp > 0 && cpu > 0 {
			b.ReportMetric(float64(tokensPerOp)*float64(b.N)/cpu.Seconds()/1e6, "Mtok/cpu-s")
		}
	}
}
