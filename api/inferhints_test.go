package api

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/hearth-llm/hearth/router"
)

const bashTool = `"tools":[{"type":"function","function":{"name":"bash","parameters":{"type":"object"}}}]`

// TestInferredHints sends requests over HTTP as the agents do and reads
// what the router was given, what the engine's body carried and the
// x-hearth-hints header of the answer.
func TestInferredHints(t *testing.T) {
	opencode := []string{"User-Agent", "opencode/1.0", "x-session-affinity", "ses_1"}
	for _, tc := range []struct {
		name    string
		body    string
		headers []string
		off     bool // Config.NoInferredHints
		engine  int  // Config.EnginePriority
		want    router.Hints
		header  string
		// field is the engine body's priority field; "" for none.
		field string
	}{
		{name: "turn", body: chatBody(bashTool), headers: opencode,
			want: router.Hints{Priority: PriorityTurn}, header: "priority=0(inferred)"},
		{name: "side request", body: chatBody(""), headers: opencode,
			want: router.Hints{Priority: PrioritySide}, header: "priority=-1(inferred)"},
		{name: "side request of an unknown client is a turn", body: chatBody(""),
			want: router.Hints{Priority: PriorityTurn}, header: "priority=0(inferred)"},
		{name: "the client's hints win", body: chatBody(`"nvext":{"agent_hints":{"priority":3,"osl":100}}`), headers: opencode,
			want: router.Hints{Priority: 3, OSL: 100}, header: "priority=3(client),osl=100(client)"},
		{name: "the client's zero priority wins", body: chatBody(`"nvext":{"agent_hints":{"priority":0}}`), headers: opencode,
			want: router.Hints{}, header: "priority=0(client)"},
		{name: "inference off", body: chatBody(""), headers: opencode, off: true,
			want: router.Hints{}, header: ""},
		{name: "inference off keeps the client's", body: chatBody(`"nvext":{"agent_hints":{"priority":-4}}`), headers: opencode, off: true,
			want: router.Hints{Priority: -4}, header: "priority=-4(client)"},
		{name: "lower first engine: an inferred side request is told a turn's", body: chatBody(""), headers: opencode, engine: -1,
			want: router.Hints{Priority: PrioritySide}, header: "priority=-1(inferred)", field: "0"},
		{name: "lower first engine: the client's own low priority", body: chatBody(`"nvext":{"agent_hints":{"priority":-1}}`), headers: opencode, engine: -1,
			want: router.Hints{Priority: -1}, header: "priority=-1(client)", field: "1"},
		{name: "lower first engine: turn", body: chatBody(bashTool), headers: opencode, engine: -1,
			want: router.Hints{Priority: PriorityTurn}, header: "priority=0(inferred)", field: "0"},
		{name: "higher first engine: side", body: chatBody(""), headers: opencode, engine: 1,
			want: router.Hints{Priority: PrioritySide}, header: "priority=-1(inferred)", field: "0"},
		{name: "the client's priority field gives way", body: chatBody(`"priority":7`), headers: opencode, engine: 1,
			want: router.Hints{Priority: PrioritySide}, header: "priority=-1(inferred)", field: "0"},
		{name: "legacy completions", body: `{"model":"gpt-5.5","prompt":"hi","stream":true}`, headers: opencode, engine: -1,
			want: router.Hints{Priority: PrioritySide}, header: "priority=-1(inferred)", field: "0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := startGateway(t, nil, withConfig(func(c *Config) {
				c.NoInferredHints, c.EnginePriority = tc.off, tc.engine
			}))
			path := "/v1/chat/completions"
			if tc.name == "legacy completions" {
				path = "/v1/completions"
			}
			resp, body := h.post(t, path, tc.body, tc.headers...)
			if resp.StatusCode != 200 {
				t.Fatalf("%d %s", resp.StatusCode, body)
			}
			if got := h.router.lastRoute(t).Hints; got != tc.want {
				t.Errorf("routed with %+v, want %+v", got, tc.want)
			}
			if got := resp.Header.Get(headerHints); got != tc.header {
				t.Errorf("%s %q, want %q", headerHints, got, tc.header)
			}
			sent := <-h.engine.seen
			if got := string(sent["priority"]); got != tc.field {
				t.Errorf("engine body priority %q, want %q", got, tc.field)
			}
		})
	}
}

// TestSpeculativePrefillIsBackground: the prefill sent after an answer
// carries the background priority in the engine's convention, below every
// turn's, and none with inference off.
func TestSpeculativePrefillIsBackground(t *testing.T) {
	for _, tc := range []struct {
		name   string
		off    bool
		engine int
		want   string
	}{
		{"lower first engine", false, -1, "2"},
		{"higher first engine", false, 1, "-2"},
		{"no engine priority", false, 0, ""},
		{"inference off", true, -1, "0"}, // the request's own, a turn's 0
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := startGateway(t, nil, withConfig(func(c *Config) {
				c.NoInferredHints, c.EnginePriority = tc.off, tc.engine
			}))
			resp, body := h.post(t, "/v1/chat/completions", chatBody(bashTool+`,"nvext":{"agent_hints":{"speculative_prefill":true}}`),
				"User-Agent", "opencode/1.0")
			if resp.StatusCode != 200 {
				t.Fatalf("%d %s", resp.StatusCode, body)
			}
			<-h.engine.seen // the request itself
			var spec map[string]json.RawMessage
			select {
			case spec = <-h.engine.seen:
			case <-time.After(failSafe):
				t.Fatal("no speculative prefill arrived")
			}
			if got := string(spec["priority"]); got != tc.want {
				t.Errorf("speculative prefill priority %q, want %q", got, tc.want)
			}
		})
	}
}

func TestFormatHints(t *testing.T) {
	for _, tc := range []struct {
		h    router.Hints
		o    HintOrigins
		want string
	}{
		{router.Hints{}, HintOrigins{}, ""},
		{router.Hints{Priority: -1}, HintOrigins{Priority: HintInferred}, "priority=-1(inferred)"},
		{router.Hints{Priority: 2, StrictPriority: 1, OSL: 512, SpeculativePrefill: true},
			HintOrigins{Priority: HintClient, StrictPriority: HintClient, OSL: HintInferred, SpeculativePrefill: HintInferred},
			"priority=2(client),strict_priority=1(client),osl=512(inferred),speculative_prefill=true(inferred)"},
	} {
		if got := FormatHints(tc.h, tc.o); got != tc.want {
			t.Errorf("FormatHints(%+v, %+v) = %q, want %q", tc.h, tc.o, got, tc.want)
		}
	}
}
