package tokenizer

import "encoding/json"

// ChatRequest is what a chat template is rendered from. Messages and tools
// stay raw JSON as the client sent them: templates serialise them again with
// tojson, and the order of their keys must survive that.
type ChatRequest struct {
	Messages            json.RawMessage // JSON array of message objects
	Tools               json.RawMessage // JSON array of tool objects, or empty / null
	AddGenerationPrompt bool
	Kwargs              map[string]any // chat_template_kwargs, e.g. enable_thinking
}
