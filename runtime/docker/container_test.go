package docker

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/moby/moby/api/types/jsonstream"

	hruntime "github.com/hearth-llm/hearth/runtime"
)

func testSpec(kind hruntime.Kind) hruntime.Spec {
	return hruntime.Spec{
		Name: "rig/gpu1", Engine: kind, Model: "qwen3-14b-fp8", ModelPath: "Qwen/Qwen3-14B-FP8",
		GPU:         hruntime.GPU{Index: 1, UUID: "GPU-1234", Kind: "rtx4090"},
		MaxModelLen: 32768, GPUMemoryUtilization: 0.88, Seed: 7,
	}
}

func TestPlanContainerVLLM(t *testing.T) {
	p, err := planContainer(testSpec(hruntime.KindVLLM), planOptions{
		node: "rig", image: "vllm/vllm-openai:v0.20.0", hfCache: "/srv/hf", hfToken: "hf_secret",
	})
	if err != nil {
		t.Fatal(err)
	}
	if p.name != "hearth-rig-gpu1" {
		t.Errorf("name = %q", p.name)
	}
	// The image's entrypoint is `vllm serve`: the command starts with the model.
	want := hruntime.KindVLLM.Descriptor().Args(testSpec(hruntime.KindVLLM), hruntime.Ports{Host: "0.0.0.0", HTTP: 8000, KVEvents: 5557, Replay: 5558})
	if !slices.Equal(p.config.Cmd, want) {
		t.Errorf("cmd = %q\nwant %q", p.config.Cmd, want)
	}
	for _, kv := range []string{"PYTHONHASHSEED=0", "HF_TOKEN=hf_secret"} {
		if !slices.Contains(p.config.Env, kv) {
			t.Errorf("env %q lacks %s", p.config.Env, kv)
		}
	}
	if slices.ContainsFunc(p.config.Env, func(s string) bool { return strings.HasPrefix(s, "HEARTH_SIM_") }) {
		t.Errorf("a real engine gets the simulation's settings: %q", p.config.Env)
	}
	labels := p.config.Labels
	if labels[LabelNode] != "rig" || labels[LabelEngine] != "rig/gpu1" || labels[LabelGPU] != "GPU-1234" ||
		labels[LabelModel] != "qwen3-14b-fp8" || labels[LabelConfig] != p.hash || len(p.hash) != 16 {
		t.Errorf("labels = %v", labels)
	}
	if got := p.host.Resources.DeviceRequests; len(got) != 1 || got[0].Driver != "nvidia" ||
		!slices.Equal(got[0].DeviceIDs, []string{"GPU-1234"}) || !slices.Equal(got[0].Capabilities[0], []string{"gpu"}) {
		t.Errorf("device requests = %+v", got)
	}
	if p.host.IpcMode != "host" || p.host.RestartPolicy.Name != "no" || !slices.Equal(p.host.Binds, []string{"/srv/hf:/root/.cache/huggingface"}) {
		t.Errorf("host config = %+v", p.host)
	}
}

func TestPlanContainerSGLangSim(t *testing.T) {
	spec := testSpec(hruntime.KindSGLang)
	spec.Speedup = 20
	spec.AllowWriteTools, spec.MinToolCalls, spec.MaxToolCalls = true, 2, 5
	spec.EngineVersion = "0.5.19"
	p, err := planContainer(spec, planOptions{node: "rig", image: "hearth/sim-sglang:x", simImage: "sglang", noGPU: true})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(p.config.Cmd[:3], []string{"python3", "-m", "sglang.launch_server"}) || !slices.Contains(p.config.Cmd, "30000") {
		t.Errorf("cmd = %q", p.config.Cmd)
	}
	if p.inside.HTTP != 30000 {
		t.Errorf("inside ports = %+v", p.inside)
	}
	for _, kv := range []string{"HEARTH_SIM_GPU=rtx4090", "HEARTH_SIM_SEED=7", "HEARTH_SIM_SPEEDUP=20",
		"HEARTH_SIM_TOOL_CALLS=2-5", "HEARTH_SIM_ALLOW_WRITE_TOOLS=1", "HEARTH_SIM_ENGINE_VERSION=0.5.19"} {
		if !slices.Contains(p.config.Env, kv) {
			t.Errorf("env %q lacks %s", p.config.Env, kv)
		}
	}
	if len(p.host.Resources.DeviceRequests) != 0 {
		t.Errorf("--gpu-runtime none still requests a GPU: %+v", p.host.Resources.DeviceRequests)
	}
}

