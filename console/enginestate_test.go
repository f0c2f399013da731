package console

import (
	"html"
	"strings"
	"testing"
)

// TestCardShowsLoadPhaseAndDiagnosis: a loading engine's card shows where
// its start is, with a bar when the phase has a figure; a failed engine's
// card says why in a sentence, above the bare error and its log.
func TestCardShowsLoadPhaseAndDiagnosis(t *testing.T) {
	src := &fakeSources{engines: []Engine{
		{Worker: "rig0-gpu0", Node: "rig0", GPU: "NVIDIA GeForce RTX 4090", State: "loading",
			LoadPhase: "capturing CUDA graphs", LoadProgress: 40, UtilizationPct: -1, TemperatureC: -1},
		{Worker: "rig0-gpu1", Node: "rig0", GPU: "NVIDIA GeForce RTX 4090", State: "loading",
			LoadPhase: "compiling the model", LoadProgress: -1, UtilizationPct: -1, TemperatureC: -1},
		{Worker: "rig1-gpu0", Node: "rig1", GPU: "NVIDIA GeForce RTX 3090", State: "failed",
			Diagnosis: "CUDA ran out of memory while loading weights: lower --max-model-len or use a smaller model",
			Err:       "failed: failed to start 5 times in a row: exited: exit status 1",
			LogTail:   []string{"torch.OutOfMemoryError: CUDA out of memory."}, UtilizationPct: -1, TemperatureC: -1},
		{Worker: "sim-gpu0", Node: "sim", GPU: "NVIDIA GeForce RTX 4090", State: "ready",
			MemoryUsed: 24 << 30 * 9 / 10, MemoryTotal: 24 << 30, MemoryReserved: true, MemoryInUse: 29 << 29,
			UtilizationPct: -1, TemperatureC: -1, PowerDrawW: -1, PowerLimitW: -1},
	}}
	h := newHarness(t, src, withKeyRequired(false))
	resp, body := h.do(t, request{path: "/console/"})
	if resp.StatusCode != 200 {
		t.Fatalf("overview: %s", resp.Status)
	}
	cards := map[string]string{}
	for _, part := range strings.Split(body, `<article class="card" `)[1:] {
		id, _, _ := strings.Cut(strings.TrimPrefix(part, `id="`), `"`)
		cards[id] = html.UnescapeString(part[:strings.Index(part, "</article>")])
	}
	cases := []struct {
		card      string
		want, not []string
	}{
		{"rig0-gpu0", []string{"capturing CUDA graphs 40%", `<progress class="loadbar" max="100" value="40"`}, []string{"diagnosis"}},
		{"rig0-gpu1", []string{"compiling the model"}, []string{"<progress", "%</div>"}},
		{"rig1-gpu0", []string{
			`<p class="problem diagnosis" role="alert" data-label="diagnosis">CUDA ran out of memory while loading weights: lower --max-model-len or use a smaller model</p>`,
			"failed: failed to start 5 times in a row: exited: exit status 1",
			"torch.OutOfMemoryError",
		}, []string{"<progress", `class="loading"`}},
		// A simulated GPU: vLLM's reservation, said to be one, and what of
		// it holds data; no reading to draw.
		{"sim-gpu0", []string{
			"<dt>VRAM</dt><dd>reserved by the engine: 21.6 of 24.0 GiB</dd>",
			`<div data-label="memory-in-use"><dt>In use</dt><dd>14.5 GiB: weights and KV in use</dd></div>`,
			"Utilisation, temperature and power not reported",
		}, []string{"21.6 / 24.0 GiB", "spark-mem"}},
	}
	for _, tc := range cases {
		card, ok := cards[domID("gpu-", tc.card)]
		if !ok {
			t.Fatalf("no card %s among %d", tc.card, len(cards))
		}
		for _, w := range tc.want {
			if !strings.Contains(card, w) {
				t.Errorf("card %s lacks %q:\n%s", tc.card, w, card)
			}
		}
		for _, n := range tc.not {
			if strings.Contains(card, n) {
				t.Errorf("card %s has %q:\n%s", tc.card, n, card)
			}
		}
	}
}
