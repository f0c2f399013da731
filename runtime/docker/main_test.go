package docker_test

import (
	"os"
	"testing"

	"github.com/hearth-llm/hearth/runtime/docker/dockertest"
)

// TestMain removes the hearth binaries the tests built for their images.
func TestMain(m *testing.M) {
	code := m.Run()
	dockertest.RemoveBuilds()
	os.Exit(code)
}
