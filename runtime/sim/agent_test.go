package sim

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"
)

// agentToolLists reads testdata/agent_tools.json: tool lists shaped like
// three coding agents'.
func agentToolLists(t testing.TB) map[string][]toolSpec {
	t.Helper()
	data, err := os.ReadFile("testdata/agent_tools.json")
	if err != nil {
		t.Fatal(err)
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		t.Fatal(err)
	}
	lists := map[string][]toolSpec{}
	for client, body := range raw {
		if strings.HasPrefix(client, "_") {
			continue
		}
		var tools []struct {
			Name       string          `json:"name"`
			Parameters json.RawMessage `json:"parameters"`
		}
		if err := json.Unmarshal(body, &tools); err != nil {
			t.Fatalf("%s: %v", client, err)
		}
		for _, tl := range tools {
			lists[client] = append(lists[client], toolSpec{Name: tl.Name, Parameters: tl.Parameters})
		}
	}
	return lists
}

func TestClassifyTool(t *testing.T) {
	tests := []struct {
		class toolClass
		names string
	}{
		{toolReadOnly, `Read Glob Grep LS read list glob grep read_file list_dir view_file file_search codebase_search find_files cat tree`},
		{toolWriting, `Bash Edit Write MultiEdit Agent Task TaskList TaskStop TaskCreate CronList CronDelete ExitWorktree
			EnterWorktree SendMessage ScheduleWakeup exec_command shell write_stdin apply_patch update_plan spawn_agent
			wait_agent multi_agent_v1 create_goal update_goal bash edit write task todowrite delete_file run_terminal_cmd`},
		{toolUnknown, `NotebookEdit WebFetch WebSearch view_image webfetch websearch list_mcp_resources skill Skill
			request_user_input get_goal Workflow ReportFindings _ x`},
	}
	for _, tc := range tests {
		for _, name := range strings.Fields(tc.names) {
			if got := classifyTool(name); got != tc.class {
				t.Errorf("classifyTool(%q) = %v, want %v", name, got, tc.class)
			}
		}
	}
}

