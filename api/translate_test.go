package api

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestResponsesNamespaceToolsRoundTrip(t *testing.T) {
	h := startGateway(t, nil)
	h.engine.script = func(body map[string]json.RawMessage, msgs []chatMessage) engineReply {
		if msgs[len(msgs)-1].Role == "tool" {
			return engineReply{Text: "Started.", Finish: "stop"}
		}
		return engineReply{ToolCalls: []toolFunction{{Name: "helpers_v1__start_helper", Arguments: `{"task":"scan"}`}}, Finish: "tool_calls"}
	}
	f := loadFixture(t, "codex-turn1.json")
	resp, events := h.send(t, f)
	if got := resp.Header.Get("x-hearth-dropped-tools"); got != "web_search" {
		t.Errorf("x-hearth-dropped-tools %q, want web_search", got)
	}
	var call map[string]any
	for _, ev := range events {
		if ev.Name != "response.output_item.done" {
			continue
		}
		var v struct{ Item map[string]any }
		_ = json.Unmarshal([]byte(ev.Data), &v)
		if v.Item["type"] == "function_call" {
			call = v.Item
		}
	}
	if call == nil || call["name"] != "start_helper" || call["namespace"] != "helpers_v1" || call["arguments"] != `{"task":"scan"}` {
		t.Fatalf("function call item %v", call)
	}
	var tools []chatTool
	_ = json.Unmarshal(h.engine.requests()[0]["tools"], &tools)
	var names []string
	for _, tl := range tools {
		names = append(names, tl.Function.Name)
	}
	if strings.Join(names, ",") != "exec_command,helpers_v1__start_helper,helpers_v1__stop_helper" {
		t.Errorf("engine tools %v: flattened in the given order", names)
	}

	// Turn 2: Codex sends the call back with its namespace.
	var body map[string]any
	_ = json.Unmarshal(f.Body, &body)
	body["input"] = append(body["input"].([]any),
		map[string]any{"type": "function_call", "id": "fc_x", "name": "start_helper", "namespace": "helpers_v1", "arguments": `{"task":"scan"}`, "call_id": call["call_id"]},
		map[string]any{"type": "function_call_output", "id": "fco_x", "call_id": call["call_id"], "output": "helper 7 started"})
	f.Body, _ = json.Marshal(body)
	h.send(t, f)
	var msgs []chatMessage
	_ = json.Unmarshal(h.engine.lastChat(t)["messages"], &msgs)
	asst := msgs[len(msgs)-2]
	if len(asst.ToolCalls) != 1 || asst.ToolCalls[0].Function.Name != "helpers_v1__start_helper" {
		t.Fatalf("engine saw assistant %+v", asst)
	}
}

func TestAnthropicServerToolsAreDropped(t *testing.T) {
	h := startGateway(t, nil)
	resp, body := h.post(t, "/v1/messages", `{"model":"claude-x","max_tokens":5,"messages":[{"role":"user","content":"hi"}],
		"tools":[{"type":"web_search_20250305","name":"web_search","max_uses":3},{"name":"Shell","input_schema":{"type":"object","properties":{"command":{"type":"string"}}}}]}`)
	if resp.StatusCode != 200 || resp.Header.Get("x-hearth-dropped-tools") != "web_search_20250305" {
		t.Fatalf("%d dropped %q: %s", resp.StatusCode, resp.Header.Get("x-hearth-dropped-tools"), body)
	}
	if got := string(h.engine.requests()[0]["tools"]); got != `[{"type":"function","function":{"name":"Shell","parameters":{"type":"object","properties":{"command":{"type":"string"}}}}}]` {
		t.Errorf("engine tools %s", got)
	}
}

