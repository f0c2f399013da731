package runtime

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
)

// EngineSleep is how an engine kind gives its GPU memory back without
// stopping (docs/models.md): the flags and environment that turn it on,
// and its endpoints. They are development endpoints on the engine's own
// port, which Hearth binds to loopback and never exposes through its
// listener.
type EngineSleep struct {
	// Flags turn it on ({"--enable-sleep-mode"}); Env is the environment
	// it needs besides (vLLM serves the endpoints only with
	// VLLM_SERVER_DEV_MODE=1).
	Flags []string
	Env   []string
	// SleepPath takes a level (1: weights to host RAM, 2: weights
	// dropped) and gives the method's path and body; WakePath is the
	// wake's.
	SleepPath func(level int) (path string, body []byte)
	WakePath  string
	// MustBeIdle says the engine refuses to sleep with requests in flight
	// (SGLang asserts it); otherwise the sleep waits for them to finish.
	MustBeIdle bool
}

// ErrNoSleep is the error of Sleep and Wake for a kind without sleep mode.
var ErrNoSleep = errors.New("the engine kind has no sleep mode")

// Sleep asks the engine at baseURL (its loopback address) to sleep at
// level. It returns once the engine has released the memory: both
// engines answer only then.
func (k *EngineKind) Sleep(ctx context.Context, client *http.Client, baseURL string, level int) error {
	if k.SleepMode == nil {
		return fmt.Errorf("%s: %w", k.Name, ErrNoSleep)
	}
	if level != 1 && level != 2 {
		return fmt.Errorf("sleep level %d: want 1 or 2", level)
	}
	path, body := k.SleepMode.SleepPath(level)
	return postEngine(ctx, client, baseURL+path, body)
}

// Wake asks the engine at baseURL to take its memory back; it returns
// once the engine serves again.
func (k *EngineKind) Wake(ctx context.Context, client *http.Client, baseURL string) error {
	if k.SleepMode == nil {
		return fmt.Errorf("%s: %w", k.Name, ErrNoSleep)
	}
	return postEngine(ctx, client, baseURL+k.SleepMode.WakePath, nil)
}

func postEngine(ctx context.Context, client *http.Client, u string, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(body))
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("POST %s: %s: %s", u, resp.Status, bytes.TrimSpace(msg))
	}
	return nil
}

// vllmSleep is vLLM's sleep mode (vllm/entrypoints/serve/sleep/
// api_router.py): POST /sleep?level=N&mode=wait lets requests in flight
// finish before it sleeps (mode abort, the default, would end them);
// POST /wake_up with no tags wakes weights and KV cache.
var vllmSleep = &EngineSleep{
	Flags: []string{"--enable-sleep-mode"},
	Env:   []string{"VLLM_SERVER_DEV_MODE=1"},
	SleepPath: func(level int) (string, []byte) {
		return "/sleep?" + url.Values{"level": {strconv.Itoa(level)}, "mode": {"wait"}}.Encode(), nil
	},
	WakePath: "/wake_up",
}

// sglangSleep is SGLang's memory saver (--enable-memory-saver;
// --enable-weights-cpu-backup keeps a host copy of the weights, so that a
// resume needs no reload): POST /release_memory_occupation and
// /resume_memory_occupation with no tags move every kind of memory
// (weights, KV cache, CUDA graphs). A release asserts that the server is
// idle, so it comes only after the router drained the engine.
var sglangSleep = &EngineSleep{
	Flags: []string{"--enable-memory-saver", "--enable-weights-cpu-backup"},
	SleepPath: func(int) (string, []byte) {
		return "/release_memory_occupation", []byte(`{}`)
	},
	WakePath:   "/resume_memory_occupation",
	MustBeIdle: true,
}
