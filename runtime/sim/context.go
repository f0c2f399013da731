package sim

import "fmt"

// ContextLengthError is vLLM's refusal of a request that does not fit
// max_model_len, with vLLM 0.11's wording (serving_engine's input length
// check): a prompt of max_model_len tokens or more, or a prompt plus
// max_tokens beyond it. The HTTP API answers it with a 400; Core.Add
// returns it. It wraps ErrPromptTooLong.
type ContextLengthError struct {
	MaxModelLen  int
	PromptTokens int
	// MaxTokens is the request's max_tokens; 0 when the prompt alone is
	// too long (or max_tokens was not given).
	MaxTokens int64
}

func (e *ContextLengthError) Error() string {
	if e.MaxTokens == 0 {
		return fmt.Sprintf("This model's maximum context length is %d tokens. However, your request has %d input tokens. "+
			"Please reduce the length of the input messages.", e.MaxModelLen, e.PromptTokens)
	}
	return fmt.Sprintf("'max_tokens' or 'max_completion_tokens' is too large: %d. This model's maximum "+
		"context length is %d tokens and your request has %d input tokens (%d > %d - %d).",
		e.MaxTokens, e.MaxModelLen, e.PromptTokens, e.MaxTokens, e.MaxModelLen, e.PromptTokens)
}

// Unwrap makes the error an ErrPromptTooLong.
func (e *ContextLengthError) Unwrap() error { return ErrPromptTooLong }

// CheckContextLength is the one copy of vLLM's context rule, used by the
// HTTP API and by Core (and so by the benchmark's simulation): a prompt
// must leave room for at least one output token, and a prompt plus
// maxTokens (0: not given) must not exceed maxModelLen. It returns a
// *ContextLengthError or nil.
func CheckContextLength(maxModelLen, promptTokens int, maxTokens int64) error {
	if promptTokens >= maxModelLen {
		return &ContextLengthError{MaxModelLen: maxModelLen, PromptTokens: promptTokens}
	}
	if maxTokens > 0 && maxTokens > int64(maxModelLen-promptTokens) {
		return &ContextLengthError{MaxModelLen: maxModelLen, PromptTokens: promptTokens, MaxTokens: maxTokens}
	}
	return nil
}
