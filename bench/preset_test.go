package bench

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/hearth-llm/hearth/agentclient"
	"github.com/hearth-llm/hearth/catalog"
	"github.com/hearth-llm/hearth/router"
)

// capturedShape is a row of api/testdata/client-shapes.json, what api's
// TestCaptureShapes measured of the recorded client sessions.
type capturedShape struct {
	Client       string `json:"client"`
	Run          string `json:"run"`
	Kind         string `json:"kind"`
	Turn         int    `json:"turn"`
	PromptTokens int    `json:"prompt_tokens"`
	SharedTokens int    `json:"shared_tokens"`
	// Of a first prompt: the tokens before the tool definitions, the
	// tools' tokens, and the leading tokens (whole blocks) it shares with
	// the same request sent from another project directory.
	ToolsStartTokens         int `json:"tools_start_tokens"`
	ToolTokens               int `json:"tool_tokens"`
	OtherProjectSharedTokens int `json:"other_project_shared_tokens"`
}

func readCapturedShapes(t *testing.T) []capturedShape {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "api", "testdata", "client-shapes.json"))
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		Requests []capturedShape `json:"requests"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	return v.Requests
}

// median of the recorded runs' figure.
func medianOf(rows []capturedShape, of func(capturedShape) int) float64 {
	v := make([]float64, 0, len(rows))
	for _, r := range rows {
		v = append(v, float64(of(r)))
	}
	sort.Float64s(v)
	return Percentile(v, 50)
}

// TestClientPresetsFollowCaptures holds each client preset to what the
// recorded sessions of its client measure: the first prompt within 2% of
// the recorded one (the task length varies around it), the prefix every
// session shares equal to what the two recorded sessions share, and
// OpenCode's title request likewise.
func TestClientPresetsFollowCaptures(t *testing.T) {
	rows := readCapturedShapes(t)
	if got := ClientPresetNames(); !slices.Equal(got, []string{"claude-code", "codex", "opencode"}) || !slices.Equal(got, catalog.AgentClientIDs()) {
		t.Fatalf("client presets %v, catalog's agent clients %v: want claude-code, codex, opencode in both", got, catalog.AgentClientIDs())
	}
	for _, name := range ClientPresetNames() {
		t.Run(name, func(t *testing.T) {
			p, err := PresetByName(name)
			if err != nil {
				t.Fatal(err)
			}
			pick := func(kind string, turn int) []capturedShape {
				var out []capturedShape
				for _, r := range rows {
					if r.Client == name && r.Kind == kind && r.Turn == turn {
						out = append(out, r)
					}
				}
				if len(out) < 2 {
					t.Fatalf("%d recorded %s requests of turn %d, want the two runs'", len(out), kind, turn)
				}
				return out
			}
			first := pick("turn", 0)
			want := medianOf(first, func(r capturedShape) int { return r.PromptTokens })
			shared := medianOf(first, func(r capturedShape) int { return r.SharedTokens })
			w, err := p.Workload(1, 4, 40960)
			if err != nil {
				t.Fatal(err)
			}
			var got []float64
			for i := range 50 {
				got = append(got, float64(len(w.Session(i).Turns[0].Prompt)))
			}
			sort.Float64s(got)
			if m := Percentile(got, 0); m < 0.98*want || m > 1.02*want {
				t.Errorf("shortest first prompt %.0f tokens, recorded %.0f: want within 2%%", m, want)
			}
			if c := agentClientOf(t, name); float64(c.FirstPromptTokens) != want {
				t.Errorf("catalog.AgentClients has %s's first prompt at %d tokens, recorded %.0f", c.Name, c.FirstPromptTokens, want)
			}
			if float64(p.Agentic.PrefixTokens) != shared {
				t.Errorf("shared prefix %d tokens, the recorded sessions share %.0f", p.Agentic.PrefixTokens, shared)
			}
			checkSharedPrefix(t, w, p.Agentic.PrefixTokens)
			for j, sr := range p.Agentic.SideRequests {
				side := pick("side", -1)
				want := medianOf(side, func(r capturedShape) int { return r.PromptTokens })
				if s := float64(sr.PrefixTokens); s != medianOf(side, func(r capturedShape) int { return r.SharedTokens }) {
					t.Errorf("side request %s: prefix %.0f, recorded shared prefix differs", sr.Name, s)
				}
				prompt := float64(len(w.Session(0).Side[j].Turns[0].Prompt))
				if prompt < 0.9*want || prompt > 1.5*want {
					t.Errorf("side request %s: prompt %.0f tokens, recorded %.0f", sr.Name, prompt, want)
				}
			}
			if len(p.Agentic.SideRequests) == 0 {
				for _, r := range rows {
					if r.Client == name && r.Kind == "side" {
						t.Errorf("the recording of %s has a side request (%s), the preset none", name, r.Run)
					}
				}
			}
		})
	}
}

// TestCapturedProjectPartAgainstTools pins where, in each client's
// recorded first prompt, the part that names the project directory falls
// against the tool definitions: Claude Code and OpenCode write it in their
// system text, which the Qwen3 template renders before the tools, so a
// session in another project shares less than the tools' start; Codex
// writes it in an input message, so sessions of any project share its
// instructions and tools. The client presets model sessions of one project
// directory; a recording that moves the part changes what sessions in
// several projects share (docs/perf-history.md, "What two sessions' first
// prompts share").
func TestCapturedProjectPartAgainstTools(t *testing.T) {
	beforeTools := map[string]bool{"claude-code": true, "codex": false, "opencode": true}
	rows := readCapturedShapes(t)
	for _, name := range ClientPresetNames() {
		before, ok := beforeTools[name]
		if !ok {
			t.Errorf("%s: no expectation of where its project directory falls", name)
			continue
		}
		n := 0
		for _, r := range rows {
			if r.Client != name || r.Kind != "turn" || r.Turn != 0 {
				continue
			}
			n++
			if r.ToolsStartTokens <= 0 || r.ToolTokens <= 0 || r.OtherProjectSharedTokens <= 0 ||
				r.ToolsStartTokens+r.ToolTokens > r.PromptTokens || r.OtherProjectSharedTokens > r.SharedTokens {
				t.Errorf("%s %s: tools from token %d, %d tool tokens, %d shared with another project, %d with the other run, of %d: "+
					"missing or inconsistent figures", name, r.Run, r.ToolsStartTokens, r.ToolTokens, r.OtherProjectSharedTokens, r.SharedTokens, r.PromptTokens)
				continue
			}
			toolsEnd := r.ToolsStartTokens + r.ToolTokens
			switch {
			case before && r.OtherProjectSharedTokens > r.ToolsStartTokens:
				t.Errorf("%s %s: a session in another project shares %d tokens, past the tools' start at %d: want the project part before the tools",
					name, r.Run, r.OtherProjectSharedTokens, r.ToolsStartTokens)
			case !before && r.OtherProjectSharedTokens < toolsEnd:
				t.Errorf("%s %s: a session in another project shares %d tokens, short of the tools' end at %d: want the project part after the tools",
					name, r.Run, r.OtherProjectSharedTokens, toolsEnd)
			}
		}
		if n < 2 {
			t.Errorf("%s: %d recorded first prompts, want the two runs'", name, n)
		}
	}
}

// checkSharedPrefix checks that sessions of w share exactly their first
// prefix tokens, and the task after them is each session's own.
func checkSharedPrefix(t *testing.T, w *Agentic, prefix int) {
	t.Helper()
	a, b := w.Session(0).Turns[0], w.Session(1).Turns[0]
	if a.SharedPrefix != prefix || !slices.Equal(a.Prompt[:prefix], b.Prompt[:prefix]) {
		t.Errorf("two sessions do not share their %d-token prefix", prefix)
	}
	if slices.Equal(a.Prompt[prefix:prefix+8], b.Prompt[prefix:prefix+8]) {
		t.Error("two sessions have the same task")
	}
}

// TestCompactionKeepsPromptsWithinContext: a client preset on a context
// its history outgrows summarises instead of failing: every request fits,
// a summarisation turn asks about the history so far, and the turn after
// it starts afresh from the shared prefix and the summary.
func TestCompactionKeepsPromptsWithinContext(t *testing.T) {
	for _, tc := range []struct {
		preset string
		limit  int
	}{
		{"codex", 29856},       // Qwen3-14B-FP8 on one RTX 4090: compacts when a turn would not fit
		{"claude-code", 59712}, // with FP8 KV and YaRN: compacts at its threshold
	} {
		t.Run(tc.preset, func(t *testing.T) { testCompactionWithinContext(t, tc.preset, tc.limit) })
	}
}

func testCompactionWithinContext(t *testing.T, preset string, limit int) {
	p, _ := PresetByName(preset)
	w, err := p.Workload(3, 4, limit)
	if err != nil {
		t.Fatal(err)
	}
	compactions, turns := 0, 0
	for i := range 40 {
		s := w.Session(i)
		for k, req := range s.Turns {
			if n := len(req.Prompt) + req.OutputTokens; n > limit {
				t.Fatalf("%s: prompt and answer %d tokens, over the context %d", req.ID(), n, limit)
			}
			checkSegments(t, &req)
			if !req.Compaction {
				turns++
				continue
			}
			compactions++
			prev, next := s.Turns[k-1], s.Turns[k+1]
			history := slices.Concat(prev.Prompt, prev.Answer)
			instr := len(req.Prompt) - len(w.instruction)
			if n := min(instr, len(history)); n < len(w.Prefix()) || !slices.Equal(req.Prompt[:n], history[:n]) {
				t.Fatalf("%s: the summarisation prompt is not the history so far", req.ID())
			}
			if !slices.Equal(req.Prompt[instr:], w.instruction) {
				t.Fatalf("%s: no instruction at the end", req.ID())
			}
			if !slices.Equal(next.Prompt, slices.Concat(w.Prefix(), req.Answer)) || next.Compaction {
				t.Fatalf("%s: the turn after a compaction is not the prefix and the summary", next.ID())
			}
		}
		if got := s.Compactions(); got > len(s.Turns)/2 {
			t.Errorf("%s: %d compactions in %d requests", s.ID, got, len(s.Turns))
		}
	}
	if compactions == 0 {
		t.Fatal("no session compacted: the context never filled up")
	}
	t.Logf("%d compactions in %d turns of 40 sessions", compactions, turns)

	// The same sessions without compaction would not fit.
	cfg := p.Agentic
	cfg.Seed, cfg.Compaction = 3, nil
	over := 0
	plain := newAgentic(t, cfg)
	for i := range 40 {
		for _, req := range plain.Session(i).Turns {
			if len(req.Prompt)+req.OutputTokens > limit {
				over++
			}
		}
	}
	if over == 0 {
		t.Error("without compaction every turn fits too: the test proves nothing")
	}
}

// TestClaudeCodeCompactsAtItsThreshold: the Claude Code preset compacts
// where the printed settings make the client compact
// (agentclient.ClaudeCodeCompactThreshold of the served context), not where the
// context ends; a client told a window past the context (Claude Code's
// default for a model it does not know) sends what does not fit instead.
func TestClaudeCodeCompactsAtItsThreshold(t *testing.T) {
	const limit = 59712
	threshold := agentclient.ClaudeCodeCompactThreshold(limit)
	p, _ := PresetByName("claude-code")
	w, err := p.Workload(3, 4, limit)
	if err != nil {
		t.Fatal(err)
	}
	compactions := 0
	for i := range 40 {
		s := w.Session(i)
		for k, req := range s.Turns {
			if req.Compaction {
				compactions++
				// Its prompt is the history, cut where it would not fit
				// with the summary, and the instruction.
				history := len(req.Prompt) - len(w.instruction)
				if history <= threshold && len(req.Prompt)+req.OutputTokens < limit {
					t.Fatalf("%s: compacted a %d-token history, below the threshold %d", req.ID(), history, threshold)
				}
				continue
			}
			if k > 0 && !s.Turns[k-1].Compaction && len(req.Prompt) > threshold {
				t.Fatalf("%s: a %d-token prompt past the threshold %d, not compacted", req.ID(), len(req.Prompt), threshold)
			}
		}
	}
	if compactions == 0 {
		t.Fatal("no session compacted")
	}
	// Told a 200,000-token window, Claude Code compacts only near 167k.
	cfg := p.Agentic
	cfg.Seed, cfg.Sessions, cfg.MaxContextTokens = 3, 4, limit
	cp := *cfg.Compaction
	cp.AboveTokens = 200000 - 20000 - 13000
	cfg.Compaction = &cp
	unknown := newAgentic(t, cfg)
	over := 0
	for i := range 40 {
		turns := unknown.Session(i).Turns
		if last := turns[len(turns)-1]; len(last.Prompt)+last.OutputTokens > limit {
			over++
		}
	}
	if over == 0 {
		t.Error("no session sent a turn past the context: a client with the wrong window would")
	}
}

// checkSegments checks that a request's segments tile its prompt.
func checkSegments(t *testing.T, req *Request) {
	t.Helper()
	at := 0
	for _, s := range req.Segments {
		if s.Start != at || s.End <= s.Start {
			t.Fatalf("%s: segments %v do not tile the prompt", req.ID(), req.Segments)
		}
		at = s.End
	}
	if at != len(req.Prompt) {
		t.Fatalf("%s: segments end at %d, prompt is %d", req.ID(), at, len(req.Prompt))
	}
}

// TestSimCompactsInsteadOfFailing runs the claude-code preset on one
// simulated RTX 4090: with compaction no request fails on the context and
// the summary counts them; without it, the same sessions end in context
// errors.
func TestSimCompactsInsteadOfFailing(t *testing.T) {
	s := newTestSim(t, SimConfig{GPUs: []string{"rtx4090"}})
	p, _ := PresetByName("claude-code")
	cfg := p.Agentic
	cfg.Seed, cfg.Sessions, cfg.TotalSessions, cfg.Duration = 1, 2, 2, 0
	cfg.ToolPause = Constant{Value: 500 * time.Millisecond}
	cfg.MaxContextTokens = s.MaxModelLen()
	run := func(cfg AgenticConfig) RunSummary {
		t.Helper()
		r, err := s.Run(context.Background(), newAgentic(t, cfg), router.PolicyHearth, 2, nil)
		if err != nil {
			t.Fatal(err)
		}
		return r.Summary
	}
	with := run(cfg)
	if with.Errors != 0 || with.Compactions == 0 || with.FinishedSessions != 2 {
		t.Errorf("with compaction: %d errors (%s), %d compactions, %d of 2 sessions finished; want no error, compactions, both done",
			with.Errors, with.ErrorsByCause, with.Compactions, with.FinishedSessions)
	}
	if want := float64(with.Compactions) / 2; with.CompactionsPerSession != want {
		t.Errorf("compactions per session %v, want %v", with.CompactionsPerSession, want)
	}
	cfg.Compaction, cfg.MaxContextTokens = nil, 0
	without := run(cfg)
	if without.ErrorsByCause.ContextLength == 0 || without.Compactions != 0 {
		t.Errorf("without compaction: %d context errors, %d compactions; want context errors", without.ErrorsByCause.ContextLength, without.Compactions)
	}
}

// TestSimClientPresetIsDeterministic: a client preset's run (side
// requests, compactions) is a function of its seed.
func TestSimClientPresetIsDeterministic(t *testing.T) {
	s := newTestSim(t, SimConfig{GPUs: []string{"rtx4090", "rtx4090"}, Seed: 5})
	p, _ := PresetByName("opencode")
	run := func(seed uint64) *SimRun {
		t.Helper()
		w, err := p.Workload(seed, 3, s.MaxModelLen())
		if err != nil {
			t.Fatal(err)
		}
		w.cfg.Duration = 3 * time.Minute
		r, err := s.Run(context.Background(), w, router.PolicyHearth, 3, nil)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	a, b := run(4), run(4)
	if !reflect.DeepEqual(a.Results, b.Results) || !reflect.DeepEqual(a.Summary, b.Summary) {
		t.Error("one seed, two different runs")
	}
	if c := run(5); reflect.DeepEqual(a.Summary, c.Summary) {
		t.Error("seeds 4 and 5 gave the same run")
	}
	titles := 0
	for _, r := range a.Results {
		if filepath.Ext(r.Session) == ".title" {
			titles++
		}
	}
	if titles == 0 {
		t.Error("no title request was sent")
	}
}

// TestAgenticDriverSideRequests: a side request falls due with its
// session's first turn and its end neither ends nor replaces the session.
func TestAgenticDriverSideRequests(t *testing.T) {
	cfg := AgenticConfig{Seed: 2, PrefixTokens: 100, Steps: 3, Sessions: 1, TotalSessions: 2,
		ToolPause:    Constant{Value: time.Second},
		SideRequests: []SideRequest{{Name: "title", PrefixTokens: 50, AnswerTokens: IntRange{Min: 10, Max: 10}}}}
	a := newAgentic(t, cfg)
	log := runFake(t, a.NewDriver(), func(*Request) time.Duration { return 100 * time.Millisecond }, nil)
	var sent []string
	for _, ev := range log {
		if ev.sent {
			sent = append(sent, ev.req.ID())
		}
	}
	want := []string{"s00000/0", "s00000.title/0", "s00000/1", "s00000/2", "s00001/0", "s00001.title/0", "s00001/1", "s00001/2"}
	if !slices.Equal(sent, want) {
		t.Errorf("sent %v, want %v", sent, want)
	}
	side := a.Session(0).Side[0].Turns[0]
	task := a.Session(0).Turns[0].Segments[1]
	if side.SharedPrefix != 50 || !slices.Equal(side.Prompt[50:], a.Session(0).Turns[0].Prompt[task.Start:task.End]) {
		t.Error("the title request is not its own prefix and the session's task")
	}
}

// agentClientOf is the catalog's entry for a client preset, which plans
// and warns with the same first prompt.
func agentClientOf(t *testing.T, preset string) catalog.AgentClient {
	t.Helper()
	for _, c := range catalog.AgentClients {
		if c.ID == preset {
			return c
		}
	}
	t.Fatalf("catalog.AgentClients has no entry for the %s preset", preset)
	return catalog.AgentClient{}
}
