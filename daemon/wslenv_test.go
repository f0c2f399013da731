package daemon

import (
	"context"
	"slices"
	"testing"

	"github.com/hearth-llm/hearth/installer/wsl"
	"github.com/hearth-llm/hearth/installer/wsl/wsltest"
	hruntime "github.com/hearth-llm/hearth/runtime"
)

// TestWSLEngineEnv: on a WSL2 host real vLLM engines pin host memory
// (VLLM_WSL2_ENABLE_PIN_MEMORY=1); SGLang, simulated engines and other
// hosts get nothing.
func TestWSLEngineEnv(t *testing.T) {
	t.Parallel()
	rig := wsl.Detect(context.Background(), wsltest.Root{}.Build(t))
	linux := wsl.Detect(context.Background(), wsltest.Root{Kernel: "6.12.48+deb13-amd64"}.Build(t))
	specs := func() []hruntime.Spec {
		return []hruntime.Spec{
			{Name: "v", Engine: hruntime.KindVLLM},
			{Name: "s", Engine: hruntime.KindSGLang},
			{Name: "sim", Engine: hruntime.KindVLLM, Simulated: true},
		}
	}
	on := specs()
	wslEngineEnv(on, rig)
	if !slices.Equal(on[0].Env, []string{"VLLM_WSL2_ENABLE_PIN_MEMORY=1"}) || on[1].Env != nil || on[2].Env != nil {
		t.Errorf("on WSL2: %q, %q, %q", on[0].Env, on[1].Env, on[2].Env)
	}
	off := specs()
	wslEngineEnv(off, linux)
	if off[0].Env != nil {
		t.Errorf("on Linux: %q", off[0].Env)
	}
	if rig.PinnedLimit() != 16<<30 {
		t.Errorf("pinned limit of a 32 GiB VM: %d", rig.PinnedLimit())
	}
}
