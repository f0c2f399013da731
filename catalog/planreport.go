package catalog

import (
	"fmt"
	"io"
	"math"
	"text/tabwriter"

	"github.com/dustin/go-humanize"
)

// PlanReport is a plan as `hearth plan --json` prints it, a schema scripts
// rely on: the plan per GPU, engine figures repeated on each GPU of the
// engine. Field names are stable.
type PlanReport struct {
	Model        string `json:"model"`
	Repo         string `json:"repo"`
	DefaultModel bool   `json:"default_model"`
	TP           int    `json:"tp"`
	KVCacheDtype string `json:"kv_cache_dtype"`
	RopeScaling  bool   `json:"rope_scaling"`
	Layout       string `json:"layout"`
	Engines      int    `json:"engines"`
	MaxModelLen  int    `json:"max_model_len"`
	// MaxBatchedTokens is the engines' step token budget (vLLM's
	// --max-num-batched-tokens), which sizes ActivationBytes.
	MaxBatchedTokens int             `json:"max_batched_tokens"`
	AgentTurnTokens  int             `json:"agent_turn_tokens"`
	GPUs             []PlanReportGPU `json:"gpus"`
	Summary          string          `json:"summary"`
}

// PlanReportGPU is one GPU of a PlanReport.
type PlanReportGPU struct {
	GPU             string `json:"gpu"`
	Engine          int    `json:"engine"`
	Kind            string `json:"kind"`
	Name            string `json:"name"`
	TotalBytes      uint64 `json:"total_bytes"`
	UsedBytes       uint64 `json:"used_bytes"`
	FreeBytes       uint64 `json:"free_bytes"`
	WeightBytes     uint64 `json:"weight_bytes"`
	KVBytesPerToken int    `json:"kv_bytes_per_token"`
	// ActivationReserveBytes is activations plus memory outside PyTorch,
	// both of which also appear on their own.
	ActivationReserveBytes uint64 `json:"activation_reserve_bytes"`
	ActivationBytes        uint64 `json:"activation_bytes"`
	NonTorchBytes          uint64 `json:"non_torch_bytes"`
	// GPUMemoryUtilization is vLLM's --gpu-memory-utilization,
	// MemFractionStatic SGLang's --mem-fraction-static.
	GPUMemoryUtilization float64 `json:"gpu_memory_utilization"`
	MemFractionStatic    float64 `json:"mem_fraction_static"`
	KVCacheBytes         uint64  `json:"kv_cache_bytes"`
	// KVTokens, MaxModelLen and AgentTurns are the engine's.
	KVTokens    int `json:"kv_tokens"`
	MaxModelLen int `json:"max_model_len"`
	AgentTurns  int `json:"agent_turns"`
}

