package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"

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
		return enc.Encode(gpusJSONOf(inv))
	}
	return writeGPUsText(env.stdout, inv)
}

// gpusJSON is the --json schema (gpusUsage); pointers are left out when
// unknown.
type gpusJSON struct {
	Host hostJSON  `json:"host"`
	GPUs []gpuJSON `json:"gpus"`
}

type hostJSON struct {
	Node              string `json:"node"`
	Source            string `json:"source"`
	DriverVersion     string `json:"driver_version,omitempty"`
	CUDADriverVersion string `json:"cuda_driver_version,omitempty"`
}

type gpuJSON struct {
	Index             int               `json:"index"`
	UUID              string            `json:"uuid,omitempty"`
	Name              string            `json:"name,omitempty"`
	Kind              string            `json:"kind"`
	MemoryTotalBytes  *uint64           `json:"memory_total_bytes,omitempty"`
	MemoryUsedBytes   *uint64           `json:"memory_used_bytes,omitempty"`
	MemoryFreeBytes   *uint64           `json:"memory_free_bytes,omitempty"`
	UtilizationPct    *int              `json:"utilization_pct,omitempty"`
	TemperatureC      *int              `json:"temperature_c,omitempty"`
	PowerDrawW        *float64          `json:"power_draw_w,omitempty"`
	PowerLimitW       *float64          `json:"power_limit_w,omitempty"`
	PCIeGenCurrent    *int              `json:"pcie_gen_current,omitempty"`
	PCIeGenMax        *int              `json:"pcie_gen_max,omitempty"`
	PCIeWidthCurrent  *int              `json:"pcie_width_current,omitempty"`
	PCIeWidthMax      *int              `json:"pcie_width_max,omitempty"`
	ComputeCapability string            `json:"compute_capability,omitempty"`
	Processes         *[]gpuProcessJSON `json:"processes,omitempty"`
	Lost              bool              `json:"lost"`
	Error             string            `json:"error,omitempty"`
	Simulated         bool              `json:"simulated"`
}

type gpuProcessJSON struct {
	PID       int    `json:"pid"`
	UsedBytes uint64 `json:"used_bytes"`
	Name      string `json:"name,omitempty"`
}

func gpusJSONOf(inv nodes.Inventory) gpusJSON {
	out := gpusJSON{
		Host: hostJSON{Node: inv.Host.Node, Source: inv.Host.Source, DriverVersion: inv.Host.DriverVersion,
			CUDADriverVersion: inv.Host.CUDAVersion()},
		GPUs: make([]gpuJSON, 0, len(inv.GPUs)),
	}
	known := func(v int) *int {
		if v < 0 {
			return nil
		}
		return &v
	}
	knownF := func(v float64) *float64 {
		if v < 0 {
			return nil
		}
		return &v
	}
	for _, g := range inv.GPUs {
		j := gpuJSON{
			Index: g.Index, UUID: g.UUID, Name: g.Name, Kind: g.Kind,
			UtilizationPct: known(g.UtilizationPct), TemperatureC: known(g.TemperatureC),
			PowerDrawW: knownF(g.PowerDrawW), PowerLimitW: knownF(g.PowerLimitW),
			PCIeGenCurrent: known(g.PCIeGenCurrent), PCIeGenMax: known(g.PCIeGenMax),
			PCIeWidthCurrent: known(g.PCIeWidthCurrent), PCIeWidthMax: known(g.PCIeWidthMax),
			ComputeCapability: g.ComputeCapability(),
			Lost:              g.Lost, Error: g.Err, Simulated: g.Simulated,
		}
		if g.MemoryTotal > 0 {
			total := g.MemoryTotal
			j.MemoryTotalBytes = &total
		}
		if g.MemoryUsageKnown {
			used, free := g.MemoryUsed, g.MemoryFree
			j.MemoryUsedBytes, j.MemoryFreeBytes = &used, &free
		}
		if g.ProcessesKnown {
			procs := make([]gpuProcessJSON, 0, len(g.Processes))
			for _, p := range g.Processes {
				procs = append(procs, gpuProcessJSON{PID: p.PID, UsedBytes: p.UsedBytes, Name: p.Name})
			}
			j.Processes = &procs
		}
		out.GPUs = append(out.GPUs, j)
	}
	return out
}

