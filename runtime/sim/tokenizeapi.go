package sim

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"

	hruntime "github.com/hearth-llm/hearth/runtime"
	"github.com/hearth-llm/hearth/tokenizer"
)

// The engines' /tokenize, as each flavour serves it (docs/engine-conformance.md,
// "Running the conformance suite against a real engine", has the files and
// commits).
//
// vLLM (vllm/entrypoints/serve/tokenize/protocol.py and api_router.py) takes
// one of two bodies at /tokenize: TokenizeCompletionRequest {model, prompt,
// add_special_tokens (default true), return_token_strs} or
// TokenizeChatRequest {model, messages, tools, add_generation_prompt
// (default true), continue_final_message, add_special_tokens (default
// false), chat_template_kwargs, return_token_strs}, and answers {count,
// max_model_len, tokens, token_strs} with the engine's --max-model-len and
// token_strs null unless asked for.
//
// SGLang (python/sglang/srt/entrypoints/http_server.py, serving_tokenize.py,
// openai/protocol.py) serves the same handler at /v1/tokenize and /tokenize:
// {model, prompt (a string or a list of them), add_special_tokens (default
// true)}, or, in its newer protocol, messages instead of prompt (exactly one
// of the two); it answers {tokens, count, max_model_len} with the
// tokenizer's model_max_length, a list of lists for a list of prompts.

// tokenizeRequest is the union of both flavours' /tokenize bodies.
type tokenizeRequest struct {
	Model                string          `json:"model"`
	Prompt               json.RawMessage `json:"prompt"`
	Messages             json.RawMessage `json:"messages"`
	Tools                json.RawMessage `json:"tools"`
	AddGenerationPrompt  *bool           `json:"add_generation_prompt"`
	ContinueFinalMessage bool            `json:"continue_final_message"`
	ReturnTokenStrs      *bool           `json:"return_token_strs"`
	ChatTemplateKwargs   map[string]any  `json:"chat_template_kwargs"`
}

// tokenStringer is a tokenizer that can name its tokens as the vocabulary
// writes them (transformers' convert_ids_to_tokens); *tokenizer.Model is
// one.
type tokenStringer interface {
	TokenStrings(ids []uint32) []string
}

// maxLengther tells the tokenizer's model_max_length (0: the config does
// not say); *tokenizer.Model is one.
type maxLengther interface {
	MaxModelLen() int
}

var (
	_ tokenStringer = (*tokenizer.Model)(nil)
	_ maxLengther   = (*tokenizer.Model)(nil)
)

// hfVeryLargeInteger is transformers' model_max_length of a tokenizer whose
// config names none (VERY_LARGE_INTEGER, int(1e30)), as JSON writes it.
const hfVeryLargeInteger = json.Number("1000000000000000019884624838656")

func present(raw json.RawMessage) bool {
	t := bytes.TrimSpace(raw)
	return len(t) > 0 && !bytes.Equal(t, []byte("null"))
}

func (s *Server) handleTokenize(w http.ResponseWriter, r *http.Request) {
	var req tokenizeRequest
	if err := decodeBody(w, r, &req); err != nil {
		s.writeError(w, err)
		return
	}
	if err := s.checkModel(req.Model); err != nil {
		s.writeError(w, err)
		return
	}
	if s.opts.Kind == hruntime.KindSGLang {
		s.sglangTokenize(w, &req)
		return
	}
	var ids []uint32
	switch {
	case present(req.Messages):
		if req.ContinueFinalMessage && req.AddGenerationPrompt != nil && *req.AddGenerationPrompt {
			s.writeError(w, badRequest("Cannot set both `continue_final_message` and `add_generation_prompt` to True."))
			return
		}
		var err error
		if ids, err = s.tokenizeChat(&req); err != nil {
			s.writeError(w, err)
			return
		}
	case present(req.Prompt):
		var prompt string
		if err := json.Unmarshal(req.Prompt, &prompt); err != nil {
			s.writeError(w, &apiError{status: http.StatusBadRequest, param: "prompt", message: "prompt must be a string"})
			return
		}
		ids = s.opts.Tokenizer.Encode(prompt)
	default:
		s.writeError(w, badRequest("either prompt or messages is required"))
		return
	}
	if ids == nil {
		ids = []uint32{}
	}
	var strs []string
	if req.ReturnTokenStrs != nil && *req.ReturnTokenStrs {
		ts, ok := s.opts.Tokenizer.(tokenStringer)
		if !ok {
			s.writeError(w, &apiError{status: http.StatusNotImplemented, message: "this tokenizer cannot name its tokens"})
			return
		}
		strs = ts.TokenStrings(ids)
	}
	writeJSON(w, http.StatusOK, struct {
		Count       int      `json:"count"`
		MaxModelLen int      `json:"max_model_len"`
		Tokens      []uint32 `json:"tokens"`
		TokenStrs   []string `json:"token_strs"`
	}{len(ids), s.opts.MaxModelLen, ids, strs})
}

