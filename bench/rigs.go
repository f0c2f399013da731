package bench

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/hearth-llm/hearth/catalog"
)

// WriteRigsPlan is hearth plan --agent for a cluster of rigs identical
// machines, each with the GPUs uses names (a gaming rig: one GPU), for
// req's model, client, sessions and seed: the layouts those machines can
// serve (no tensor parallelism across two), each measured by the
// simulation with the client's sessions spread over all of them, and what
// one rig holds in each; then the alternatives, each measured alike: the
// model's next smaller sibling, and two of the rigs' GPUs in one box as
// one TP-2 engine.
func (e LayoutEvaluator) WriteRigsPlan(ctx context.Context, w io.Writer, req catalog.AgentLayoutRequest, uses []catalog.GPUUse, rigs int) error {
	var all []catalog.GPUUse
	for range rigs {
		all = append(all, uses...)
	}
	req.GPUs = all
	model := req.Model
	candidates := catalog.OnRigs(catalog.AgentCandidates(all, model), len(uses))
	if len(candidates) == 0 {
		return fmt.Errorf("plan: %s fits no layout on rigs of %s", model.Name, gpuKinds(uses))
	}
	ev, err := e.EvaluateCandidates(ctx, req, candidates)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "%s (%s), %d rigs of %s, layouts for %s\n", model.Name, model.Repo, rigs, gpuKinds(uses), req.Client)
	if err := WriteLayoutTable(w, ev); err != nil {
		return err
	}
	fmt.Fprintln(w, "\neach rig holds (sessions at once: of the run's longest context):")
	for _, r := range ev.Layouts {
		writeRigLine(w, "  "+r.Candidate.Layout.String(), r, rigs)
	}
	fmt.Fprintln(w, "\nalternatives, the same sessions measured alike:")
	if small, ok := catalog.SmallerModel(model); ok {
		sreq := req
		sreq.Model = small
		cands := catalog.OnRigs(catalog.AgentCandidates(all, small), len(uses))
		if len(cands) > 0 {
			sev, err := e.EvaluateCandidates(ctx, sreq, cands)
			if err != nil {
				return err
			}
			writeRigLine(w, fmt.Sprintf("  a smaller model, %s, %s", small.Name, sev.Recommended().Candidate.Layout), sev.Recommended(), rigs)
		}
	}
	if len(uses) == 1 && rigs >= 2 {
		box := []catalog.GPUUse{uses[0], uses[0]}
		var tp2 []catalog.Candidate
		for _, c := range catalog.AgentCandidates(box, model) {
			if c.Layout.TPSize() == 2 {
				tp2 = append(tp2, c)
			}
		}
		if len(tp2) > 0 {
			breq := req
			breq.GPUs = box
			bev, err := e.EvaluateCandidates(ctx, breq, tp2)
			if err != nil {
				return err
			}
			b, best := bev.Recommended(), ev.Recommended()
			writeRigLine(w, fmt.Sprintf("  two of these GPUs in one box, %s (one engine)", b.Candidate.Layout), b, 1)
			if servesMore(b, best) {
				fmt.Fprintf(w, "two GPUs in one box as one TP-2 engine serve these sessions better than the %d rigs' %s (ttft p90 %.0f ms against %.0f, %d/%d sessions done against %d/%d): "+
					"its KV cache holds %d tokens, each rig's %d, so fewer sessions wait for KV room\n",
					rigs, best.Candidate.Layout, b.Summary.TTFT.P90, best.Summary.TTFT.P90, b.Summary.FinishedSessions, b.Summary.StartedSessions,
					best.Summary.FinishedSessions, best.Summary.StartedSessions, kvTokens(b), kvTokens(best)/rigs)
			}
		}
	}
	return nil
}

// writeRigLine says what one rig holds in a layout's run: its engines'
// context, KV tokens and sessions at the run's longest context at once,
// and how the run went.
func writeRigLine(w io.Writer, label string, r LayoutResult, rigs int) {
	fmt.Fprintf(w, "%s: context %d, %d KV tokens, sessions at once %d (of %d tokens), ttft p90 %.0f ms, task p50 %s, %d/%d sessions done\n",
		label, r.MaxModelLen, kvTokens(r)/rigs, r.SessionsFit/rigs, r.PeakContext, r.Summary.TTFT.P90, taskP50(r), r.Summary.FinishedSessions, r.Summary.StartedSessions)
}

// kvTokens is the KV cache of a layout's engines, in tokens.
func kvTokens(r LayoutResult) int {
	kv := 0
	for _, e := range r.Candidate.Plan.Engines {
		kv += e.KVTokens
	}
	return kv
}

func taskP50(r LayoutResult) string {
	if r.Summary.FinishedSessions == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f s", r.Summary.Session.P50/1000)
}

// servesMore reports whether a finished more sessions than b, or as many
// with a lower time to first token at p90.
func servesMore(a, b LayoutResult) bool {
	if a.Summary.FinishedSessions != b.Summary.FinishedSessions {
		return a.Summary.FinishedSessions > b.Summary.FinishedSessions
	}
	return a.Summary.TTFT.P90 < b.Summary.TTFT.P90
}

// gpuKinds names a machine's GPUs: "1x rtx4090".
func gpuKinds(uses []catalog.GPUUse) string {
	var kinds []string
	for _, u := range uses {
		kinds = append(kinds, u.GPU.Kind)
	}
	if len(kinds) > 0 && strings.Count(strings.Join(kinds, ","), kinds[0]) == len(kinds) {
		return fmt.Sprintf("%dx %s", len(kinds), kinds[0])
	}
	return strings.Join(kinds, "+")
}
