package daemon

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/moby/moby/client"

	hruntime "github.com/hearth-llm/hearth/runtime"
	"github.com/hearth-llm/hearth/runtime/docker/dockertest"
)

// TestSimImageFollowsTheBinary: hearth up builds its simulated image when
// missing, keeps it while the binary is the same, and builds it again for a
// rebuilt binary under the same version tag.
func TestSimImageFollowsTheBinary(t *testing.T) {
	cli := dockertest.Client(t)
	bin := dockertest.StaticHearth(t)
	image := "hearth-test/sim-follow:" + strings.ToLower(dockertest.Node(t, cli))
	t.Cleanup(func() { cli.ImageRemove(context.Background(), image, client.ImageRemoveOptions{Force: true}) })
	ctx := context.Background()
	log := slog.New(slog.DiscardHandler)
	imageID := func() string {
		got, err := cli.ImageInspect(ctx, image)
		if err != nil {
			t.Fatalf("inspect %s: %v", image, err)
		}
		return got.ID
	}
	if err := ensureSimImage(ctx, cli, hruntime.KindVLLM, image, bin, log); err != nil {
		t.Fatal(err)
	}
	first := imageID()
	if err := ensureSimImage(ctx, cli, hruntime.KindVLLM, image, bin, log); err != nil {
		t.Fatal(err)
	}
	if imageID() != first {
		t.Error("the same binary built the image again")
	}

	// A rebuilt binary: the same program with a byte more at its end.
	data, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	rebuilt := filepath.Join(t.TempDir(), "hearth")
	if err := os.WriteFile(rebuilt, append(data, 0), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := ensureSimImage(ctx, cli, hruntime.KindVLLM, image, rebuilt, log); err != nil {
		t.Fatal(err)
	}
	if imageID() == first {
		t.Error("a rebuilt binary kept the old image")
	}
}
