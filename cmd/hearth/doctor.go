package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/hearth-llm/hearth/catalog"
	"github.com/hearth-llm/hearth/daemon"
	"github.com/hearth-llm/hearth/installer/doctor"
	hruntime "github.com/hearth-llm/hearth/runtime"
)

// doctorConfig is the parsed command line of hearth doctor: what the
// doctor weighs (daemon.DoctorConfig), how it prints, and where GPUs are
// simulated.
type doctorConfig struct {
	daemon.DoctorConfig
	json bool
	sim  string
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
	cfg.GPUs = disc
	doc, closeDocker := daemon.NewDoctor(cfg.DoctorConfig)
	defer closeDocker()
	checks := doc.Check(ctx)
	if cfg.json {
		enc := json.NewEncoder(env.stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(doctor.Report{Checks: checks}); err != nil {
			return err
		}
	} else if err := doctor.WriteText(env.stdout, checks); err != nil {
		return err
	}
	return doctorExit(checks)
}

func parseDoctorFlags(env *environment, args []string) (doctorConfig, error) {
	fs := newFlagSet(env, "doctor",
		"doctor [--json] [--deep] [--sim 2x4090] [--model M] [--engine "+strings.ReplaceAll(hruntime.KindNames(), ", ", "|")+"] [--image IMAGE] [--listen ADDR] [--data-dir DIR] [--kv-store-dir DIR] [--hf-cache DIR]")
	var cfg doctorConfig
	fs.BoolVar(&cfg.json, "json", false, `print {"checks": [{"name", "status", "evidence", "fix"}]}`)
	fs.BoolVar(&cfg.Deep, "deep", false, "also start a container that asks for the GPUs (from the engine image, if it is pulled)")
	fs.StringVar(&cfg.sim, "sim", "", `check against simulated GPUs, e.g. "2x4090", as hearth up --sim takes them`)
	fs.StringVar(&cfg.Model, "model", "", "model to weigh against each GPU's free memory (default: the largest that fits the GPU)")
	engine := fs.String("engine", string(hruntime.KindVLLM), "engine whose image the CUDA check weighs: "+hruntime.KindNames())
	fs.StringVar(&cfg.Image, "image", "", "engine image, as hearth up --image takes it (default: the engine's image for the driver's CUDA)")
	fs.StringVar(&cfg.Addr, "listen", daemon.DefaultListen, "the API address hearth up will listen on")
	dataDir := fs.String("data-dir", string(daemon.DefaultDataDir(env.getenv)), "Hearth's data directory, as hearth up --data-dir takes it")
	fs.StringVar(&cfg.KVStoreDir, "kv-store-dir", "", "the node's SSD KV store, as hearth up --kv-store-dir takes it (default: kvstore in the data directory)")
	fs.StringVar(&cfg.HFCache, "hf-cache", catalog.HFHome(env.getenv), "Hugging Face home (HF_HOME, models under its hub/), as hearth up --hf-cache takes it")
	if err := parseFlags(fs, args); err != nil {
		return cfg, err
	}
	cfg.DataDir = daemon.DataDir(*dataDir)
	kind, err := hruntime.KindOf(*engine)
	if err != nil {
		return cfg, fmt.Errorf("%w: --engine: %w", errUsage, err)
	}
	cfg.Engine = kind.Name
	if cfg.HFCache, err = readHFHome(env, cfg.HFCache); err != nil {
		return cfg, err
	}
	return cfg, nil
}

// doctorExit is the command's error for its checks: nil when all pass,
// else an exit status of doctor.ExitCode's choosing.
func doctorExit(checks []doctor.Check) error {
	code, verdict := doctor.Verdict(checks)
	if code == 0 {
		return nil
	}
	return &exitStatusError{status: code, msg: "doctor: " + verdict}
}

// readHFHome reads --hf-cache as Hugging Face's home (catalog.ReadHFHome),
// saying on stderr when it took a hub directory for the home above it.
func readHFHome(env *environment, dir string) (string, error) {
	home, note, err := catalog.ReadHFHome(dir)
	if err != nil {
		return "", fmt.Errorf("%w: %v", errUsage, err)
	}
	if note != "" {
		fmt.Fprintln(env.stderr, "hearth:", note)
	}
	return home, nil
}
