package main

import (
	"log/slog"
	"runtime/debug"
)

// setMemoryLimit gives the Go runtime of this process a soft memory limit
// of limit bytes (0: none), unless GOMEMLIMIT sets one. main hands it to
// hearth up (environment.memoryLimit); commands run in tests share the
// test's process and get none.
func setMemoryLimit(getenv func(string) string) func(limit int64, log *slog.Logger) {
	return func(limit int64, log *slog.Logger) {
		if limit <= 0 || getenv("GOMEMLIMIT") != "" {
			return
		}
		debug.SetMemoryLimit(limit)
		log.Debug("soft memory limit", "bytes", limit)
	}
}
