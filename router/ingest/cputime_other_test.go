//go:build !linux

package ingest

import "time"

// threadCPUTime is not measured on this platform; benchmarks omit the
// per-CPU-second figures.
func threadCPUTime() time.Duration { return 0 }
