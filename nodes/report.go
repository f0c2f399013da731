package nodes

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
)

// Report is an inventory as `hearth gpus --json` prints it, a schema
// scripts rely on: a figure the source does not know is left out (nil),
// never 0.
type Report struct {
	Host ReportHost  `json:"host"`
	GPUs []ReportGPU `json:"gpus"`
}

type ReportHost struct {
	Node              string `json:"node"`
	Source            string `json:"source"`
	DriverVersion     string `json:"driver_version,omitempty"`
	CUDADriverVersion string `json:"cuda_driver_version,omitempty"`
}

type ReportGPU struct {
	Index             int              `json:"index"`
	UUID              string           `json:"uuid,omitempty"`
	Name              string           `json:"name,omitempty"`
	Kind              string           `json:"kind"`
	MemoryTotalBytes  *uint64          `json:"memory_total_bytes,omitempty"`
	MemoryUsedBytes   *uint64          `json:"memory_used_bytes,omitempty"`
	MemoryFreeBytes   *uint64          `json:"memory_free_bytes,omitempty"`
	UtilizationPct    *int             `json:"utilization_pct,omitempty"`
	TemperatureC      *int             `json:"temperature_c,omitempty"`
	PowerDrawW        *float64         `json:"power_draw_w,omitempty"`
	PowerLimitW       *float64         `json:"power_limit_w,omitempty"`
	PCIeGenCurrent    *int             `json:"pcie_gen_current,omitempty"`
	PCIeGenMax        *int             `json:"pcie_gen_max,omitempty"`
	PCIeWidthCurrent  *int             `json:"pcie_width_current,omitempty"`
	PCIeWidthMax      *int             `json:"pcie_width_max,omitempty"`
	ComputeCapability string           `json:"compute_capability,omitempty"`
	Processes         *[]ReportProcess `json:"processes,omitempty"`
	Lost              bool             `json:"lost"`
	Error             string           `json:"error,omitempty"`
	Simulated         bool             `json:"simulated"`
}

type ReportProcess struct {
	PID       int    `json:"pid"`
	UsedBytes uint64 `json:"used_bytes"`
	Name      string `json:"name,omitempty"`
}

// ReportOf is inv as a Report.
func ReportOf(inv Inventory) Report {
	out := Report{
		Host: ReportHost{Node: inv.Host.Node, Source: inv.Host.Source, DriverVersion: inv.Host.DriverVersion,
			CUDADriverVersion: inv.Host.CUDAVersion()},
		GPUs: make([]ReportGPU, 0, len(inv.GPUs)),
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
		j := ReportGPU{
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
			procs := make([]ReportProcess, 0, len(g.Processes))
			for _, p := range g.Processes {
				procs = append(procs, ReportProcess{PID: p.PID, UsedBytes: p.UsedBytes, Name: p.Name})
			}
			j.Processes = &procs
		}
		out.GPUs = append(out.GPUs, j)
	}
	return out
}

const reportGiB = 1 << 30

// WriteText prints an inventory as `hearth gpus` does: one row per GPU
// and a line about the driver.
func WriteText(w io.Writer, inv Inventory) error {
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

func memoryText(g GPU) string {
	total := "?"
	if g.MemoryTotal > 0 {
		total = fmt.Sprintf("%.1f", float64(g.MemoryTotal)/reportGiB)
	}
	used := "?"
	if g.MemoryUsageKnown {
		used = fmt.Sprintf("%.1f", float64(g.MemoryUsed)/reportGiB)
	}
	return used + "/" + total + " GiB"
}

func powerText(g GPU) string {
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
func pcieText(g GPU) string {
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

func processesText(g GPU) string {
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
		parts[i] = fmt.Sprintf("%s[%d] %.1f GiB", name, p.PID, float64(p.UsedBytes)/reportGiB)
	}
	return strings.Join(parts, ", ")
}
