package runtime

import (
	"context"
	"errors"
	"fmt"
)

// Kind names an inference engine implementation.
type Kind string

// The engines Hearth can start.
const (
	KindVLLM   Kind = "vllm"
	KindSGLang Kind = "sglang"
	KindSim    Kind = "sim" // the built-in simulated vLLM server
)

// Spec describes one engine instance to start.
type Spec struct {
	Name  string // unique among instances, e.g. "gpu0"
	Kind  Kind
	Model string // served model, e.g. "qwen3-14b-fp8"
	// GPU is Hearth's short name of the GPU kind ("rtx4090"); the simulated
	// engine models it, real engines ignore it.
	GPU string
	// DeviceIDs are the GPUs handed to the engine (CUDA device indices).
	DeviceIDs []string
	// Host is the address the engine's ports are reachable on.
	Host string
	// HTTPPort, KVEventsPort and KVReplayPort are the engine's OpenAI API,
	// ZMQ KV-event publisher and replay ports; 0 picks free ones.
	HTTPPort, KVEventsPort, KVReplayPort int
	// Speedup runs a simulated engine's clock faster than real time.
	Speedup float64
	Seed    int64
}

// Validate reports what is wrong with the spec, if anything.
func (s Spec) Validate() error {
	switch {
	case s.Name == "":
		return errors.New("engine spec: name is empty")
	case s.Kind != KindVLLM && s.Kind != KindSGLang && s.Kind != KindSim:
		return fmt.Errorf("engine spec %s: unknown kind %q", s.Name, s.Kind)
	case s.Model == "":
		return fmt.Errorf("engine spec %s: model is empty", s.Name)
	case s.Speedup < 0:
		return fmt.Errorf("engine spec %s: negative speedup", s.Name)
	}
	return nil
}

// Instance is a started engine and where to reach it.
type Instance struct {
	Spec Spec
	// BaseURL is the engine's OpenAI API root, e.g. "http://127.0.0.1:8100".
	BaseURL string
	// KVEvents and KVReplay are ZMQ endpoints, e.g. "tcp://127.0.0.1:5557";
	// empty when the engine publishes no events (approximate routing).
	KVEvents, KVReplay string
}

// Engine starts, stops and lists engine instances. Implementations: the
// Docker launcher (runtime/docker) and the in-process simulated engine
// (runtime/sim).
type Engine interface {
	Start(ctx context.Context, spec Spec) (Instance, error)
	Stop(ctx context.Context, name string) error
	List(ctx context.Context) ([]Instance, error)
}

// ErrNotFound is returned by Stop for an instance the engine does not know.
var ErrNotFound = errors.New("engine instance not found")
