package runtime

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/hearth-llm/hearth/tokenizer"
)

// The start-up self-check: once an engine serves, Hearth tokenizes a few
// sample conversations itself and through the engine's own /tokenize, and
// compares the ids. The router indexes an engine's cache by re-hashing the
// token ids of its KV events, and looks requests up by hashing Hearth's
// own tokenization of them; where the two tokenizations differ, every
// prediction misses without a word. The check makes that loud, and the
// fleet then routes the engine on predicted caches instead (hashes of
// Hearth's own ids on both sides).

// ChatTokenizer is Hearth's tokenizer of an engine's model, as the check
// uses it; *tokenizer.Model is one.
type ChatTokenizer interface {
	ApplyChatTemplate(req tokenizer.ChatRequest) (string, error)
	Encode(text string) []uint32
	Decode(ids []uint32) string
}

var _ ChatTokenizer = (*tokenizer.Model)(nil)

// TokenizerState is the outcome of the self-check.
type TokenizerState string

const (
	// TokenizerNotChecked: no check ran (no tokenizer for the model, or
	// the engine is not ready yet).
	TokenizerNotChecked TokenizerState = ""
	// TokenizerAgrees: every sample tokenized to the same ids.
	TokenizerAgrees TokenizerState = "agrees"
	// TokenizerDiffers: a sample tokenized to other ids; TokenizerCheck
	// says where.
	TokenizerDiffers TokenizerState = "differs"
	// TokenizerUnchecked: the engine's /tokenize could not be asked or
	// answered something Hearth cannot read; Detail says what.
	TokenizerUnchecked TokenizerState = "unchecked"
)

// TokenizerCheck is what the self-check found.
type TokenizerCheck struct {
	State TokenizerState
	// Sample names the first sample that differed, Position the first
	// token index where the ids differ, HearthID and EngineID the ids
	// there (-1 where that side had already ended), Near Hearth's text of
	// the tokens around Position.
	Sample             string
	Position           int
	HearthID, EngineID int64
	Near               string
	// Tokens is how many tokens the samples came to in Hearth's
	// tokenization.
	Tokens int
	// Detail is why the check could not run (TokenizerUnchecked).
	Detail string
}

// String is the check in one sentence.
func (c TokenizerCheck) String() string {
	switch c.State {
	case TokenizerAgrees:
		return fmt.Sprintf("the engine's tokenizer agrees with Hearth's (%d tokens of sample conversations)", c.Tokens)
	case TokenizerDiffers:
		return fmt.Sprintf("the engine tokenizes differently from Hearth: sample %q differs at token %d (Hearth %s, engine %s, near %q); "+
			"the model is routed on predicted caches, not on the engine's KV events",
			c.Sample, c.Position, idString(c.HearthID), idString(c.EngineID), c.Near)
	case TokenizerUnchecked:
		return "the engine's tokenization could not be checked: " + c.Detail
	}
	return "not checked"
}

func idString(id int64) string {
	if id < 0 {
		return "ended"
	}
	return fmt.Sprint(id)
}

// TokenizerSample is one conversation the self-check tokenizes.
type TokenizerSample struct {
	Name     string
	Messages json.RawMessage
	Tools    json.RawMessage // nil: none
}

// TokenizerSamples are the conversations the self-check compares: a plain
// chat, a round of a tool call answered by its result, and a long system
// prompt (code, non-ASCII text, runs of spaces and blank lines), the
// shapes a coding agent's prompts take.
func TokenizerSamples() []TokenizerSample {
	var long strings.Builder
	long.WriteString("You are a coding agent working in a Go repository. Follow these rules.\n\n")
	for i := range 24 {
		fmt.Fprintf(&long, "## Rule %d\n\nKeep functions short;  name things by what they mean — «ясно», 明確, claro.\n"+
			"```go\nfunc rule%d(ctx context.Context) error {\n\treturn fmt.Errorf(\"rule %d: %%w\", ctx.Err())\n}\n```\n\n", i+1, i+1, i+1)
	}
	longJSON, _ := json.Marshal([]map[string]string{
		{"role": "system", "content": long.String()},
		{"role": "user", "content": "Begin with the failing test."},
	})
	return []TokenizerSample{
		{
			Name: "plain chat",
			Messages: json.RawMessage(`[{"role":"system","content":"You are a helpful assistant."},` +
				`{"role":"user","content":"What does git rebase -i HEAD~3 do?"},` +
				`{"role":"assistant","content":"It opens the last three commits in an editor, so that you can reorder, squash or edit them."},` +
				`{"role":"user","content":"And how do I undo it?"}]`),
		},
		{
			Name: "tool round",
			Messages: json.RawMessage(`[{"role":"user","content":"Open main.go and tell me what it does."},` +
				`{"role":"assistant","content":"","tool_calls":[{"id":"call_1","type":"function","function":{"name":"read_file","arguments":"{\"path\": \"main.go\"}"}}]},` +
				`{"role":"tool","tool_call_id":"call_1","content":"package main\n\nimport \"fmt\"\n\nfunc main() {\n\tfmt.Println(\"hello\")\n}\n"}]`),
			Tools: json.RawMessage(`[{"type":"function","function":{"name":"read_file","description":"Read a file of the repository.",` +
				`"parameters":{"type":"object","properties":{"path":{"type":"string","description":"The file's path."}},"required":["path"]}}}]`),
		},
		{Name: "long system prompt", Messages: longJSON},
	}
}