const gib = 1 << 30

// writeGPUsText prints one row per GPU and a line about the driver.
func writeGPUsText(w io.Writer, inv nodes.Inventory) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "GPU\tNAME\tKIND\tMEMORY\tUTIL\tTEMP\tPOWER\tPCIE\tCC\tPROCESSES")
	var problems []string
	for _, g := range inv.GPUs {
		name := g.Name
		if name == "" {
			name = "?"
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", g.Index, name, g.Kind, memoryText(g),
			unitText(g.UtilizationPct, "%"), unitText(g.TemperatureC, "C"), powerText(g), pcieText(g),
			orUnknown(g.ComputeCapability()), processesText(g))
		switch {
		case g.Lost:
			problems = append(problems, fmt.Sprintf("gpu %d is lost: %s (a reboot or a GPU reset brings it back)", g.Index, g.Err))
		case g.Err != "":
			problems = append(problems, fmt.Sprintf("gpu %d: %s", g.Index, g.Err))
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, p := range problems {
		fmt.Fprintln(w, p)
	}
	driver := orUnknown(inv.Host.DriverVersion)
	if inv.Host.Source == "sim" {
		driver = "none (simulated)"
	}
	_, err := fmt.Fprintf(w, "driver %s, CUDA %s (node %s, read through %s)\n", driver,
		orUnknown(inv.Host.CUDAVersion()), orUnknown(inv.Host.Node), inv.Host.Source)
	return err
}

func orUnknown(s string) string {
	if s == "" {
		return "?"
	}
	return s
}

func unitText(v int, unit string) string {
	if v < 0 {
		return "?"
	}
	return strconv.Itoa(v) + unit
}

func memoryText(g nodes.GPU) string {
	total := "?"
	if g.MemoryTotal > 0 {
		total = fmt.Sprintf("%.1f", float64(g.MemoryTotal)/gib)
	}
	used := "?"
	if g.MemoryUsageKnown {
		used = fmt.Sprintf("%.1f", float64(g.MemoryUsed)/gib)
	}
	return used + "/" + total + " GiB"
}

func powerText(g nodes.GPU) string {
	if g.PowerDrawW < 0 && g.PowerLimitW < 0 {
		return "?"
	}
	watts := func(v float64) string {
		if v < 0 {
			return "?"
		}
		return strconv.FormatFloat(v, 'f', 0, 64)
	}
	return watts(g.PowerDrawW) + "/" + watts(g.PowerLimitW) + " W"
}

// pcieText is the link now and, when it differs, the most it can run at:
// "gen1 x16 (max gen4 x16)", the way an idle board saves power.
func pcieText(g nodes.GPU) string {
	link := func(gen, width int) string {
		return "gen" + unitText(gen, "") + " x" + unitText(width, "")
	}
	if g.PCIeGenCurrent < 0 && g.PCIeWidthCurrent < 0 && g.PCIeGenMax < 0 && g.PCIeWidthMax < 0 {
		return "?"
	}
	now, most := link(g.PCIeGenCurrent, g.PCIeWidthCurrent), link(g.PCIeGenMax, g.PCIeWidthMax)
	if now == most {
		return now
	}
	return now + " (max " + most + ")"
}

func processesText(g nodes.GPU) string {
	if !g.ProcessesKnown {
		return "?"
	}
	if len(g.Processes) == 0 {
		return "-"
	}
	parts := make([]string, len(g.Processes))
	for i, p := range g.Processes {
		name := p.Name
		if name == "" {
			name = "?"
		}
		parts[i] = fmt.Sprintf("%s[%d] %.1f GiB", name, p.PID, float64(p.UsedBytes)/gib)
	}
	return strings.Join(parts, ", ")
}