func TestConfigHash(t *testing.T) {
	opts := planOptions{node: "rig", image: "img:1"}
	base, _ := planContainer(testSpec(hruntime.KindVLLM), opts)
	withToken := opts
	withToken.hfToken = "hf_other"
	same, _ := planContainer(testSpec(hruntime.KindVLLM), withToken)
	if base.hash != same.hash {
		t.Errorf("a new HF_TOKEN changes the hash: the container would be replaced for nothing")
	}
	if strings.Contains(same.config.Labels[LabelConfig], "hf_other") {
		t.Error("the token leaks into a label")
	}
	changed := testSpec(hruntime.KindVLLM)
	changed.MaxModelLen = 16384
	other, _ := planContainer(changed, opts)
	otherImage, _ := planContainer(testSpec(hruntime.KindVLLM), planOptions{node: "rig", image: "img:2"})
	if other.hash == base.hash || otherImage.hash == base.hash {
		t.Error("a changed context length or image keeps the hash: a stale container would be adopted")
	}
}

func TestCheckModel(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name string
		ok   bool
	}{
		{"Qwen/Qwen3-14B-FP8", true},
		{"qwen3-14b-fp8", true},
		{dir, true},
		{"", false},
		{"Qwen/Qwen3 14B", false},
		{"../../etc/passwd", false},
		{"Qwen/../etc", false},
		{"a/b/c", false},
		{"-rf/x", false},
		{"/no/such/dir", false},
		{"Qwen/Qwen3-14B-FP8; rm -rf /", false},
	} {
		err := CheckModel(tc.name)
		if (err == nil) != tc.ok {
			t.Errorf("CheckModel(%q) = %v, want ok=%v", tc.name, err, tc.ok)
		}
		if err != nil && !strings.Contains(err.Error(), "Qwen/Qwen3-14B-FP8") {
			t.Errorf("CheckModel(%q) = %q: give an example", tc.name, err)
		}
	}
}

func TestDefaultImage(t *testing.T) {
	for _, tc := range []struct {
		kind hruntime.Kind
		cuda int
		want string
	}{
		{hruntime.KindVLLM, 13000, "vllm/vllm-openai:v0.33.0"},
		{hruntime.KindVLLM, 12090, "vllm/vllm-openai:v0.33.0-cu129"},
		{hruntime.KindVLLM, 0, "vllm/vllm-openai:v0.33.0-cu129"},
		{hruntime.KindSGLang, 13010, "lmsysorg/sglang:v0.5.23"},
		{hruntime.KindSGLang, 12080, "lmsysorg/sglang:v0.5.23-cu129"},
	} {
		if got, err := DefaultImage(tc.kind, tc.cuda); err != nil || got != tc.want {
			t.Errorf("DefaultImage(%s, %d) = %q, %v; want %q", tc.kind, tc.cuda, got, err, tc.want)
		}
	}
	if _, err := DefaultImage("llamacpp", 13000); err == nil {
		t.Error("an unknown kind has an image")
	}
}

func TestRequiredCUDA(t *testing.T) {
	for _, tc := range []struct {
		image string
		want  int
	}{
		{"vllm/vllm-openai:v0.20.0", 13000},
		{"vllm/vllm-openai:v0.20.0-cu129", 12090},
		{"lmsysorg/sglang:v0.5.19", 13000},
		{"lmsysorg/sglang:v0.5.19-cu129", 12090},
		{"vllm/vllm-openai:v0.33.0", 13000},
		{"vllm/vllm-openai:v0.33.0-cu129", 12090},
		{"lmsysorg/sglang:v0.5.23-cu129", 12090},
		{"example.org/my-vllm:latest", 0},
	} {
		if got := RequiredCUDA(tc.image); got != tc.want {
			t.Errorf("RequiredCUDA(%q) = %d, want %d", tc.image, got, tc.want)
		}
	}
	// Every default image states its requirement, which its driver meets.
	for _, kind := range []hruntime.Kind{hruntime.KindVLLM, hruntime.KindSGLang} {
		for _, cuda := range []int{0, 12090, 13000} {
			image, _ := DefaultImage(kind, cuda)
			if need := RequiredCUDA(image); need == 0 || (cuda != 0 && need > cuda) {
				t.Errorf("DefaultImage(%s, %d) = %s, which needs CUDA %d", kind, cuda, image, need)
			}
		}
	}
}

