package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/hearth-llm/hearth/catalog"
	"github.com/hearth-llm/hearth/nodes"
	hruntime "github.com/hearth-llm/hearth/runtime"
	"github.com/hearth-llm/hearth/runtime/docker"
	"github.com/hearth-llm/hearth/runtime/process"
	"github.com/hearth-llm/hearth/runtime/sim"
	"github.com/hearth-llm/hearth/tokenizer"
)

// planEngines turns the command line into one engine per GPU (per --tp
// GPUs), with the first GPU's facts by engine name for the console.
func planEngines(cfg upConfig) ([]hruntime.Spec, map[string]nodes.GPU, error) {
	var gpus []nodes.GPU
	engine := hruntime.KindSim
	if cfg.engine != "" {
		engine = hruntime.Kind(cfg.engine)
	}
	if cfg.sim != "" {
		var err error
		if gpus, err = nodes.ParseSimSpec(cfg.sim); err != nil {
			return nil, nil, fmt.Errorf("%w: --sim: %v", errUsage, err)
		}
		if cfg.engineRuntime == "docker" {
			// Containers are named after their node: two daemons sharing a
			// Docker Engine must not share names.
			for i := range gpus {
				gpus[i].Node = cfg.node
			}
		}
	} else {
		for _, i := range cfg.gpus {
			gpus = append(gpus, nodes.GPU{Node: cfg.node, Index: i, Name: fmt.Sprintf("GPU %d", i), UtilizationPct: -1, TemperatureC: -1})
		}
	}
	tp := max(cfg.tp, 1)
	if len(gpus)%tp != 0 {
		return nil, nil, fmt.Errorf("%w: --tp %d splits each engine over %d GPUs, and %d GPUs do not divide by it", errUsage, tp, tp, len(gpus))
	}
	toSpec := func(g nodes.GPU) hruntime.GPU {
		return hruntime.GPU{Index: g.Index, UUID: g.UUID, Kind: g.Kind, Name: g.Name, Node: g.Node}
	}
	specs := make([]hruntime.Spec, len(gpus)/tp)
	byName := make(map[string]nodes.GPU, len(specs))
	for i := range specs {
		gpu := gpus[i*tp]
		var peers []hruntime.GPU
		for _, g := range gpus[i*tp+1 : (i+1)*tp] {
			peers = append(peers, toSpec(g))
		}
		spec := hruntime.Spec{
			Name:   fmt.Sprintf("%s/gpu%d", gpu.Node, gpu.Index),
			Engine: engine,
			Model:  cfg.models[i%len(cfg.models)],
			// The engine loads the model's repository; clients ask for
			// Hearth's name of it.
			ModelPath:       modelRepo(cfg.models[i%len(cfg.models)]),
			ExtraArgs:       cfg.engineArgs,
			GPU:             toSpec(gpu),
			TensorParallel:  peers,
			MaxModelLen:     cfg.maxModelLen,
			KVOffloadingGiB: cfg.kvOffloadGiB,
			Speedup:         cfg.speedup,
			Seed:            cfg.seed + int64(gpu.Index),
		}
		if engine != hruntime.KindSim {
			if err := planMemory(&spec, cfg, gpus[i*tp:(i+1)*tp]); err != nil {
				return nil, nil, err
			}
		}
		estimate, err := estimateProfile(spec)
		if err != nil {
			return nil, nil, fmt.Errorf("up: engine %s: %w", spec.Name, err)
		}
		spec.Estimate = estimate
		if cfg.tweakSpec != nil {
			cfg.tweakSpec(&spec)
		}
		specs[i] = spec
		byName[spec.Name] = gpu
	}
	return specs, byName, nil
}

// planMemory sets a real engine's memory fraction and context length from
// the plan of what fits its GPUs (catalog.PlanEngines), and fails with the
// plan's one sentence when the model does not fit. GPUs of unknown size
// (named by index, before discovery) and models Hearth has no shape for
// keep the engine's own defaults.
func planMemory(spec *hruntime.Spec, cfg upConfig, gpus []nodes.GPU) error {
	uses := make([]catalog.GPUUse, len(gpus))
	for i, g := range gpus {
		if uses[i] = gpuUseOf(g); uses[i].GPU.MemoryBytes == 0 {
			return nil
		}
	}
	model, err := catalog.ResolveModel(spec.ModelPath, filepath.Join(cfg.hfCache, "hub"))
	if err != nil {
		return nil // the engine reads the model itself
	}
	plan, err := catalog.PlanEngines(catalog.PlanRequest{GPUs: uses, Model: model, TP: len(gpus), MaxModelLen: spec.MaxModelLen})
	if err != nil {
		return fmt.Errorf("up: engine %s: %w", spec.Name, err)
	}
	e := plan.Engines[0]
	spec.GPUMemoryUtilization = e.MemoryFractionFor(string(spec.Engine))
	spec.MaxModelLen = e.MaxModelLen
	return nil
}

