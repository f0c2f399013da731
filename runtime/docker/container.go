package docker

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/network"

	hruntime "github.com/hearth-llm/hearth/runtime"
)

// Labels on every container Hearth starts: a restarted daemon finds its
// containers by node and engine, and adopts one only when its configuration
// hash matches what it would start now.
const (
	LabelNode   = "hearth.node"
	LabelEngine = "hearth.engine"
	LabelGPU    = "hearth.gpu"
	LabelModel  = "hearth.model"
	LabelConfig = "hearth.config"
	// LabelSim marks an image of the simulated engine; its value is the
	// flavour ("vllm", "sglang").
	LabelSim = "hearth.sim"
)

// Inside its container an engine serves on the engines' usual ports; Docker
// publishes them on loopback ports of the host that the launcher picks.
const (
	// (The HTTP port is the kind's, EngineKind.ImageHTTPPort.)
	eventsPort = 5557
	replayPort = 5558
	// hfCacheTarget is where both engines' images look for the Hugging Face
	// cache.
	hfCacheTarget = "/root/.cache/huggingface"
	// localModelsTarget is where a model given as a host directory is
	// mounted, read-only.
	localModelsTarget = "/models"
)

// containerPlan is one engine's container, everything but its host ports.
type containerPlan struct {
	name   string
	config container.Config
	host   container.HostConfig
	// hash identifies the configuration: the same spec, image and mounts
	// give the same hash, so a running container with it can be adopted.
	hash string
	// inside are the engine's ports in the container.
	inside hruntime.Ports
}

// planOptions are the launcher's settings that shape a container.
type planOptions struct {
	node     string
	image    string
	simImage string // the image's LabelSim value: "" for a real engine
	hfCache  string
	noGPU    bool
	hfToken  string
}

// planContainer builds the container for a spec. It is pure: the launcher
// adds host ports and talks to Docker.
func planContainer(spec hruntime.Spec, o planOptions) (containerPlan, error) {
	if err := CheckModel(cmp.Or(spec.ModelPath, spec.Model)); err != nil {
		return containerPlan{}, fmt.Errorf("docker %s: %w", spec.Name, err)
	}
	kind, ok := hruntime.Lookup(spec.Engine)
	if !ok || len(kind.Images) == 0 {
		return containerPlan{}, fmt.Errorf("docker %s: engine %q runs in no image", spec.Name, spec.Engine)
	}
	inside := hruntime.Ports{Host: "0.0.0.0", HTTP: kind.ImageHTTPPort, KVEvents: eventsPort, Replay: replayPort}
	var binds []string
	if o.hfCache != "" {
		binds = append(binds, o.hfCache+":"+hfCacheTarget)
	}
	if p := spec.ModelPath; filepath.IsAbs(p) {
		// A model in a directory of the host: mount it where the engine
		// can read it and name it by that path.
		target := localModelsTarget + "/" + filepath.Base(p)
		binds = append(binds, p+":"+target+":ro")
		spec.ModelPath = target
	}
	if spec.UsesKVStore() {
		// The node's SSD store at the same path inside as outside, so the
		// directory the engine is told is the one every engine shares.
		binds = append(binds, spec.KVStoreDir+":"+spec.KVStoreDir)
	}
	cmd := kind.ImageCommand(spec, inside)

	env := []string{"PYTHONHASHSEED=0"}
	if o.simImage != "" {
		// The real command line has no place for the modelled GPU, so
		// it travels beside it.
		env = append(env, hruntime.SimSettingsOf(spec).Env()...)
	}
	env = append(env, hruntime.EngineEnv(spec)...)
	env = append(env, spec.Env...)

	exposed := network.PortSet{}
	for _, p := range []int{inside.HTTP, inside.KVEvents, inside.Replay} {
		exposed[network.MustParsePort(strconv.Itoa(p)+"/tcp")] = struct{}{}
	}
	plan := containerPlan{
		name:   ContainerName(spec.Name),
		inside: inside,
		config: container.Config{
			Image:        o.image,
			Cmd:          cmd,
			Env:          env,
			ExposedPorts: exposed,
			Labels: map[string]string{
				LabelNode: o.node, LabelEngine: spec.Name, LabelModel: spec.Model,
				LabelGPU: spec.GPUIDs(),
			},
		},
		host: container.HostConfig{
			Binds: binds,
			// Both engines share tensors between processes through /dev/shm;
			// the host's IPC namespace gives them all of it.
			IpcMode: container.IPCModeHost,
			// No restart policy: the supervisor restarts, with backoff and a
			// diagnosis, and knows when it did.
			RestartPolicy: container.RestartPolicy{Name: container.RestartPolicyDisabled},
		},
	}
	if kind.PinsHostMemory {
		// The engine pins host memory for its KV tiers.
		plan.host.Resources.Ulimits = []*container.Ulimit{{Name: "memlock", Soft: -1, Hard: -1}}
	}
	if !o.noGPU {
		plan.host.Resources.DeviceRequests = []container.DeviceRequest{{
			Driver: "nvidia", DeviceIDs: strings.Split(spec.GPUIDs(), ","), Capabilities: [][]string{{"gpu"}},
		}}
	}
	plan.hash = configHash(plan)
	plan.config.Labels[LabelConfig] = plan.hash
	// The token is added after hashing: a new token is no reason to reload
	// the weights, and its value must not leak into a label.
	if o.hfToken != "" {
		plan.config.Env = append(plan.config.Env, "HF_TOKEN="+o.hfToken)
	}
	return plan, nil
}

// configHash is the first 16 hex digits of the SHA-256 of what the
// container runs.
func configHash(p containerPlan) string {
	b, _ := json.Marshal(struct { // plain values always marshal
		Config container.Config
		Host   container.HostConfig
	}{p.config, p.host})
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}

var nameUnsafe = regexp.MustCompile(`[^a-zA-Z0-9_.-]+`)

// ContainerName is the container of an engine: "hearth-" and the engine's
// name with characters Docker does not allow replaced ("host/gpu0" →
// "hearth-host-gpu0").
func ContainerName(engine string) string {
	return "hearth-" + strings.Trim(nameUnsafe.ReplaceAllString(engine, "-"), "-")
}

// repoID is a Hugging Face repository id: an owner and a name of letters,
// digits, '-', '_' and '.', neither starting with a dot.
var repoID = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,95}/[A-Za-z0-9][A-Za-z0-9_.-]{0,95}$`)

// CheckModel says whether name can be given to an engine: a Hugging Face
// repository id ("Qwen/Qwen3-14B-FP8"), a name without an owner as the
// catalog uses ("qwen3-14b-fp8"), or an absolute path of a directory on
// this host. The error is one sentence with an example.
func CheckModel(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("no model named: give a Hugging Face id such as Qwen/Qwen3-14B-FP8")
	case filepath.IsAbs(name):
		st, err := os.Stat(name)
		if err != nil || !st.IsDir() {
			return fmt.Errorf("model %q is not a directory on this host: give a directory holding config.json, or a Hugging Face id such as Qwen/Qwen3-14B-FP8", name)
		}
		return nil
	case strings.Contains(name, ".."), !repoID.MatchString(name) && !repoID.MatchString("x/"+name):
		return fmt.Errorf("model %q is not a Hugging Face model id: write it as owner/name, such as Qwen/Qwen3-14B-FP8", name)
	}
	return nil
}