// ReportOfPlan is p's report with the plan's layout, its GPUs named by
// labels (by index: "gpu 0", "sim/gpu1"); defaultModel says the model was
// chosen as the largest that fits.
func ReportOfPlan(p Plan, layout Layout, labels []string, defaultModel bool) PlanReport {
	out := PlanReport{
		Model: p.Model.Name, Repo: p.Model.Repo, DefaultModel: defaultModel, TP: p.TP, Engines: len(p.Engines),
		KVCacheDtype: layout.KVCacheDtypeOrAuto(), RopeScaling: layout.RopeScaling, Layout: layout.String(),
		MaxModelLen: p.MaxModelLen, MaxBatchedTokens: p.MaxBatchedTokens, AgentTurnTokens: AgentTurnTokens,
	}
	turns := 0
	for i, e := range p.Engines {
		turns += e.AgentTurns
		for _, g := range e.GPUs {
			out.GPUs = append(out.GPUs, PlanReportGPU{
				GPU: labels[g.Index], Engine: i, Kind: g.GPU.Kind, Name: g.GPU.Name,
				TotalBytes: g.TotalBytes, UsedBytes: g.UsedBytes, FreeBytes: g.FreeBytes,
				WeightBytes: roundBytes(g.WeightBytes), KVBytesPerToken: g.KVBytesPerToken,
				ActivationReserveBytes: roundBytes(g.ActivationBytes + g.NonTorchBytes),
				ActivationBytes:        roundBytes(g.ActivationBytes), NonTorchBytes: roundBytes(g.NonTorchBytes),
				GPUMemoryUtilization: e.GPUMemoryUtilization, MemFractionStatic: e.MemFractionStatic,
				KVCacheBytes: roundBytes(g.KVCacheBytes), KVTokens: e.KVTokens, MaxModelLen: e.MaxModelLen, AgentTurns: e.AgentTurns,
			})
		}
	}
	engines := fmt.Sprintf("%d engines on %d GPUs", len(p.Engines), len(out.GPUs))
	if len(p.Engines) == 1 {
		engines = fmt.Sprintf("1 engine on %s", plural(len(out.GPUs), "GPU"))
	}
	if flags := layout.Flags(); flags != "" {
		engines += " (" + flags + ")"
	}
	inAll := ""
	if len(p.Engines) > 1 {
		inAll = " in all"
	}
	out.Summary = fmt.Sprintf("%s fits: %s, context %s tokens, %s of %dk tokens at once%s.",
		p.Model.Name, engines, humanize.Comma(int64(p.MaxModelLen)), plural(turns, "agent turn"), AgentTurnTokens/1024, inAll)
	return out
}

// WriteText prints the report as `hearth plan` does: a small table per
// GPU and the summary.
func (p PlanReport) WriteText(w io.Writer) error {
	chosen := ""
	if p.DefaultModel {
		chosen = ", the largest that fits"
	}
	fmt.Fprintf(w, "%s (%s%s)\nlayout: %s\n", p.Model, p.Repo, chosen, p.Layout)
	for _, g := range p.GPUs {
		fmt.Fprintf(w, "\n%s: %s, engine %d\n", g.GPU, g.Name, g.Engine)
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintf(tw, "  free\t%s of %s (%s used by other programs)\n", formatGiB(g.FreeBytes), formatGiB(g.TotalBytes), formatGiB(g.UsedBytes))
		fmt.Fprintf(tw, "  weights\t%s\n", formatGiB(g.WeightBytes))
		fmt.Fprintf(tw, "  KV per token\t%d KiB\n", g.KVBytesPerToken>>10)
		fmt.Fprintf(tw, "  activation reserve\t%s (activations %s, outside PyTorch %s)\n",
			formatGiB(g.ActivationReserveBytes), formatGiB(g.ActivationBytes), formatGiB(g.NonTorchBytes))
		fmt.Fprintf(tw, "  step budget\t%s tokens (vLLM --max-num-batched-tokens)\n", humanize.Comma(int64(p.MaxBatchedTokens)))
		fmt.Fprintf(tw, "  memory fraction\t%.2f vLLM --gpu-memory-utilization, %.3f SGLang --mem-fraction-static\n",
			g.GPUMemoryUtilization, g.MemFractionStatic)
		fmt.Fprintf(tw, "  KV cache\t%s, %s tokens\n", formatGiB(g.KVCacheBytes), humanize.Comma(int64(g.KVTokens)))
		fmt.Fprintf(tw, "  context\t%s tokens (--max-model-len)\n", humanize.Comma(int64(g.MaxModelLen)))
		fmt.Fprintf(tw, "  %dk-token turns\t%d at once\n", p.AgentTurnTokens/1024, g.AgentTurns)
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	_, err := fmt.Fprintf(w, "\n%s\n", p.Summary)
	return err
}

func roundBytes(b float64) uint64 { return uint64(math.Round(max(b, 0))) }

func formatGiB(b uint64) string { return fmt.Sprintf("%.2f GiB", float64(b)/(1<<30)) }

// plural is n noun, with an s for any n but 1: "1 GPU", "2 GPUs".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
