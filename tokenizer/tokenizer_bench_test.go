package tokenizer

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// benchText joins the reference texts whose id starts with one of prefixes
// and returns them with their token count.
func benchText(b *testing.B, prefixes ...string) (string, int) {
	var sb strings.Builder
	tokens := 0
	for _, v := range readJSONLines[tokenizeVector](b, "tokenize.jsonl.gz") {
		for _, p := range prefixes {
			if strings.HasPrefix(v.ID, p) {
				sb.WriteString(v.Text)
				sb.WriteString("\n\n")
				tokens += len(v.IDs) + 1
			}
		}
	}
	return sb.String(), tokens
}

func benchmarkEncode(b *testing.B, text string) {
	m := qwen3Model(b)
	tokens := len(m.Encode(text)) // also warms the word cache, as a running server has it
	b.ReportAllocs()
	b.SetBytes(int64(len(text)))
	b.ResetTimer()
	defer reportCPUTokens(b, tokens)()
	for b.Loop() {
		m.Encode(text)
	}
	b.ReportMetric(float64(tokens)*float64(b.N)/b.Elapsed().Seconds()/1e6, "Mtok/s")
}

func BenchmarkEncodeEnglish(b *testing.B) {
	text, _ := benchText(b, "en/", "long/")
	benchmarkEncode(b, text)
}

func BenchmarkEncodeCode(b *testing.B) {
	text, _ := benchText(b, "code/")
	benchmarkEncode(b, strings.Repeat(text, 4))
}

// BenchmarkEncodeAgentPrompt encodes the longest rendered coding-agent
// prompt of the reference: system prompt, tool schemas, tool calls, results.
func BenchmarkEncodeAgentPrompt(b *testing.B) {
	var longest string
	for _, v := range readJSONLines[chatVector](b, "chat.jsonl.gz") {
		if len(v.Rendered) > len(longest) {
			longest = v.Rendered
		}
	}
	benchmarkEncode(b, longest)
}

// BenchmarkEncodeCold encodes with an empty word cache each time: the cost
// of text never seen before.
func BenchmarkEncodeCold(b *testing.B) {
	text, _ := benchText(b, "en/", "long/", "code/")
	m := qwen3Model(b)
	tokens := len(m.Encode(text))
	b.ReportAllocs()
	b.SetBytes(int64(len(text)))
	defer reportCPUTokens(b, tokens)()
	for b.Loop() {
		m.bpe.cache = wordCache{}
		m.Encode(text)
	}
	b.ReportMetric(float64(tokens)*float64(b.N)/b.Elapsed().Seconds()/1e6, "Mtok/s")
}

func BenchmarkLoadQwen3(b *testing.B) {
	tok, err := readGzip("models/qwen3/tokenizer.json.gz")
	if err != nil {
		b.Fatal(err)
	}
	cfg, err := readGzip("models/qwen3/tokenizer_config.json.gz")
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	defer reportCPU(b)()
	for b.Loop() {
		if _, err := LoadFiles(tok, cfg); err != nil {
			b.Fatal(err)
		}
	}
}

// agentConversation builds an agent session of a given size from the
// reference agent conversation: its system prompt and tools, then tool
// calls with results until the prompt holds about historyTokens tokens.
// It returns that history and two different next steps of about newTokens.
func agentConversation(b *testing.B, m *Model, historyTokens, newTokens int) (history ChatRequest, next [2]ChatRequest) {
	var base chatVector
	for _, v := range readJSONLines[chatVector](b, "chat.jsonl.gz") {
		if strings.HasPrefix(v.ID, "agent/") && len(v.Rendered) > len(base.Rendered) {
			base = v
		}
	}
	var msgs []json.RawMessage
	if err := json.Unmarshal(base.Messages, &msgs); err != nil {
		b.Fatal(err)
	}
	para := "The function walks the merge list once per word and keeps the lowest rank; callers cache words. "
	step := func(i, tokens int) []json.RawMessage {
		call := fmt.Sprintf(`{"role":"assistant","content":"","reasoning_content":"Look at file %d.","tool_calls":[{"type":"function","function":{"name":"read_file","arguments":{"path":"pkg/file%d.go"}}}]}`, i, i)
		body := strings.Repeat(para, max(1, tokens/20))
		result, _ := json.Marshal(map[string]string{"role": "tool", "content": fmt.Sprintf("// file %d\n%s", i, body)})
		return []json.RawMessage{json.RawMessage(call), result}
	}
	req := func(ms []json.RawMessage) ChatRequest {
		raw, _ := json.Marshal(ms)
		return ChatRequest{Messages: raw, Tools: base.Tools, AddGenerationPrompt: true}
	}
	for i := 0; ; i++ {
		_, ids, err := m.EncodeChat(req(msgs))
		if err != nil {
			b.Fatal(err)
		}
		if len(ids) >= historyTokens {
			break
		}
		msgs = append(msgs, step(i, 1000)...)
	}
	msgs = slices.Clip(msgs)
	return req(msgs), [2]ChatRequest{req(append(msgs, step(-1, newTokens)...)), req(append(msgs, step(-2, newTokens)...))}
}

// BenchmarkAgentTurn is one turn of a 30k-token agent session that appends
// about 1k tokens: render the template, tokenize and hash, with the session
// reusing the previous turn and without it. The session alternates between
// two different next steps of the same history, so each op re-tokenizes
// the appended step and reuses the history.
func BenchmarkAgentTurn(b *testing.B) {
	m := qwen3Model(b)
	history, next := agentConversation(b, m, 30000, 1000)
	b.Run("session", func(b *testing.B) {
		s := m.NewSession()
		if _, _, err := s.EncodeChat(history); err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		defer reportCPU(b)()
		for i := 0; i < b.N; i++ {
			if _, _, err := s.EncodeChat(next[i%2]); err != nil {
				b.Fatal(err)
			}
			_ = s.BlockHashes()
		}
		b.ReportMetric(float64(s.Reused()), "reused-tokens")
	})
	b.Run("session-tokenize-only", func(b *testing.B) {
		var texts [2]string
		for i := range next {
			texts[i], _ = m.ApplyChatTemplate(next[i])
		}
		s := m.NewSession()
		s.EncodeChat(history)
		b.ReportAllocs()
		defer reportCPU(b)()
		for i := 0; i < b.N; i++ {
			s.Encode(texts[i%2])
			_ = s.BlockHashes()
		}
	})
	b.Run("render-only", func(b *testing.B) {
		b.ReportAllocs()
		defer reportCPU(b)()
		for b.Loop() {
			if _, err := m.ApplyChatTemplate(next[0]); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("render-gonja", func(b *testing.B) {
		messages, _ := parseOrderedJSON(next[0].Messages)
		tools, _ := parseOrderedJSON(next[0].Tools)
		b.ReportAllocs()
		defer reportCPU(b)()
		for b.Loop() {
			if _, err := m.template.renderJinja(messages, tools, next[0]); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("full", func(b *testing.B) {
		b.ReportAllocs()
		defer reportCPU(b)()
		for b.Loop() {
			_, ids, err := m.EncodeChat(next[0])
			if err != nil {
				b.Fatal(err)
			}
			BlockHashes(ids, DefaultBlockSize)
		}
	})
}
