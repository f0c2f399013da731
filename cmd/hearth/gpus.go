package main

import (
	"context"
	"encoding/json"
	"io"

	"github.com/hearth-llm/hearth/nodes"
)

// gpusUsage is hearth gpus' help, the JSON schema included: it is the
// command's contract with scripts.
const gpusUsage = `gpus [--json] [--sim SPEC] [--node NAME]

Lists this machine's GPUs as the NVIDIA driver reports them: through NVML,
else through nvidia-smi. A figure the board does not report shows as "?".

--json prints one object:

  {"host": {"node": "rig", "source": "nvml"|"nvidia-smi"|"sim",
            "driver_version": "580.95.05", "cuda_driver_version": "12.9"},
   "gpus": [{"index": 0, "uuid": "GPU-…", "name": "NVIDIA GeForce RTX 4090",
             "kind": "rtx4090", "memory_total_bytes": 25757220864,
             "memory_used_bytes": 1048576, "memory_free_bytes": 25756172288,
             "utilization_pct": 3, "temperature_c": 41,
             "power_draw_w": 21.5, "power_limit_w": 450,
             "pcie_gen_current": 4, "pcie_gen_max": 4,
             "pcie_width_current": 16, "pcie_width_max": 16,
             "compute_capability": "8.9",
             "processes": [{"pid": 4242, "used_bytes": 1048576, "name": "vllm"}],
             "lost": false, "error": "", "simulated": false}]}

A field the source does not know is left out (never 0); "processes" is
left out when the list is unknown and [] when it is known to be empty;
"error" is left out when empty and "lost" is true only for a GPU the
driver says has fallen off the bus.`

// gpusConfig is the parsed command line of hearth gpus.
type gpusConfig struct {
	json     bool
	discover nodes.DiscoverConfig
}

func runGPUs(ctx context.Context, env *environment, args []string) error {
	cfg, err := parseGPUsFlags(env, args)
	if err != nil {
		return err
	}
	return listGPUs(ctx, env, cfg)
}

func parseGPUsFlags(env *environment, args []string) (gpusConfig, error) {
	fs := newFlagSet(env, "gpus", gpusUsage)
	var cfg gpusConfig
	fs.BoolVar(&cfg.json, "json", false, "print the GPUs as JSON (schema above)")
	fs.StringVar(&cfg.discover.Sim, "sim", "", `simulated GPUs instead of the driver's, e.g. "2x4090" or "1x4090+2x3090"`)
	fs.StringVar(&cfg.discover.Node, "node", "", "name of this machine in the output (default: the host name)")
	if err := parseFlags(fs, args); err != nil {
		return gpusConfig{}, err
	}
	return cfg, nil
}

// listGPUs discovers the GPUs once and prints them.
func listGPUs(ctx context.Context, env *environment, cfg gpusConfig) error {
	d, err := nodes.NewDiscoverer(cfg.discover)
	if err != nil {
		return err
	}
	if c, ok := d.(io.Closer); ok {
		defer c.Close()
	}
	inv, err := d.Discover(ctx)
	if err != nil {
		return err
	}
	if cfg.json {
		enc := json.NewEncoder(env.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(nodes.ReportOf(inv))
	}
	return nodes.WriteText(env.stdout, inv)
}
