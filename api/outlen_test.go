package api

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/goccy/go-json"

	"github.com/hearth-llm/hearth/router/osl"
)

// fakeOutputLengths predicts a fixed estimate and records what it learns.
type fakeOutputLengths struct {
	est osl.Estimate

	mu        sync.Mutex
	predicted []osl.Call
	observed  []observedOutput
}

type observedOutput struct {
	call   osl.Call
	kind   osl.Kind
	tokens int
}

func (f *fakeOutputLengths) Predict(c osl.Call) osl.Estimate {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.predicted = append(f.predicted, c)
	return f.est
}

func (f *fakeOutputLengths) Observe(c osl.Call, k osl.Kind, tokens int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.observed = append(f.observed, observedOutput{c, k, tokens})
}

func withOutputLengths(o OutputLengths) harnessOption {
	return func(_ *Config, d *Deps) { d.OutputLengths = o }
}

func TestOutputLengthEstimates(t *testing.T) {
	const tools = `"tools":[{"type":"function","function":{"name":"bash","parameters":{"type":"object"}}}]`
	afterTool := `{"model":"gpt-5.5","stream":true,` + tools + `,"messages":[{"role":"user","content":"list"},` +
		`{"role":"assistant","content":"","tool_calls":[{"id":"c1","type":"function","function":{"name":"bash","arguments":"{}"}}]},` +
		`{"role":"tool","tool_call_id":"c1","content":"a.txt"}]}`
	est := osl.Estimate{Tokens: 183, Kind: osl.ToolCall, Source: osl.SourceSession, SessionTurns: 4}
	for _, tc := range []struct {
		name    string
		body    string
		headers []string
		routed  int    // the osl hint the router got
		header  string // x-hearth-osl
		predict bool   // the estimator was asked
		learned observedOutput
	}{
		{"a turn without a hint gets the estimate", chatBody(tools), []string{"x-session-id", "s1"}, 183, "183; source=session; kind=tool_call; turns=4", true,
			observedOutput{osl.Call{Session: "s1"}, osl.ToolCall, 0}},
		{"the client's hint wins", chatBody(tools + `,"nvext":{"agent_hints":{"osl":300}}`), []string{"x-session-id", "s1"}, 300, "300; source=client", false,
			observedOutput{osl.Call{Session: "s1"}, osl.ToolCall, 0}},
		{"a turn after a tool result, named by its call", afterTool, []string{"x-session-id", "s2"}, 183, "183; source=session; kind=tool_call; turns=4", true,
			observedOutput{osl.Call{Session: "s2", AfterTool: true, Tool: "bash"}, osl.Final, 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fake := &fakeOutputLengths{est: est}
			h := startGateway(t, nil, withOutputLengths(fake))
			resp, body := h.post(t, "/v1/chat/completions", tc.body, tc.headers...)
			if resp.StatusCode != 200 {
				t.Fatalf("%d %s", resp.StatusCode, body)
			}
			h.router.waitFreed(t, 1)
			if got := h.router.lastRoute(t).Hints.OSL; got != tc.routed {
				t.Errorf("the router got osl %d, want %d", got, tc.routed)
			}
			if got := resp.Header.Get("x-hearth-osl"); got != tc.header {
				t.Errorf("x-hearth-osl %q, want %q", got, tc.header)
			}
			origin := HintInferred
			if !tc.predict {
				origin = HintClient
			}
			if want := fmt.Sprintf("osl=%d(%s)", tc.routed, origin); !strings.Contains(resp.Header.Get(headerHints), want) {
				t.Errorf("x-hearth-hints %q, want it to hold %q", resp.Header.Get(headerHints), want)
			}
			fake.mu.Lock()
			defer fake.mu.Unlock()
			if asked := len(fake.predicted) > 0; asked != tc.predict {
				t.Errorf("estimator asked: %v, want %v", asked, tc.predict)
			}
			if len(fake.observed) != 1 {
				t.Fatalf("estimator learned %d answers, want 1", len(fake.observed))
			}
			got := fake.observed[0]
			if got.call.Session != tc.learned.call.Session || got.call.AfterTool != tc.learned.call.AfterTool ||
				got.call.Tool != tc.learned.call.Tool || got.call.Side || got.kind != tc.learned.kind || got.tokens <= 0 {
				t.Errorf("learned %+v, want %+v with the answer's tokens", got, tc.learned)
			}
		})
	}
}

func TestNoEstimatorRoutesWithoutOSL(t *testing.T) {
	h := startGateway(t, nil)
	resp, body := h.post(t, "/v1/chat/completions", chatBody(""))
	if resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	if got := h.router.lastRoute(t).Hints.OSL; got != 0 {
		t.Errorf("the router got osl %d without an estimator, want 0", got)
	}
	if got := resp.Header.Get("x-hearth-osl"); got != "" {
		t.Errorf("x-hearth-osl %q without an estimate", got)
	}
}

func TestOSLCallOf(t *testing.T) {
	msgs := func(js string) []chatMessage {
		var m []chatMessage
		if err := json.Unmarshal([]byte(js), &m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	call := `{"role":"assistant","tool_calls":[{"id":"a","function":{"name":"Read"}},{"id":"b","function":{"name":"Grep"}}]}`
	for _, tc := range []struct {
		name string
		kind RequestKind
		msgs []chatMessage
		want osl.Call
	}{
		{"after the user", KindTurn, msgs(`[{"role":"user","content":"x"}]`), osl.Call{Client: "c", Session: "s"}},
		{"after the second of two tool calls", KindTurn, msgs(`[{"role":"user"},` + call + `,{"role":"tool","tool_call_id":"a"},{"role":"tool","tool_call_id":"b"}]`),
			osl.Call{Client: "c", Session: "s", AfterTool: true, Tool: "Grep"}},
		{"a result whose call is not in the history", KindTurn, msgs(`[{"role":"tool","tool_call_id":"z"}]`),
			osl.Call{Client: "c", Session: "s", AfterTool: true}},
		{"a side request", KindSide, msgs(`[{"role":"tool","tool_call_id":"a"}]`), osl.Call{Client: "c", Session: "s", Side: true}},
		{"no messages", KindTurn, nil, osl.Call{Client: "c", Session: "s"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := oslCallOf("c", "s", tc.kind, tc.msgs); got != tc.want {
				t.Errorf("oslCallOf = %+v, want %+v", got, tc.want)
			}
		})
	}
}
