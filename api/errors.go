package api

import (
	stdjson "encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strconv"

	json "github.com/goccy/go-json"
	"github.com/gofiber/fiber/v2"
)

// dialect is the protocol a client speaks; errors and streams are written in it.
type dialect int

const (
	dialectOpenAI dialect = iota // chat completions, completions, models
	dialectResponses
	dialectAnthropic
)

func (d dialect) String() string {
	switch d {
	case dialectResponses:
		return "responses"
	case dialectAnthropic:
		return "anthropic"
	default:
		return "openai"
	}
}

// apiError is an error with the HTTP status it maps to. Every error a handler
// returns ends up as one, written in the client's dialect by writeError: the
// mapping from failures to statuses lives here and nowhere else.
type apiError struct {
	Status     int
	Param      string // the offending request field, if any
	Message    string
	RetryAfter int // seconds, for 429

	// Overflow is set when the prompt does not fit the model's context: each
	// dialect words this error the way its clients recognise, so that they
	// compact the conversation instead of failing the turn.
	Overflow *contextOverflow
}

// contextOverflow is a prompt longer than the context window.
type contextOverflow struct {
	PromptTokens, ContextTokens int
}

func errContextOverflow(prompt, limit int) *apiError {
	return &apiError{
		Status: http.StatusBadRequest, Param: "messages",
		Message:  fmt.Sprintf("the prompt has %d tokens; the model's context holds %d", prompt, limit),
		Overflow: &contextOverflow{PromptTokens: prompt, ContextTokens: limit},
	}
}

// vllmOverflow matches vLLM's (and the simulated engine's) context error:
// "This model's maximum context length is 29856 tokens. However, your
// request has 40009 input tokens." or "... However, you requested 40009
// tokens ...".
var vllmOverflow = regexp.MustCompile(`maximum context length is (\d+) tokens\. However, (?:your request has|you requested) (\d+)`)

// engineOverflow recognises an engine's context-length error message.
func engineOverflow(msg string) *apiError {
	m := vllmOverflow.FindStringSubmatch(msg)
	if m == nil {
		return nil
	}
	limit, err1 := strconv.Atoi(m[1])
	prompt, err2 := strconv.Atoi(m[2])
	if err1 != nil || err2 != nil {
		return nil
	}
	return errContextOverflow(prompt, limit)
}

func (e *apiError) Error() string {
	if e.Param != "" {
		return e.Param + ": " + e.Message
	}
	return e.Message
}

func badRequest(param, msg string) *apiError {
	return &apiError{Status: http.StatusBadRequest, Param: param, Message: msg}
}

func badRequestf(param, format string, args ...any) *apiError {
	return badRequest(param, fmt.Sprintf(format, args...))
}

// decodeStrict unmarshals JSON and turns type errors into 400s naming the
// field, prefixed with prefix ("" for the request body itself).
//
// Requests are decoded with goccy/go-json, which takes a third less time
// than encoding/json on an agent's request; a request it refuses is
// decoded again with encoding/json, whose errors name the field and the
// offset, and which has the last word.
func decodeStrict(data []byte, v any, prefix string) error {
	if json.Unmarshal(data, v) == nil {
		return nil
	}
	err := stdjson.Unmarshal(data, v)
	if err == nil {
		return nil
	}
	var te *stdjson.UnmarshalTypeError
	if errors.As(err, &te) {
		field := te.Field
		if prefix != "" {
			if field == "" {
				field = prefix
			} else {
				field = prefix + "." + field
			}
		}
		if field == "" {
			field = "body"
		}
		return badRequestf(field, "expected %s, got JSON %s", jsonKind(te.Type.Kind().String()), te.Value)
	}
	var se *stdjson.SyntaxError
	if errors.As(err, &se) {
		where := prefix
		if where == "" {
			where = "body"
		}
		return badRequestf(where, "invalid JSON at byte %d: %v", se.Offset, se)
	}
	where := prefix
	if where == "" {
		where = "body"
	}
	return badRequest(where, err.Error())
}

func jsonKind(goKind string) string {
	switch goKind {
	case "string":
		return "a string"
	case "int", "int64", "int32", "uint32", "uint64", "float64", "float32":
		return "a number"
	case "bool":
		return "a boolean"
	case "slice", "array":
		return "an array"
	case "map", "struct", "ptr":
		return "an object"
	default:
		return "another type"
	}
}

// toAPIError maps any error to the status the client sees.
func toAPIError(err error) *apiError {
	var ae *apiError
	if errors.As(err, &ae) {
		return ae
	}
	var fe *fiber.Error
	if errors.As(err, &fe) {
		if fe.Code == http.StatusBadRequest {
			// fiber's 400s come from the HTTP parser, whose message quotes
			// the raw request, credentials included: never echo it.
			return &apiError{Status: fe.Code, Message: "malformed HTTP request"}
		}
		return &apiError{Status: fe.Code, Message: fe.Message}
	}
	switch {
	case errors.Is(err, ErrQueueFull):
		return &apiError{Status: http.StatusTooManyRequests, Message: "all workers are busy; retry later", RetryAfter: 1}
	case errors.Is(err, ErrNoWorker):
		// The error says why (engines loading, restarting or failed); an
		// engine that comes back takes seconds to minutes, so clients are
		// told to come back rather than left waiting.
		return &apiError{Status: http.StatusServiceUnavailable, Message: "no engine can serve this model right now: " + err.Error(), RetryAfter: 5}
	}
	return &apiError{Status: http.StatusInternalServerError, Message: err.Error()}
}

