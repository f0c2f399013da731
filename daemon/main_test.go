//go:build linux

package daemon

import (
	"fmt"
	"os"
	"testing"

	"github.com/hearth-llm/hearth/runtime/docker/dockertest"
)

// TestMain lets BenchmarkGatewayOverhead run this test binary as the
// gateway process it measures.
func TestMain(m *testing.M) {
	if spec := os.Getenv(benchGatewayEnv); spec != "" {
		if err := runBenchGateway(spec); err != nil {
			fmt.Fprintln(os.Stderr, "gateway:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	code := m.Run()
	dockertest.RemoveBuilds()
	os.Exit(code)
}