func TestNameWords(t *testing.T) {
	tests := map[string]string{
		"TaskList": "task list", "filePath": "file path", "file_path": "file path", "LS": "ls",
		"multi_agent_v1": "multi agent v1", "read-file.v2": "read file v2", "": "",
	}
	for in, want := range tests {
		if got := strings.Join(nameWords(in), " "); got != want {
			t.Errorf("nameWords(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestReadConversation(t *testing.T) {
	tests := []struct {
		name      string
		msgs      []agentMessage
		workDir   string
		files     []string
		dirs      []string
		toolTurns int
	}{
		{"claude-style environment", []agentMessage{
			{Role: "system", Text: "Notes. Example: /path/to/example.py\n - Primary working directory: /tmp/proj\n - Is a git repository: false"},
			{Role: "user", Text: "<system-reminder>ignore /etc/skip.conf</system-reminder>What does src/main.go do?"},
		}, "/tmp/proj", []string{"/tmp/proj/src/main.go"}, []string{"/tmp/proj", "/tmp/proj/src"}, 0},
		{"opencode env block, results after calls", []agentMessage{
			{Role: "system", Text: "Here is some useful information:\n<env>\n  Working directory: /home/u/app\n</env>"},
			{Role: "user", Text: "Count the files here"},
			{Role: "assistant", ToolCalls: []toolCall{{Name: "glob", Arguments: `{"pattern":"**/*"}`}}},
			{Role: "tool", Text: "/home/u/app/go.mod\n/home/u/app/cmd/run.go\n"},
			{Role: "user", Text: "<system-reminder>a note after the result</system-reminder>"},
			{Role: "assistant", ToolCalls: []toolCall{{Name: "read", Arguments: `{"filePath":"/home/u/app/go.mod"}`}}},
			{Role: "tool", Text: "module example.com/app"},
		}, "/home/u/app", []string{"/home/u/app/go.mod", "/home/u/app/cmd/run.go"}, []string{"/home/u/app", "/home/u/app/cmd"}, 2},
		{"codex cwd tag, a new task resets the count", []agentMessage{
			{Role: "developer", Text: "rules"},
			{Role: "user", Text: "<environment_context>\n  <cwd>/srv/x</cwd>\n</environment_context>"},
			{Role: "assistant", ToolCalls: []toolCall{{Name: "exec_command", Arguments: `{"cmd":"ls"}`}}},
			{Role: "tool", Text: "README.md"},
			{Role: "assistant", Text: "done"},
			{Role: "user", Text: "Now look in /srv/x/docs/"},
		}, "/srv/x", []string{"/srv/x/README.md"}, []string{"/srv/x", "/srv/x/docs"}, 0},
		{"no working directory, no URLs", []agentMessage{
			{Role: "user", Text: "See https://example.com/a/b.html and lib/util.py"},
		}, "", []string{"lib/util.py"}, []string{"lib"}, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			conv := readConversation(tc.msgs)
			if conv.WorkDir != tc.workDir || !slices.Equal(conv.Files, tc.files) || !slices.Equal(conv.Dirs, tc.dirs) || conv.ToolTurns != tc.toolTurns {
				t.Errorf("got workdir %q files %q dirs %q turns %d,\nwant %q %q %q %d",
					conv.WorkDir, conv.Files, conv.Dirs, conv.ToolTurns, tc.workDir, tc.files, tc.dirs, tc.toolTurns)
			}
		})
	}
}

func TestFillArguments(t *testing.T) {
	lists := agentToolLists(t)
	tool := func(client, name string) toolSpec {
		i := slices.IndexFunc(lists[client], func(ts toolSpec) bool { return ts.Name == name })
		if i < 0 {
			t.Fatalf("no tool %s in %s", name, client)
		}
		return lists[client][i]
	}
	conv := conversation{WorkDir: "/p", Files: []string{"/p/main.go"}, Dirs: []string{"/p"}, Words: []string{"Handler"}}
	empty := conversation{}
	custom := func(schema string) toolSpec { return toolSpec{Name: "read_thing", Parameters: json.RawMessage(schema)} }
	tests := []struct {
		name string
		tool toolSpec
		conv *conversation
		want string // JSON, or "" when the tool cannot be filled
	}{
		{"claude Read", tool("claude", "Read"), &conv, `{"file_path":"/p/main.go"}`},
		{"claude Glob", tool("claude", "Glob"), &conv, `{"pattern":"**/*.go"}`},
		{"claude Grep searches a task word", tool("claude", "Grep"), &conv, `{"pattern":"Handler"}`},
		{"claude LS lists a directory", tool("claude", "LS"), &conv, `{"path":"/p"}`},
		{"opencode read", tool("opencode", "read"), &conv, `{"filePath":"/p/main.go"}`},
		{"opencode list needs nothing", tool("opencode", "list"), &conv, `{}`},
		{"opencode grep", tool("opencode", "grep"), &conv, `{"pattern":"Handler"}`},
		{"read with no file seen", tool("claude", "Read"), &empty, ""},
		{"grep with no task words", tool("opencode", "grep"), &empty, ""},
		{"glob with no files seen", tool("opencode", "glob"), &empty, `{"pattern":"**/*"}`},
		{"Write makes a file of its own", tool("claude", "Write"), &conv, `{"content":"Notes from Hearth's simulated model.\n","file_path":"/p/hearth-sim-notes.md"}`},
		{"Edit cannot be filled", tool("claude", "Edit"), &conv, ""},
		{"Agent cannot be filled", tool("claude", "Agent"), &conv, ""},
		{"codex shell wants an array", tool("codex", "shell"), &conv, ""},
		{"enum mismatch", custom(`{"type":"object","required":["path"],"properties":{"path":{"type":"string","enum":["a","b"]}}}`), &conv, ""},
		{"enum default", custom(`{"type":"object","required":["path","mode"],"properties":{"path":{"type":"string"},"mode":{"type":"string","enum":["x","y"],"default":"y"}}}`), &conv, `{"mode":"y","path":"/p/main.go"}`},
		{"required object", custom(`{"type":"object","required":["opts"],"properties":{"opts":{"type":"object"}}}`), &conv, ""},
		{"required integer without default", custom(`{"type":"object","required":["n"],"properties":{"n":{"type":"integer"}}}`), &conv, ""},
		{"required integer with default", custom(`{"type":"object","required":["n"],"properties":{"n":{"type":"integer","default":5}}}`), &conv, `{"n":5}`},
		{"unknown string", custom(`{"type":"object","required":["flavour"],"properties":{"flavour":{"type":"string"}}}`), &conv, ""},
		{"required name without property", custom(`{"type":"object","required":["ghost"]}`), &conv, ""},
		{"broken schema", custom(`[1]`), &conv, ""},
		{"no schema", toolSpec{Name: "list_files"}, &conv, `{}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			args, ok := fillArguments(tc.tool, tc.conv, rand.New(rand.NewPCG(1, 2)))
			got := ""
			if ok {
				b, err := json.Marshal(args)
				if err != nil {
					t.Fatal(err)
				}
				got = string(b)
			}
			if got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

// TestNoWritingToolWithoutFlag runs many seeds over the clients' tool lists
// and conversations at every stage of a task: without AllowWriteTools no
// call is ever of a tool that writes, runs commands or starts agents, nor of
// an unknown one; with it, writing tools do get called.
func TestNoWritingToolWithoutFlag(t *testing.T) {
	lists := agentToolLists(t)
	var all []toolSpec
	for _, client := range []string{"claude", "codex", "opencode"} {
		all = append(all, lists[client]...)
	}
	convs := []conversation{
		{},
		readConversation([]agentMessage{{Role: "system", Text: "Working directory: /w"}, {Role: "user", Text: "Read main.go and fix the Handler bug"}}),
		readConversation([]agentMessage{{Role: "user", Text: "tidy /w/a.go"}, {Role: "assistant", ToolCalls: []toolCall{{Name: "Read", Arguments: `{"file_path":"/w/a.go"}`}}},
			{Role: "tool", Text: "/w/b.go\n/w/sub/c.py"}}),
	}
	toolLists := [][]toolSpec{lists["claude"], lists["codex"], lists["opencode"], all}
	for _, allow := range []bool{false, true} {
		var writing, calls int
		for seed := range uint64(2000) {
			tools := toolLists[seed%uint64(len(toolLists))]
			conv := convs[seed%uint64(len(convs))]
			spec := answerSpec{Seed: seed, Tools: tools, ToolCall: true, ForcedTool: -1, Conversation: &conv,
				Agent: AgentOptions{AllowWriteTools: allow}}
			if seed%5 == 0 {
				spec.ForcedTool = int(seed/5) % len(tools) // tool_choice naming one tool
			}
			p := splitAnswer(composeAnswer(spec), true, true)
			for _, c := range p.Calls {
				calls++
				switch classifyTool(c.Name) {
				case toolWriting:
					writing++
					if !allow {
						t.Fatalf("seed %d: called writing tool %s %s without the flag", seed, c.Name, c.Arguments)
					}
				case toolUnknown:
					if spec.ForcedTool < 0 {
						t.Fatalf("seed %d: called unknown tool %s unasked", seed, c.Name)
					}
				}
			}
		}
		if calls == 0 {
			t.Errorf("allow=%v: no tool calls at all", allow)
		}
		if allow && writing == 0 {
			t.Error("with the flag no writing tool was ever called")
		}
	}
}

// fakeRepo answers the read-only tools of the tool lists over a small tree.
var fakeRepo = []string{"/work/app/go.mod", "/work/app/main.go", "/work/app/server/handler.go", "/work/app/README.md"}

func fakeToolResult(name, args string) string {
	switch classifyTool(name) {
	case toolReadOnly:
		if strings.Contains(strings.ToLower(name), "read") {
			return "package main\n\nfunc main() {}\n"
		}
		return strings.Join(fakeRepo, "\n")
	}
	return "error: not allowed"
}

// TestAgentTask plays whole tasks against the server with the tools of the
// two clients that offer file tools (Codex's are a shell and agents, so it
// gets an answer at once; TestNoWritingToolWithoutFlag covers it): each
// makes 3 to 6 read-only calls whose paths come from the
// conversation, then a final answer that says it is simulated.
func TestAgentTask(t *testing.T) {
	srv := startServer(t, newTestEngine(t, 1000), nil)
	lists := agentToolLists(t)
	counts := map[int]bool{}
	for _, client := range []string{"claude", "opencode"} {
		var tools []map[string]any
		for _, tl := range lists[client] {
			tools = append(tools, map[string]any{"type": "function", "function": map[string]any{"name": tl.Name, "parameters": tl.Parameters}})
		}
		for task := range 5 {
			msgs := []map[string]any{
				{"role": "system", "content": "You help with code.\n<env>\n  Working directory: /work/app\n</env>"},
				{"role": "user", "content": fmt.Sprintf("Task %d: explain how the server Handler works in main.go", task)},
			}
			var called []toolCallJSON
			for turn := 0; ; turn++ {
				if turn > 10 {
					t.Fatalf("%s task %d: no final answer after %d turns", client, task, turn)
				}
				_, data := srv.post(t, "/v1/chat/completions", map[string]any{"model": "qwen3-test", "messages": msgs, "tools": tools})
				msg := decodeChat(t, data).Choices[0].Message
				if len(msg.ToolCalls) == 0 {
					if msg.Content == nil || !strings.Contains(*msg.Content, "simulated model") {
						t.Errorf("%s task %d: final answer %s", client, task, data)
					}
					break
				}
				c := msg.ToolCalls[0]
				called = append(called, c)
				if classifyTool(c.Function.Name) != toolReadOnly {
					t.Fatalf("%s task %d: called %s", client, task, c.Function.Name)
				}
				checkPathsFromConversation(t, c.Function.Arguments, msgs)
				msgs = append(msgs,
					map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{map[string]any{"id": c.ID, "type": "function",
						"function": map[string]any{"name": c.Function.Name, "arguments": c.Function.Arguments}}}},
					map[string]any{"role": "tool", "tool_call_id": c.ID, "content": fakeToolResult(c.Function.Name, c.Function.Arguments)})
			}
			if n := len(called); n < defaultMinToolCalls || n > defaultMaxToolCalls {
				t.Errorf("%s task %d: %d tool calls, want %d-%d", client, task, n, defaultMinToolCalls, defaultMaxToolCalls)
			}
			counts[len(called)] = true
		}
	}
	if len(counts) < 2 {
		t.Errorf("every task made the same number of calls: %v", counts)
	}
}

// checkPathsFromConversation fails when a path-like argument does not appear
// in the conversation so far (relative to /work/app, the working directory).
func checkPathsFromConversation(t *testing.T, args string, msgs []map[string]any) {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(args), &m); err != nil {
		t.Fatalf("arguments %q: %v", args, err)
	}
	seen, _ := json.Marshal(msgs)
	for k, v := range m {
		s, _ := v.(string)
		if !strings.Contains(strings.ToLower(k), "path") || s == "" {
			continue
		}
		// A relative name the user gave is resolved against the working
		// directory the system prompt states.
		if !strings.Contains(string(seen), s) && !strings.Contains(string(seen), strings.TrimPrefix(s, "/work/app/")) {
			t.Errorf("argument %s=%q is not in the conversation", k, s)
		}
	}
}

func TestToolCallBudget(t *testing.T) {
	tests := []struct {
		spec   string
		lo, hi int
	}{{"", 3, 6}, {"4", 4, 4}, {"2-5", 2, 5}, {"0", 0, 0}, {"0-2", 0, 2}}
	for _, tc := range tests {
		var o AgentOptions
		if tc.spec != "" {
			if err := o.ParseToolCallRange(tc.spec); err != nil {
				t.Fatal(err)
			}
		}
		seen := map[int]bool{}
		for seed := range uint64(200) {
			n := o.toolCallBudget(seed)
			if n < tc.lo || n > tc.hi {
				t.Fatalf("%q: budget %d outside %d-%d", tc.spec, n, tc.lo, tc.hi)
			}
			seen[n] = true
		}
		if len(seen) != tc.hi-tc.lo+1 {
			t.Errorf("%q: budgets %v do not cover %d-%d", tc.spec, seen, tc.lo, tc.hi)
		}
	}
	for _, bad := range []string{"x", "5-2", "-1", "3-", "1-x"} {
		var o AgentOptions
		if err := o.ParseToolCallRange(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

// FuzzReadConversation: messages from clients are outside input; reading
// them never panics, and what it gathers stays bounded and well formed.
func FuzzReadConversation(f *testing.F) {
	f.Add("system", "Working directory: /w", "user", "read /w/a.go and lib/b.py", "tool", "/w/c/d.go\n<cwd>/x</cwd>")
	f.Add("user", "<system-reminder>/x</system-reminder>", "tool", "", "user", "cwd=/tmp/p go.mod")
	claude := agentToolLists(f)["claude"]
	f.Fuzz(func(t *testing.T, r1, t1, r2, t2, r3, t3 string) {
		msgs := []agentMessage{{Role: r1, Text: t1}, {Role: "assistant", ToolCalls: []toolCall{{Name: "read", Arguments: "{}"}}},
			{Role: r2, Text: t2}, {Role: r3, Text: t3}}
		conv := readConversation(msgs)
		if len(conv.Files) > maxSeenPaths || len(conv.Dirs) > maxSeenPaths || conv.ToolTurns > 1 {
			t.Fatalf("conversation %+v", conv)
		}
		for _, p := range append(slices.Clone(conv.Files), conv.Dirs...) {
			if p == "" || strings.ContainsAny(p, " \t\n") {
				t.Fatalf("path %q", p)
			}
		}
		rng := rand.New(rand.NewPCG(1, 2))
		for _, tl := range claude {
			if args, ok := fillArguments(tl, &conv, rng); ok {
				if _, err := json.Marshal(args); err != nil {
					t.Fatal(err)
				}
			}
		}
	})
}