// estimateProfile is what the router assumes of an engine until the engine
// tells its KV capacity: the simulated engine's model of the GPU and model,
// which knows the boards and models Hearth knows.
func estimateProfile(spec hruntime.Spec) (hruntime.Profile, error) {
	cfg := sim.ConfigOf(spec)
	if cfg.GPU == "" {
		cfg.GPU = "rtx4090" // an unknown board: size it as the common case
	}
	if _, ok := catalog.LookupModel(cfg.Model); !ok {
		// A model Hearth has no figures for: the engine's own measurement
		// will say its capacity.
		return hruntime.Profile{BlockSize: hruntime.BlockSize, MaxModelLen: spec.MaxModelLen}, nil
	}
	p, err := sim.ProfileOf(cfg)
	if err != nil {
		return hruntime.Profile{}, err
	}
	return hruntime.Profile{
		GPUBlocks: p.GPUBlocks, BlockSize: p.BlockSize, CPUBlocks: p.CPUBlocks, BlockBytes: p.BlockBytes,
		PrefillTokensPerSec: p.PrefillTokensPerSec, LoadBytesPerSec: p.LoadBytesPerSec, MaxModelLen: p.MaxModelLen,
	}, nil
}

// modelRepo is the Hugging Face repository of a catalog model, or the name
// itself.
func modelRepo(name string) string {
	if m, ok := catalog.LookupModel(name); ok {
		return m.Repo
	}
	return name
}

// newLauncher builds the runtime --engine-runtime names, and what closes
// it.
func newLauncher(ctx context.Context, cfg upConfig, tok *tokenizer.Model, progress func(string, docker.PullProgress), log *slog.Logger) (hruntime.Launcher, func(), error) {
	if cfg.engineRuntime == "docker" {
		return newDockerLauncher(ctx, cfg, progress, log)
	}
	l, err := newLocalLauncher(cfg, tok, log)
	return l, func() {}, err
}

func newLocalLauncher(cfg upConfig, tok *tokenizer.Model, log *slog.Logger) (hruntime.Launcher, error) {
	switch cfg.engineRuntime {
	case "process":
		hearth := cfg.hearthBinary
		if hearth == "" {
			exe, err := os.Executable()
			if err != nil {
				return nil, fmt.Errorf("up: the hearth binary, to run engines: %w", err)
			}
			hearth = exe
		}
		return &process.Launcher{Hearth: hearth, Env: os.Environ(), Logger: log.With("component", "engine")}, nil
	default:
		return &sim.Launcher{Tokenizer: tok, Logger: log.With("component", "engine")}, nil
	}
}

// engineJSON is one engine in GET /api/v1/engines.
type engineJSON struct {
	Name      string    `json:"name"`
	Runtime   string    `json:"runtime"`
	Kind      string    `json:"kind"`
	Model     string    `json:"model"`
	GPU       int       `json:"gpu"`
	GPUName   string    `json:"gpu_name,omitempty"`
	State     string    `json:"state"`
	PID       int       `json:"pid,omitempty"`
	Container string    `json:"container,omitempty"`
	BaseURL   string    `json:"base_url"`
	Restarts  int       `json:"restarts"`
	LastError string    `json:"last_error"`
	Since     time.Time `json:"since"`
	KVBlocks  int       `json:"kv_blocks,omitempty"`
}

func engineJSONOf(st hruntime.Status) engineJSON {
	return engineJSON{
		Name: st.Name, Runtime: st.Runtime, Kind: string(st.Engine), Model: st.Model,
		GPU: st.GPU.Index, GPUName: st.GPU.Name, State: string(st.State),
		PID: st.PID, Container: st.Container, BaseURL: st.BaseURL, Restarts: st.Restarts,
		LastError: st.LastError, Since: st.Since.UTC(), KVBlocks: st.Profile.GPUBlocks,
	}
}

