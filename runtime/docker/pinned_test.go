package docker_test

import (
	"context"
	"errors"
	"testing"

	hruntime "github.com/hearth-llm/hearth/runtime"
	"github.com/hearth-llm/hearth/runtime/docker"
	"github.com/hearth-llm/hearth/runtime/docker/dockertest"
)

// TestLaunchPlansThePinnedImage: a real engine of either kind, with no
// --image, is planned in the kind's pinned image for the driver's CUDA
// version (the -cu129 build below CUDA 13), and an --image with an older
// tag in that image; the launch names the image it looked for. Nothing
// can be pulled here, so each launch stops at the missing image.
func TestLaunchPlansThePinnedImage(t *testing.T) {
	cli := dockertest.Client(t)
	for _, tc := range []struct {
		kind  hruntime.Kind
		cuda  int
		image string // --image; "" for the pinned one
		want  string
	}{
		{hruntime.KindVLLM, 13000, "", "vllm/vllm-openai:v0.33.0"},
		{hruntime.KindVLLM, 12090, "", "vllm/vllm-openai:v0.33.0-cu129"},
		{hruntime.KindSGLang, 13000, "", "lmsysorg/sglang:v0.5.23"},
		{hruntime.KindSGLang, 12090, "", "lmsysorg/sglang:v0.5.23-cu129"},
		{hruntime.KindVLLM, 13000, "vllm/vllm-openai:v0.20.0", "vllm/vllm-openai:v0.20.0"},
		{hruntime.KindSGLang, 12090, "lmsysorg/sglang:v0.5.19-cu129", "lmsysorg/sglang:v0.5.19-cu129"},
	} {
		if _, err := cli.ImageInspect(context.Background(), tc.want); err == nil {
			t.Logf("skipping %s: the image is on this machine, and launching it would start a real engine", tc.want)
			continue
		}
		node := dockertest.Node(t, cli)
		l := &docker.Launcher{Docker: cli, Node: node, Image: tc.image, CUDAVersion: tc.cuda, NoPull: true, NoGPU: true, Logger: testLogger(t)}
		spec := simSpec(node, tc.kind)
		ctx, cancel := context.WithTimeout(context.Background(), bound)
		_, err := l.Launch(ctx, spec)
		cancel()
		var pe *docker.PullError
		if !errors.As(err, &pe) || pe.Image != tc.want {
			t.Errorf("%s on CUDA %d, --image %q: launch = %v, want the missing image %s", tc.kind, tc.cuda, tc.image, err, tc.want)
		}
	}
}
