package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/moby/moby/client"

	"github.com/hearth-llm/hearth/catalog"
	"github.com/hearth-llm/hearth/daemon"
	"github.com/hearth-llm/hearth/installer/doctor"
	hruntime "github.com/hearth-llm/hearth/runtime"
)

// doctorConfig is the parsed command line of hearth doctor.
type doctorConfig struct {
	json    bool
	deep    bool
	sim     string
	model   string // "" plans the largest model that fits each GPU
	engine  hruntime.Kind
	image   string // "" is the engine's default image for the driver
	listen  string
	dataDir string
	kvStore string // the SSD KV tier: hearth up's --kv-store-dir
	hfCache string
}

// runDoctor is `hearth doctor`: it checks the host and exits 0 when every
// check passes, 1 when one fails and 2 when some only warn.
func runDoctor(ctx context.Context, env *environment, args []string) error {
	cfg, err := parseDoctorFlags(env, args)
	if err != nil {
		return err
	}
	disc, err := daemon.Discoverer("", cfg.sim)
	if err != nil {
		return fmt.Errorf("%w: --sim: %v", errUsage, err)
	}
	if c, ok := disc.(io.Closer); ok {
		defer c.Close()
	}
	doc := cfg.doctor()
	doc.GPUs = daemon.DoctorGPUs(disc, nil)
	if cli, err := client.New(client.FromEnv); err == nil {
		defer cli.Close()
		doc.Docker = daemon.DoctorDocker(cli)
		// A daemon serving on this machine holds GPU memory in its engine
		// containers: that memory is Hearth's, not another program's.
		node, _ := os.Hostname()
		doc.GPUs = daemon.DoctorGPUs(disc, func(ctx context.Context) []hruntime.Identity {
			ids, _ := daemon.EngineContainers(ctx, cli, node)
			return ids
		})
	}
	doc.Tokenizers = daemonTokenizers{env: env, listen: cfg.listen, dataDir: cfg.dataDir}
	checks := doc.Check(ctx)
	if cfg.json {
		enc := json.NewEncoder(env.stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(doctorJSON{Checks: checks}); err != nil {
			return err
		}
	} else if err := writeDoctorText(env.stdout, checks); err != nil {
		return err
	}
	return doctorExit(checks)
}

// doctor is the Doctor of these flags, without its GPUs and Docker Engine.
func (cfg doctorConfig) doctor() *doctor.Doctor {
	return &doctor.Doctor{
		Fitter:      daemon.DoctorFitter(cfg.model, cfg.hfCache),
		EngineImage: daemon.EngineImageFor(cfg.engine, cfg.image),
		HFCacheDir:  cfg.hfCache, KVDir: cfg.kvStore, DataDir: cfg.dataDir, Addr: cfg.listen,
		Deep: cfg.deep, DeepImage: cfg.image,
	}
}

func parseDoctorFlags(env *environment, args []string) (doctorConfig, error) {
	fs := newFlagSet(env, "doctor",
		"doctor [--json] [--deep] [--sim 2x4090] [--model M] [--engine "+strings.ReplaceAll(hruntime.KindNames(), ", ", "|")+"] [--image IMAGE] [--listen ADDR] [--data-dir DIR] [--kv-store-dir DIR] [--hf-cache DIR]")
	var cfg doctorConfig
	fs.BoolVar(&cfg.json, "json", false, `print {"checks": [{"name", "status", "evidence", "fix"}]}`)
	fs.BoolVar(&cfg.deep, "deep", false, "also start a container that asks for the GPUs (from the engine image, if it is pulled)")
	fs.StringVar(&cfg.sim, "sim", "", `check against simulated GPUs, e.g. "2x4090", as hearth up --sim takes them`)
	fs.StringVar(&cfg.model, "model", "", "model to weigh against each GPU's free memory (default: the largest that fits the GPU)")
	engine := fs.String("engine", string(hruntime.KindVLLM), "engine whose image the CUDA check weighs: "+hruntime.KindNames())
	fs.StringVar(&cfg.image, "image", "", "engine image, as hearth up --image takes it (default: the engine's image for the driver's CUDA)")
	fs.StringVar(&cfg.listen, "listen", defaultListen, "the API address hearth up will listen on")
	fs.StringVar(&cfg.dataDir, "data-dir", defaultDataDir(env.getenv), "Hearth's data directory, as hearth up --data-dir takes it")
	fs.StringVar(&cfg.kvStore, "kv-store-dir", "", "the node's SSD KV store, as hearth up --kv-store-dir takes it (default: kvstore in the data directory)")
	fs.StringVar(&cfg.hfCache, "hf-cache", catalog.HFCacheDir(env.getenv), "Hugging Face hub cache")
	if err := parseFlags(fs, args); err != nil {
		return cfg, err
	}
	if cfg.kvStore == "" {
		cfg.kvStore = defaultKVStoreDir(cfg.dataDir)
	}
	kind, err := hruntime.KindOf(*engine)
	if err != nil {
		return cfg, fmt.Errorf("%w: --engine: %w", errUsage, err)
	}
	cfg.engine = kind.Name
	return cfg, nil
}

// doctorJSON is hearth doctor --json. Field names are stable.
type doctorJSON struct {
	Checks []doctor.Check `json:"checks"`
}

// writeDoctorText prints one line per check, its fix under it, and a count.
func writeDoctorText(w io.Writer, checks []doctor.Check) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	counts := map[doctor.Status]int{}
	for _, c := range checks {
		counts[c.Status]++
		fmt.Fprintf(tw, "%s\t%s\t%s\n", c.Status, c.Name, c.Evidence)
		if c.Fix != "" {
			fmt.Fprintf(tw, "\t\tfix: %s\n", c.Fix)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "\n%d passed, %d warned, %d failed\n", counts[doctor.Pass], counts[doctor.Warn], counts[doctor.Fail])
	return err
}

// doctorExit is the command's error for its checks: nil when all pass,
// else an exit status of doctor.ExitCode's choosing.
func doctorExit(checks []doctor.Check) error {
	code := doctor.ExitCode(checks)
	if code == 0 {
		return nil
	}
	var names []string
	for _, c := range checks {
		if (code == 1 && c.Status == doctor.Fail) || (code == 2 && c.Status == doctor.Warn) {
			names = append(names, c.Name)
		}
	}
	verdict := "failed"
	if code == 2 {
		verdict = "warned"
	}
	return &exitStatusError{status: code, msg: fmt.Sprintf("doctor: %s %s", plural(len(names), "check"), verdict+": "+strings.Join(names, ", "))}
}

// daemonTokenizers reads the engines' tokenizer self-checks of a daemon
// serving plain HTTP at the doctor's --listen address on this machine,
// through the admin API and the daemon's local token; no daemon there, no
// checks.
type daemonTokenizers struct {
	env             *environment
	listen, dataDir string
}

func (d daemonTokenizers) EngineTokenizers(ctx context.Context) ([]doctor.EngineTokenizer, error) {
	host, port, err := net.SplitHostPort(d.listen)
	if err != nil {
		return nil, err
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	addr, key := "http://"+net.JoinHostPort(host, port), ""
	c, err := daemonFlags{addr: &addr, key: &key, dataDir: &d.dataDir}.client(d.env)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	list, err := c.Engines(ctx)
	if err != nil {
		return nil, err
	}
	var out []doctor.EngineTokenizer
	for _, e := range list.Engines {
		if e.Tokenizer != nil {
			out = append(out, doctor.EngineTokenizer{Engine: e.Name, State: e.Tokenizer.State, Summary: e.Tokenizer.Summary})
		}
	}
	return out, nil
}