func TestAnthropicTranslation(t *testing.T) {
	models := newModelResolver(Config{Models: []string{servedModel}, Aliases: map[string]string{"*": servedModel}})
	for _, tc := range []struct {
		name string
		body string
		want string // the engine's messages
	}{
		{"system string and billing line",
			`{"model":"c","max_tokens":1,"system":"x-anthropic-billing-header: cc_version=1; cch=abc;\nBe brief.","messages":[{"role":"user","content":"hi"}]}`,
			`[{"role":"system","content":"Be brief."},{"role":"user","content":"hi"}]`},
		{"text blocks join, cache_control dropped",
			`{"model":"c","max_tokens":1,"messages":[{"role":"user","content":[{"type":"text","text":"a","cache_control":{"type":"ephemeral"}},{"type":"text","text":"b"}]}]}`,
			`[{"role":"user","content":"a\nb"}]`},
		{"tool results before text",
			`{"model":"c","max_tokens":1,"messages":[{"role":"user","content":"go"},{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"Shell","input":{ "command" : "ls" }}]},{"role":"user","content":[{"type":"text","text":"and?"},{"type":"tool_result","tool_use_id":"t1","content":[{"type":"text","text":"out"}]}]}]}`,
			`[{"role":"user","content":"go"},{"role":"assistant","content":"","tool_calls":[{"id":"t1","type":"function","function":{"name":"Shell","arguments":"{\"command\":\"ls\"}"}}]},{"role":"tool","content":"out","tool_call_id":"t1"},{"role":"user","content":"and?"}]`},
		{"system role inside messages",
			`{"model":"c","max_tokens":1,"messages":[{"role":"user","content":"hi"},{"role":"system","content":[{"type":"text","text":"note"}]}]}`,
			`[{"role":"user","content":"hi"},{"role":"system","content":"note"}]`},
		{"image block",
			`{"model":"c","max_tokens":1,"messages":[{"role":"user","content":[{"type":"text","text":"what?"},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"AAAA"}}]}]}`,
			`[{"role":"user","content":[{"text":"what?","type":"text"},{"image_url":{"url":"data:image/png;base64,AAAA"},"type":"image_url"}]}]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, _, err := decodeMessages([]byte(tc.body), models, true)
			if err != nil {
				t.Fatal(err)
			}
			got, _ := json.Marshal(req.Messages)
			if string(got) != tc.want {
				t.Errorf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
}

func TestResponsesTranslation(t *testing.T) {
	models := newModelResolver(Config{Models: []string{servedModel}, Aliases: map[string]string{"*": servedModel}})
	for _, tc := range []struct {
		name string
		body string
		want string
	}{
		{"string input with instructions", `{"model":"m","instructions":"Be brief.","input":"hi"}`,
			`[{"role":"system","content":"Be brief."},{"role":"user","content":"hi"}]`},
		{"assistant text, reasoning and parallel calls merge into one turn",
			`{"model":"m","input":[{"role":"user","content":"go"},{"type":"reasoning","id":"r","summary":[{"type":"summary_text","text":"think"}]},{"type":"message","role":"assistant","content":[{"type":"output_text","text":"ok"}]},{"type":"function_call","call_id":"c1","name":"a","arguments":"{}"},{"type":"function_call","call_id":"c2","name":"b","arguments":"{}"},{"type":"function_call_output","call_id":"c1","output":"A"},{"type":"function_call_output","call_id":"c2","output":[{"type":"input_text","text":"B"}]}]}`,
			`[{"role":"user","content":"go"},{"role":"assistant","content":"ok","reasoning_content":"think","tool_calls":[{"id":"c1","type":"function","function":{"name":"a","arguments":"{}"}},{"id":"c2","type":"function","function":{"name":"b","arguments":"{}"}}]},{"role":"tool","content":"A","tool_call_id":"c1"},{"role":"tool","content":"B","tool_call_id":"c2"}]`},
		{"built-in tool items are skipped", `{"model":"m","input":[{"role":"user","content":"q"},{"type":"web_search_call","id":"ws","status":"completed"}]}`,
			`[{"role":"user","content":"q"}]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr, err := decodeResponses([]byte(tc.body), models)
			if err != nil {
				t.Fatal(err)
			}
			if err := tr.appendInput(nil); err != nil {
				t.Fatal(err)
			}
			got, _ := json.Marshal(tr.req.Messages)
			if string(got) != tc.want {
				t.Errorf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
}
