package daemon

import "testing"

// TestMemoryLimit: a daemon whose engines run outside it is held to its
// budget's limit; one that runs simulated engines inside is not.
func TestMemoryLimit(t *testing.T) {
	for _, tc := range []struct {
		runtime string
		want    int64
	}{
		{RuntimeProcess, DaemonMemoryLimit},
		{RuntimeDocker, DaemonMemoryLimit},
		{RuntimeSim, 0},
		{"", 0},
	} {
		if got := (Config{EngineRuntime: tc.runtime}).MemoryLimit(); got != tc.want {
			t.Errorf("runtime %q: limit %d, want %d", tc.runtime, got, tc.want)
		}
	}
}