// tokenizerCheckTimeout bounds each /tokenize call of the check.
const tokenizerCheckTimeout = 10 * time.Second

// CheckTokenizer compares Hearth's tokenization of the samples with the
// engine's at baseURL, serving model. An engine whose /tokenize renders
// chats itself (EngineKind.TokenizeChat) is given the messages, so its
// chat template is checked too; another is given the prompt Hearth
// rendered.
func CheckTokenizer(ctx context.Context, client *http.Client, baseURL, model string, kind *EngineKind, tok ChatTokenizer, samples []TokenizerSample) TokenizerCheck {
	total := 0
	for _, s := range samples {
		text, err := tok.ApplyChatTemplate(tokenizer.ChatRequest{Messages: s.Messages, Tools: s.Tools, AddGenerationPrompt: true})
		if err != nil {
			return TokenizerCheck{State: TokenizerUnchecked, Detail: fmt.Sprintf("sample %q: Hearth's chat template: %v", s.Name, err)}
		}
		ours := tok.Encode(text)
		total += len(ours)
		body := map[string]any{"model": model, "prompt": text, "add_special_tokens": false}
		if kind.TokenizeChat {
			body = map[string]any{"model": model, "messages": s.Messages, "add_generation_prompt": true}
			if s.Tools != nil {
				body["tools"] = s.Tools
			}
		}
		theirs, err := engineTokenize(ctx, client, baseURL, body)
		if err != nil {
			return TokenizerCheck{State: TokenizerUnchecked, Detail: fmt.Sprintf("sample %q: %v", s.Name, err)}
		}
		if at, ok := FirstDifference(ours, theirs); ok {
			c := TokenizerCheck{State: TokenizerDiffers, Sample: s.Name, Position: at, HearthID: -1, EngineID: -1, Tokens: total}
			if at < len(ours) {
				c.HearthID = int64(ours[at])
			}
			if at < len(theirs) {
				c.EngineID = theirs[at]
			}
			c.Near = tok.Decode(ours[max(0, at-3):min(len(ours), at+3)])
			return c
		}
	}
	return TokenizerCheck{State: TokenizerAgrees, Tokens: total}
}

// FirstDifference returns the first index at which ours and theirs differ,
// the shorter one's length when one is a prefix of the other; ok is false
// when they are equal.
func FirstDifference(ours []uint32, theirs []int64) (at int, ok bool) {
	n := min(len(ours), len(theirs))
	for i := range n {
		if int64(ours[i]) != theirs[i] {
			return i, true
		}
	}
	if len(ours) != len(theirs) {
		return n, true
	}
	return 0, false
}

// engineTokenize posts body to the engine's /tokenize and returns its
// tokens: the answer's "tokens", a list of integers in vLLM's and SGLang's
// answers alike.
func engineTokenize(ctx context.Context, client *http.Client, baseURL string, body map[string]any) ([]int64, error) {
	ctx, cancel := context.WithTimeout(ctx, tokenizerCheckTimeout)
	defer cancel()
	data, err := json.Marshal(body)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimSuffix(baseURL, "/")+"/tokenize", bytes.NewReader(data))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("POST /tokenize: %w", err)
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return nil, fmt.Errorf("POST /tokenize: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("POST /tokenize: %s: %s", resp.Status, bytes.TrimSpace(answer[:min(len(answer), 300)]))
	}
	return ParseTokenizeAnswer(answer)
}

// ParseTokenizeAnswer reads the token ids of an engine's /tokenize answer
// for one prompt.
func ParseTokenizeAnswer(answer []byte) ([]int64, error) {
	var parsed struct {
		Tokens *[]int64 `json:"tokens"`
	}
	if err := json.Unmarshal(answer, &parsed); err != nil {
		return nil, fmt.Errorf("/tokenize answer: %w", err)
	}
	if parsed.Tokens == nil {
		return nil, fmt.Errorf("/tokenize answer has no tokens: %.200s", answer)
	}
	for _, id := range *parsed.Tokens {
		if id < 0 || id > 1<<32-1 {
			return nil, fmt.Errorf("/tokenize answer: token id %d out of range", id)
		}
	}
	return *parsed.Tokens, nil
}

// checkTokenizer runs the self-check of a ready engine, when the daemon
// gave a tokenizer for its model, and says what it found in the log.
func (s *Supervisor) checkTokenizer(ctx context.Context, spec Spec, baseURL string, log *slog.Logger) TokenizerCheck {
	if s.cfg.Tokenizer == nil {
		return TokenizerCheck{}
	}
	tok := s.cfg.Tokenizer(spec)
	if tok == nil {
		return TokenizerCheck{}
	}
	c := CheckTokenizer(ctx, s.cfg.HTTPClient, baseURL, spec.Model, spec.Engine.Descriptor(), tok, TokenizerSamples())
	switch c.State {
	case TokenizerDiffers:
		log.Warn("engine tokenizes differently from Hearth; routing it on predicted caches",
			"sample", c.Sample, "position", c.Position, "hearth_id", c.HearthID, "engine_id", c.EngineID, "near", c.Near)
	case TokenizerUnchecked:
		log.Warn("engine tokenization not checked", "reason", c.Detail)
	default:
		log.Info("engine tokenizer agrees with Hearth's", "tokens", c.Tokens)
	}
	return c
}
