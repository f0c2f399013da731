package api

import (
	"encoding/json" // not goccy's, which reads past a short string's end to unescape it (checkptr stops it under -race)
	"fmt"
)

// A chat's parts are bounded before its template is rendered: rendering
// copies the messages and tools several times over (a million one-letter
// messages, 240k tools or a 30 MB image each cost gigabytes there), and
// the body limit alone does not stop that. The bounds sit well above what
// agents send (a long Claude Code session has a few thousand messages and
// under a hundred tools of about 100 KB in all).
const (
	// maxChatMessages is the most messages one request may hold.
	maxChatMessages = 50_000
	// maxContentParts is the most list-form content parts (text, images)
	// across a request's messages.
	maxContentParts = 100_000
	// maxTools and maxToolsBytes bound a request's tool definitions: their
	// number and the size of their JSON.
	maxTools      = 4096
	maxToolsBytes = 4 << 20
	// maxImageBytes bounds one image part's URL, base64 data included:
	// 8 MiB of base64 is 6 MiB of image, above Anthropic's 5 MB per image.
	maxImageBytes = 8 << 20
)

// contentPart is one element of a list-form message content, as the
// dialects' translations write it (OpenAI chat parts).
type contentPart struct {
	Type     string          `json:"type"`
	Text     string          `json:"text"`
	ImageURL json.RawMessage `json:"image_url"`
}

// toolDefinition is what of an OpenAI tool is counted against the context:
// its name and description, which every chat template renders.
type toolDefinition struct {
	Function struct {
		Name        string `json:"name"`
		Description string `json:"description"`
	} `json:"function"`
}

// chatShape is what a chat's bounds and its fits-the-context check read of
// it: found once, before rendering.
type chatShape struct {
	texts []string // texts that appear whole in the rendered prompt
	// rendered counts the messages each template renders with at least one
	// token of their own (a role marker or a wrapper), whatever their text.
	rendered int
}

// boundChat refuses a chat whose parts exceed the bounds above, naming the
// part and its limit, and returns what the context check counts. Parts'
// text is read only from messages that are not the assistant's: a template
// may drop parts of those (earlier turns' reasoning). Without counting,
// the shape stays empty.
func boundChat(msgs []chatMessage, tools json.RawMessage, counting bool) (chatShape, error) {
	var shape chatShape
	if err := boundMessages(len(msgs), "messages"); err != nil {
		return shape, err
	}
	if !isNullJSON(tools) {
		if err := boundToolsBytes(len(tools)); err != nil {
			return shape, err
		}
		var defs []toolDefinition
		if err := json.Unmarshal(tools, &defs); err != nil {
			return shape, badRequestf("tools", "tools must be a list of tool definitions: %v", err)
		}
		if len(defs) > maxTools {
			return shape, badRequestf("tools", "%d tools; a request may define at most %d", len(defs), maxTools)
		}
		for _, d := range defs {
			if !counting {
				break
			}
			shape.texts = append(shape.texts, d.Function.Name, d.Function.Description)
		}
	}
	parts := 0
	for i, m := range msgs {
		counted := counting && m.Role != "assistant"
		if counted {
			shape.rendered++
		}
		c := m.Content
		if len(c) == 0 {
			continue
		}
		switch c[0] {
		case '"':
			var text string
			if counted && json.Unmarshal(c, &text) == nil {
				shape.texts = append(shape.texts, text)
			}
		case '[':
			var list []contentPart
			if err := json.Unmarshal(c, &list); err != nil {
				return shape, badRequestf("messages", "message %d: content must be a string or a list of parts: %v", i, err)
			}
			if parts += len(list); parts > maxContentParts {
				return shape, badRequestf("messages", "more than %d content parts; a request may hold at most %d", maxContentParts, maxContentParts)
			}
			for _, p := range list {
				if len(p.ImageURL) > maxImageBytes {
					return shape, imageTooLarge(fmt.Sprintf("messages[%d]", i), len(p.ImageURL))
				}
				if counted && p.Type == "text" {
					shape.texts = append(shape.texts, p.Text)
				}
			}
		}
	}
	return shape, nil
}

// boundMessages refuses n messages (or Responses input items) past
// maxChatMessages. The dialects' decoders call it before they translate
// each message, which costs more than the bound saves when n is a million.
func boundMessages(n int, field string) error {
	if n > maxChatMessages {
		return badRequestf(field, "%d messages; a request may hold at most %d", n, maxChatMessages)
	}
	return nil
}

// boundToolsBytes refuses tools whose JSON takes more than maxToolsBytes;
// the decoders call it before they convert the tools.
func boundToolsBytes(n int) error {
	if n > maxToolsBytes {
		return badRequestf("tools", "the tools take %d bytes; at most %d are accepted", n, maxToolsBytes)
	}
	return nil
}

// imageTooLarge refuses an image of n bytes (its URL or base64 data) in field.
func imageTooLarge(field string, n int) error {
	return badRequestf(field, "an image of %d bytes; at most %d bytes (base64 included) are accepted per image", n, maxImageBytes)
}