// writeError writes err in the dialect's error shape.
func writeError(c *fiber.Ctx, d dialect, err error) error {
	ae := toAPIError(err)
	if l := lineOf(c); l.reason == "" {
		l.reason = ae.Message
	}
	if ae.RetryAfter > 0 {
		c.Set("Retry-After", strconv.Itoa(ae.RetryAfter))
	}
	if !retryable(ae.Status) {
		// Clients built on Anthropic's and OpenAI's SDKs honour this header;
		// without it Claude Code retries a 401 ten times with backoff,
		// minutes of silence before it says that the key is wrong.
		c.Set("x-should-retry", "false")
	}
	c.Status(ae.Status)
	c.Set(fiber.HeaderContentType, fiber.MIMEApplicationJSONCharsetUTF8)
	return c.Send(errorBody(d, ae))
}

// retryable reports whether a client may usefully send the same request
// again: timeouts, conflicts, rate limits and server errors.
func retryable(status int) bool {
	switch status {
	case http.StatusRequestTimeout, http.StatusConflict, http.StatusTooManyRequests:
		return true
	}
	return status >= 500
}

// errorBody is the JSON error object of the dialect.
func errorBody(d dialect, ae *apiError) []byte {
	var v any
	if d == dialectAnthropic {
		v = anthropicError{Type: "error", Error: anthropicErrorDetail{Type: anthropicErrorType(ae.Status), Message: anthropicErrorMessage(ae)}}
	} else {
		detail := openAIErrorDetail{Message: openAIErrorMessage(ae), Type: openAIErrorType(ae.Status), Code: openAIErrorCode(ae)}
		if ae.Param != "" {
			detail.Param = &ae.Param
		}
		if ae.Overflow != nil && d == dialectResponses {
			input := "input"
			detail.Param = &input
		}
		v = openAIError{Error: detail}
	}
	b, _ := json.Marshal(v)
	return b
}

// anthropicErrorMessage words ae as Anthropic does. Claude Code compacts the
// conversation when a 400 says "prompt is too long: N tokens > M maximum".
func anthropicErrorMessage(ae *apiError) string {
	if o := ae.Overflow; o != nil {
		return fmt.Sprintf("prompt is too long: %d tokens > %d maximum", o.PromptTokens, o.ContextTokens)
	}
	return ae.Error()
}

// openAIErrorMessage words ae as OpenAI does; OpenCode recognises "maximum context
// length is N tokens" and Codex the context_length_exceeded code.
func openAIErrorMessage(ae *apiError) string {
	if o := ae.Overflow; o != nil {
		return fmt.Sprintf("This model's maximum context length is %d tokens. However, your messages resulted in %d tokens. "+
			"Please reduce the length of the messages.", o.ContextTokens, o.PromptTokens)
	}
	return ae.Error()
}

type openAIError struct {
	Error openAIErrorDetail `json:"error"`
}

type openAIErrorDetail struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
}

type anthropicError struct {
	Type  string               `json:"type"`
	Error anthropicErrorDetail `json:"error"`
}

type anthropicErrorDetail struct {
	Type    string `json:"type"`
	Message string `json:"message"`
}

func anthropicErrorType(status int) string {
	switch status {
	case http.StatusBadRequest, http.StatusUnprocessableEntity:
		return "invalid_request_error"
	case http.StatusUnauthorized:
		return "authentication_error"
	case http.StatusForbidden:
		return "permission_error"
	case http.StatusNotFound:
		return "not_found_error"
	case http.StatusRequestEntityTooLarge:
		return "request_too_large"
	case http.StatusTooManyRequests:
		return "rate_limit_error"
	case http.StatusServiceUnavailable:
		return "overloaded_error"
	default:
		return "api_error"
	}
}

func openAIErrorType(status int) string {
	switch {
	case status == http.StatusUnauthorized:
		return "authentication_error"
	case status == http.StatusNotFound:
		return "not_found_error"
	case status == http.StatusTooManyRequests:
		return "rate_limit_error"
	case status < 500:
		return "invalid_request_error"
	default:
		return "server_error"
	}
}

func openAIErrorCode(ae *apiError) *string {
	var s string
	switch {
	case ae.Overflow != nil:
		s = "context_length_exceeded"
	case ae.Status == http.StatusUnauthorized:
		s = "invalid_api_key"
	case ae.Status == http.StatusNotFound && ae.Param == "model":
		s = "model_not_found"
	case ae.Status == http.StatusTooManyRequests:
		s = "rate_limit_exceeded"
	case ae.Status == http.StatusRequestEntityTooLarge:
		s = "request_too_large"
	default:
		return nil
	}
	return &s
}