// tokenizeChat renders a chat body as the engine's chat path does and
// tokenizes it. continue_final_message renders without the generation
// prompt and cuts the text after the last message's content, as
// transformers' apply_chat_template does.
func (s *Server) tokenizeChat(req *tokenizeRequest) ([]uint32, error) {
	var msgs []json.RawMessage
	if err := json.Unmarshal(req.Messages, &msgs); err != nil {
		return nil, &apiError{status: http.StatusBadRequest, param: "messages", message: "messages must be an array"}
	}
	if !req.ContinueFinalMessage {
		return s.renderChat(req.Messages, req.Tools, req.AddGenerationPrompt, req.ChatTemplateKwargs)
	}
	if len(msgs) == 0 {
		return nil, &apiError{status: http.StatusBadRequest, param: "messages", message: "continue_final_message needs a final message"}
	}
	var last struct {
		Content string `json:"content"`
	}
	if err := json.Unmarshal(msgs[len(msgs)-1], &last); err != nil {
		return nil, &apiError{status: http.StatusBadRequest, param: "messages", message: "continue_final_message needs a final message with text content"}
	}
	cr := tokenizer.ChatRequest{Messages: req.Messages, Kwargs: req.ChatTemplateKwargs}
	if present(req.Tools) {
		cr.Tools = req.Tools
	}
	text, err := s.opts.Tokenizer.ApplyChatTemplate(cr)
	if err != nil {
		return nil, badRequest("chat template: %v", err)
	}
	final := strings.TrimSpace(last.Content)
	at := strings.LastIndex(text, final)
	if at < 0 {
		return nil, badRequest("substring not found")
	}
	return s.opts.Tokenizer.Encode(strings.TrimRightFunc(text[:at+len(final)], isPySpace)), nil
}

// isPySpace is what Python's str.rstrip() strips.
func isPySpace(r rune) bool {
	switch r {
	case ' ', '\t', '\n', '\r', '\v', '\f', 0x1c, 0x1d, 0x1e, 0x1f, 0x85:
		return true
	}
	return r > 0x7f && strings.TrimSpace(string(r)) == ""
}

// sglangTokenize answers SGLang's /tokenize: a prompt, a list of prompts, or
// chat messages (exactly one of prompt and messages).
func (s *Server) sglangTokenize(w http.ResponseWriter, req *tokenizeRequest) {
	var maxLen any = hfVeryLargeInteger
	if ml, ok := s.opts.Tokenizer.(maxLengther); ok && ml.MaxModelLen() > 0 {
		maxLen = ml.MaxModelLen()
	}
	answer := func(tokens, count any) {
		writeJSON(w, http.StatusOK, struct {
			Tokens      any `json:"tokens"`
			Count       any `json:"count"`
			MaxModelLen any `json:"max_model_len"`
		}{tokens, count, maxLen})
	}
	if present(req.Prompt) == present(req.Messages) {
		s.writeError(w, badRequest("Exactly one of 'prompt' or 'messages' must be provided."))
		return
	}
	if present(req.Messages) {
		ids, err := s.tokenizeChat(req)
		if err != nil {
			s.writeError(w, err)
			return
		}
		answer(nonNil(ids), len(ids))
		return
	}
	var one string
	if err := json.Unmarshal(req.Prompt, &one); err == nil {
		ids := s.opts.Tokenizer.Encode(one)
		answer(nonNil(ids), len(ids))
		return
	}
	var many []string
	if err := json.Unmarshal(req.Prompt, &many); err != nil {
		s.writeError(w, &apiError{status: http.StatusBadRequest, param: "prompt", message: "prompt must be a string or a list of strings"})
		return
	}
	lists, counts := make([][]uint32, len(many)), make([]int, len(many))
	for i, p := range many {
		lists[i] = nonNil(s.opts.Tokenizer.Encode(p))
		counts[i] = len(lists[i])
	}
	answer(lists, counts)
}

func nonNil(ids []uint32) []uint32 {
	if ids == nil {
		return []uint32{}
	}
	return ids
}