// enginesHandler serves GET /api/v1/engines.
func enginesHandler(sup *hruntime.Supervisor) fiber.Handler {
	return func(c *fiber.Ctx) error {
		statuses := sup.Engines()
		out := make([]engineJSON, len(statuses))
		for i, st := range statuses {
			out[i] = engineJSONOf(st)
		}
		return c.JSON(fiber.Map{"engines": out})
	}
}

// engineLogsHandler serves GET /api/v1/engines/:name/logs: the engine's last
// output lines, as text.
func engineLogsHandler(sup *hruntime.Supervisor) fiber.Handler {
	return func(c *fiber.Ctx) error {
		name := c.Params("name")
		if n, err := url.PathUnescape(name); err == nil {
			name = n
		}
		lines, ok := sup.Logs(name)
		if !ok {
			return c.Status(fiber.StatusNotFound).JSON(fiber.Map{"error": fmt.Sprintf("no engine named %q", name)})
		}
		c.Set(fiber.HeaderContentType, fiber.MIMETextPlainCharsetUTF8)
		if len(lines) == 0 {
			return c.SendString("")
		}
		return c.SendString(strings.Join(lines, "\n") + "\n")
	}
}

// runEngines prints the engines of a running daemon.
func runEngines(ctx context.Context, env *environment, args []string) error {
	fs := newFlagSet(env, "engines", "engines [--addr URL] [--json]")
	addr := fs.String("addr", "http://127.0.0.1:8000", "the daemon's address")
	asJSON := fs.Bool("json", false, "print the daemon's JSON as it is")
	key := fs.String("api-key", "", "API key, when the daemon needs one (also $HEARTH_API_KEY)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	body, err := getDaemon(ctx, env, *addr, "/api/v1/engines", *key)
	if err != nil {
		return err
	}
	if *asJSON {
		_, err := env.stdout.Write(body)
		return err
	}
	var list struct {
		Engines []engineJSON `json:"engines"`
	}
	if err := json.Unmarshal(body, &list); err != nil {
		return fmt.Errorf("engines: %w", err)
	}
	tw := tabwriter.NewWriter(env.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tRUNTIME\tKIND\tMODEL\tGPU\tSTATE\tPID\tRESTARTS\tSINCE\tLAST ERROR")
	for _, e := range list.Engines {
		pid := "-"
		if e.PID > 0 {
			pid = fmt.Sprint(e.PID)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\t%d\t%s\t%s\n", e.Name, e.Runtime, e.Kind, e.Model, e.GPU,
			e.State, pid, e.Restarts, e.Since.Local().Format(time.TimeOnly), e.LastError)
	}
	return tw.Flush()
}

// runLogs prints an engine's last output lines.
func runLogs(ctx context.Context, env *environment, args []string) error {
	fs := newFlagSet(env, "logs", "logs ENGINE [--addr URL]")
	addr := fs.String("addr", "http://127.0.0.1:8000", "the daemon's address")
	key := fs.String("api-key", "", "API key, when the daemon needs one (also $HEARTH_API_KEY)")
	var name string
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		name, args = args[0], args[1:]
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if name == "" {
		return fmt.Errorf("%w: name the engine (hearth engines lists them)", errUsage)
	}
	body, err := getDaemon(ctx, env, *addr, "/api/v1/engines/"+url.PathEscape(name)+"/logs", *key)
	if err != nil {
		return err
	}
	_, err = env.stdout.Write(body)
	return err
}

// getDaemon GETs a path of the daemon's API and returns a 200's body.
func getDaemon(ctx context.Context, env *environment, addr, path, key string) ([]byte, error) {
	if key == "" {
		key = env.getenv("HEARTH_API_KEY")
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(addr, "/")+path, nil)
	if err != nil {
		return nil, fmt.Errorf("%w: --addr: %v", errUsage, err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("is hearth up running at %s? %w", addr, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		msg := strings.TrimSpace(string(body))
		var e struct {
			Error string `json:"error"`
		}
		if json.Unmarshal(body, &e) == nil && e.Error != "" {
			msg = e.Error
		}
		if resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden {
			return nil, errors.New(resp.Status + ": " + msg + " (pass --api-key or set HEARTH_API_KEY)")
		}
		return nil, errors.New(resp.Status + ": " + msg)
	}
	return body, nil
}
