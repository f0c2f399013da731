package main

import (
	"log/slog"
	"runtime/debug"
	"testing"
)

// TestSetMemoryLimit: hearth up's process gets the limit it is given,
// none for 0, and GOMEMLIMIT, when set, wins over it.
func TestSetMemoryLimit(t *testing.T) {
	old := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(old) })
	log := slog.New(slog.DiscardHandler)
	for _, tc := range []struct {
		name  string
		env   string
		limit int64
		want  int64
	}{
		{"a limit", "", 200 << 20, 200 << 20},
		{"none", "", 0, 1 << 40},
		{"GOMEMLIMIT wins", "1GiB", 200 << 20, 1 << 40},
	} {
		t.Run(tc.name, func(t *testing.T) {
			debug.SetMemoryLimit(1 << 40)
			setMemoryLimit(func(k string) string {
				if k == "GOMEMLIMIT" {
					return tc.env
				}
				return ""
			})(tc.limit, log)
			if got := debug.SetMemoryLimit(-1); got != tc.want {
				t.Errorf("limit %d, want %d", got, tc.want)
			}
		})
	}
}
