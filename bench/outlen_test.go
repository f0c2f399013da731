package bench

import (
	"context"
	"testing"

	"github.com/hearth-llm/hearth/router"
	"github.com/hearth-llm/hearth/router/osl"
)

func TestOSLCall(t *testing.T) {
	turn := func(last Role) *Request {
		return &Request{Session: "s00001", Turn: 2, Segments: []Segment{{Role: RoleSystem}, {Role: RoleUser}, {Role: RoleAssistant}, {Role: last}}}
	}
	tests := []struct {
		name   string
		client string
		req    *Request
		want   osl.Call
		kind   osl.Kind
	}{
		{"a turn after a tool result", "claude-code", turn(RoleTool),
			osl.Call{Client: "claude-code", Session: "s00001", AfterTool: true}, osl.ToolCall},
		{"a session's first turn", "opencode", &Request{Session: "s00001", Segments: []Segment{{Role: RoleSystem}, {Role: RoleUser}}},
			osl.Call{Client: "opencode", Session: "s00001"}, osl.ToolCall},
		{"a session's last turn", "", &Request{Session: "s00001", Last: true, Segments: []Segment{{Role: RoleTool}}},
			osl.Call{Session: "s00001", AfterTool: true}, osl.Final},
		{"a side request under its parent's session", "opencode", &Request{Session: "s00001.title", Side: true, Last: true},
			osl.Call{Client: "opencode", Session: "s00001", Side: true}, osl.Side},
		{"Codex names its compaction apart", "codex", &Request{Session: "s00001", Compaction: true, Segments: []Segment{{Role: RoleUser}}},
			osl.Call{Client: "codex", Session: "s00001", Side: true}, osl.Final},
		{"another client's compaction is a turn after the user", "claude-code", &Request{Session: "s00001", Compaction: true, Segments: []Segment{{Role: RoleUser}}},
			osl.Call{Client: "claude-code", Session: "s00001"}, osl.Final},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := oslCall(tc.client, tc.req); got != tc.want {
				t.Errorf("oslCall = %+v, want %+v", got, tc.want)
			}
			if got := oslKind(tc.req); got != tc.kind {
				t.Errorf("oslKind = %v, want %v", got, tc.kind)
			}
		})
	}
}

// TestOutputLengthEstimateOnPresets holds the estimator's goal on the
// client presets: after each session's first three turns the median
// relative error of its output-length estimates is within 30%.
func TestOutputLengthEstimateOnPresets(t *testing.T) {
	if testing.Short() {
		t.Skip("skipping: three simulated runs")
	}
	s := newTestSim(t, SimConfig{GPUs: []string{"rtx4090", "rtx4090"}, InferOSL: true, Seed: 1})
	for _, name := range []string{"claude-code", "codex", "opencode"} {
		p, ok := LookupPreset(name)
		if !ok {
			t.Fatalf("no preset %q", name)
		}
		w, err := p.Workload(1, 4, p.MaxModelLen)
		if err != nil {
			t.Fatal(err)
		}
		run, err := s.Run(context.Background(), w, router.PolicyHearth, 4, nil)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		e := run.Summary.OutputLength
		if e == nil || e.WarmN < 20 {
			t.Fatalf("%s: output length error %+v, want estimates after the first turns of at least 20 requests", name, e)
		}
		t.Logf("%s: p50 %.2f p90 %.2f (%d); after three turns p50 %.2f p90 %.2f (%d)", name, e.P50, e.P90, e.N, e.WarmP50, e.WarmP90, e.WarmN)
		if e.WarmP50 > 0.30 {
			t.Errorf("%s: error p50 after three turns %.2f, want at most 0.30", name, e.WarmP50)
		}
	}
}

func TestNoEstimatesWithoutInference(t *testing.T) {
	s := newTestSim(t, SimConfig{GPUs: []string{"rtx4090"}})
	run, err := s.Run(context.Background(), smallAgentic(t, 1, 2), router.PolicyHearth, 2, nil)
	if err != nil {
		t.Fatal(err)
	}
	if e := run.Summary.OutputLength; e != nil {
		t.Fatalf("a run without InferOSL reports output length estimates: %+v", e)
	}
}

func TestSummarizeOutputLength(t *testing.T) {
	results := []Result{
		{OutputTokens: 100, PredictedOutputTokens: 150},                       // 0.5
		{OutputTokens: 100, PredictedOutputTokens: 90, PredictionWarm: true},  // 0.1
		{OutputTokens: 200, PredictedOutputTokens: 260, PredictionWarm: true}, // 0.3
		{OutputTokens: 100},                          // no estimate
		{OutputTokens: 0, PredictedOutputTokens: 10}, // no output
	}
	got := summarizeOutputLength(results)
	// Percentile interpolates: p90 of 0.1, 0.3, 0.5 is 0.46.
	want := OutputLengthError{N: 3, P50: 0.3, P90: 0.46, WarmN: 2, WarmP50: 0.2, WarmP90: 0.28}
	if got == nil || !closeTo(got.P50, want.P50) || !closeTo(got.P90, want.P90) || got.N != want.N ||
		got.WarmN != want.WarmN || !closeTo(got.WarmP50, want.WarmP50) || !closeTo(got.WarmP90, want.WarmP90) {
		t.Fatalf("summarizeOutputLength = %+v, want %+v", got, want)
	}
	if summarizeOutputLength(results[3:]) != nil {
		t.Fatal("results without estimates summarised as having some")
	}
}

func closeTo(a, b float64) bool { return a-b < 1e-9 && b-a < 1e-9 }

func TestParseOSLHeader(t *testing.T) {
	for _, tc := range []struct {
		in            string
		tokens, turns int
		ok            bool
	}{
		{"183; source=session; kind=tool_call; turns=4", 183, 4, true},
		{"300; source=client", 300, 0, true},
		{"42", 42, 0, true},
		{"", 0, 0, false},
		{"0; source=global", 0, 0, false},
		{"x; turns=3", 0, 0, false},
		{"12; turns=-1", 12, 0, true},
		{"12;turns=7;", 12, 7, true},
	} {
		tokens, turns, ok := parseOSLHeader(tc.in)
		if tokens != tc.tokens || turns != tc.turns || ok != tc.ok {
			t.Errorf("parseOSLHeader(%q) = %d, %d, %v; want %d, %d, %v", tc.in, tokens, turns, ok, tc.tokens, tc.turns, tc.ok)
		}
	}
}

func FuzzParseOSLHeader(f *testing.F) {
	f.Add("183; source=session; kind=tool_call; turns=4")
	f.Add("300; source=client")
	f.Fuzz(func(t *testing.T, v string) {
		tokens, turns, ok := parseOSLHeader(v)
		if ok && (tokens <= 0 || turns < 0) || !ok && (tokens != 0 || turns != 0) {
			t.Fatalf("parseOSLHeader(%q) = %d, %d, %v", v, tokens, turns, ok)
		}
	})
}