func TestClassifyPull(t *testing.T) {
	for _, tc := range []struct{ msg, cause string }{
		{`Get "https://registry-1.docker.io/v2/": dial tcp: lookup registry-1.docker.io on 10.255.255.53:53: no such host`, PullNoNetwork},
		{`Get "https://registry-1.docker.io/v2/": net/http: TLS handshake timeout`, PullNoNetwork},
		{`manifest for vllm/vllm-openai:v9.9 not found: manifest unknown: manifest unknown`, PullNotFound},
		{`pull access denied for hearth/nope, repository does not exist or may require 'docker login': denied: requested access to the resource is denied`, PullAuth},
		{`Head "http://127.0.0.1:5000/v2/x/manifests/1": no basic auth credentials`, PullAuth},
		{`unauthorized: authentication required`, PullAuth},
		{`write /var/lib/docker/tmp/x: no space left on device`, PullOther},
	} {
		e := classifyPull("img:1", errors.New(tc.msg))
		if e.Cause != tc.cause {
			t.Errorf("classifyPull(%q) = %s, want %s", tc.msg, e.Cause, tc.cause)
		}
		if !strings.Contains(e.Error(), "img:1") || !strings.Contains(e.Error(), tc.msg) {
			t.Errorf("error %q should name the image and keep Docker's words", e.Error())
		}
	}
}

func TestPullTracker(t *testing.T) {
	var tr pullTracker
	tr.image = "img:1"
	msgs := []jsonstream.Message{
		{Status: "Pulling from library/img", ID: "1"},
		{Status: "Pulling fs layer", ID: "a"},
		{Status: "Pulling fs layer", ID: "b"},
		{Status: "Already exists", ID: "c"},
		{Status: "Downloading", ID: "a", Progress: &jsonstream.Progress{Current: 50, Total: 100}},
		{Status: "Downloading", ID: "b", Progress: &jsonstream.Progress{Current: 100, Total: 300}},
		{Status: "Download complete", ID: "a"},
		{Status: "Digest: sha256:abc"},
	}
	for _, m := range msgs {
		tr.add(m)
	}
	p := tr.progress()
	if p.Layers != 3 || p.Done != 2 || p.Current != 200 || p.Total != 400 || p.Percent() != 50 {
		t.Errorf("progress = %+v (%.0f%%)", p, p.Percent())
	}
	if (PullProgress{}).Percent() != -1 {
		t.Error("no size known should be -1")
	}
}

func TestContainerName(t *testing.T) {
	for in, want := range map[string]string{
		"rig/gpu0":         "hearth-rig-gpu0",
		"my rig.lan/gpu 1": "hearth-my-rig.lan-gpu-1",
		"/x/":              "hearth-x",
	} {
		if got := ContainerName(in); got != want {
			t.Errorf("ContainerName(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestPlanContainerKVStore: the node's SSD store is mounted at its own path,
// and SGLang told of it, only in a container whose engine has a tier for it.
func TestPlanContainerKVStore(t *testing.T) {
	const store = "/var/lib/hearth/kvstore"
	const envVar = "SGLANG_HICACHE_FILE_BACKEND_STORAGE_DIR=" + store
	cases := []struct {
		engine  hruntime.Kind
		ramGiB  float64
		mounted bool
	}{
		{hruntime.KindSGLang, 16, true},
		{hruntime.KindSGLang, 0, false}, // no host tier to stage through
		{hruntime.KindVLLM, 16, false},  // v0.20.0 has no file tier
	}
	for _, tc := range cases {
		spec := testSpec(tc.engine)
		spec.KVOffloadingGiB, spec.KVStoreDir = tc.ramGiB, store
		p, err := planContainer(spec, planOptions{node: "rig", image: "img", hfCache: "/srv/hf"})
		if err != nil {
			t.Fatal(err)
		}
		want := []string{"/srv/hf:/root/.cache/huggingface"}
		if tc.mounted {
			want = append(want, store+":"+store)
		}
		if !slices.Equal(p.host.Binds, want) {
			t.Errorf("%s, %g GiB RAM tier: binds %q, want %q", tc.engine, tc.ramGiB, p.host.Binds, want)
		}
		if got := slices.Contains(p.config.Env, envVar) && slices.Contains(p.config.Cmd, "file"); got != (tc.mounted && tc.engine == hruntime.KindSGLang) {
			t.Errorf("%s, %g GiB RAM tier: env %q, cmd %q", tc.engine, tc.ramGiB, p.config.Env, p.config.Cmd)
		}
	}
}
