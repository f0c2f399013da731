package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hearth-llm/hearth/router"
	"github.com/hearth-llm/hearth/router/osl"
	"github.com/hearth-llm/hearth/tokenizer"
)

// LiveConfig describes a live run against an OpenAI-compatible server.
type LiveConfig struct {
	// Target is the server's OpenAI base URL, e.g. http://127.0.0.1:8000/v1.
	Target string
	// Model is the model id sent with every request; empty asks the
	// server's /models for its first model.
	Model string
	// APIKey, if set, is sent as a bearer token.
	APIKey string
	// Client sends the requests (default: a client without a timeout; a
	// run is bounded by its workload and ctx).
	Client *http.Client
}

// ErrBadLive is wrapped by every error about a live run's configuration.
var ErrBadLive = errors.New("bad live config")

// Live runs workloads against a live server in real time: each request is
// a streaming chat completion with the workload's text; tool pauses are
// real waits.
type Live struct {
	cfg LiveConfig
}

// NewLive checks cfg.
func NewLive(cfg LiveConfig) (*Live, error) {
	cfg.Target = strings.TrimRight(cfg.Target, "/")
	if !strings.HasPrefix(cfg.Target, "http://") && !strings.HasPrefix(cfg.Target, "https://") {
		return nil, fmt.Errorf("bench: live: %w: target %q is not an http(s) URL", ErrBadLive, cfg.Target)
	}
	if cfg.Client == nil {
		cfg.Client = &http.Client{}
	}
	return &Live{cfg: cfg}, nil
}

// ResolveModel fills in the model from the server's /models when none was
// configured, and returns it.
func (l *Live) ResolveModel(ctx context.Context) (string, error) {
	if l.cfg.Model != "" {
		return l.cfg.Model, nil
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, l.cfg.Target+"/models", nil)
	if err != nil {
		return "", fmt.Errorf("bench: live: %w", err)
	}
	l.authorize(req)
	resp, err := l.cfg.Client.Do(req)
	if err != nil {
		return "", fmt.Errorf("bench: live: list models: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("bench: live: list models: status %s", resp.Status)
	}
	var list struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&list); err != nil {
		return "", fmt.Errorf("bench: live: list models: %w", err)
	}
	if len(list.Data) == 0 || list.Data[0].ID == "" {
		return "", errors.New("bench: live: the server lists no model")
	}
	l.cfg.Model = list.Data[0].ID
	return l.cfg.Model, nil
}

func (l *Live) authorize(req *http.Request) {
	if l.cfg.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+l.cfg.APIKey)
	}
}

// PolicyHeader names the request header a Hearth gateway reads a routing
// policy from; a live run of a named policy sends it.
const PolicyHeader = "x-hearth-policy"

// liveDone is a request's end, reported to the run's loop.
type liveDone struct {
	req *Request
	res Result
}

// RunSummary runs workload w against the target until the workload
// finishes or ctx ends, and summarises it. A policy other than "" or
// "target" is sent in the x-hearth-policy header, for a Hearth gateway. On
// ctx's end it stops every request in flight and returns the summary so
// far with ctx's error.
func (l *Live) RunSummary(ctx context.Context, w Workload, policy string, sessions int, progress func(ProgressState)) (RunSummary, error) {
	results, err := l.Run(ctx, w, policy, progress)
	label := policy
	if label == "" {
		label = "target"
	}
	return Summarize(label, sessions, results), err
}

// Run is RunSummary returning every request's result.
func (l *Live) Run(ctx context.Context, w Workload, policy string, progress func(ProgressState)) ([]Result, error) {
	if _, err := l.ResolveModel(ctx); err != nil {
		return nil, err
	}
	if policy == "target" {
		policy = ""
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	start := time.Now()
	since := func() time.Duration { return time.Since(start) }
	driver := w.NewDriver()
	done := make(chan liveDone)
	var wg sync.WaitGroup
	var rec Recorder
	ps := ProgressState{Label: "target"}
	if policy != "" {
		ps.Label = policy
	}
	if a, ok := w.(*Agentic); ok {
		ps.Duration, ps.SessionsTotal = a.Config().Duration, a.Config().TotalSessions
	} else if t, ok := w.(*Trace); ok {
		ps.SessionsTotal = t.Len()
	}

	var runErr error
loop:
	for !driver.Finished() {
		now := since()
		for req := driver.Next(now); req != nil; req = driver.Next(now) {
			wg.Add(1)
			go func() {
				defer wg.Done()
				res := l.send(ctx, req, policy, start)
				select {
				case done <- liveDone{req: req, res: res}:
				case <-ctx.Done():
				}
			}()
		}
		var wake <-chan time.Time
		if at, ok := driver.Wake(); ok {
			wake = time.After(max(at-since(), 0))
		}
		select {
		case d := <-done:
			rec.Add(d.res)
			driver.Complete(d.req, since(), d.res.Err != nil)
			if progress != nil {
				ps.Requests, ps.Errors = rec.Counts()
				ps.Elapsed, ps.TTFTP50 = since(), rec.TTFTP50()
				if endsSession(d.req, d.res.Err != nil) {
					ps.SessionsDone++
				}
				progress(ps)
			}
		case <-wake:
		case <-ctx.Done():
			runErr = fmt.Errorf("bench: live: %w", ctx.Err())
			break loop
		}
	}
	cancel()
	wg.Wait()
	return rec.Results(), runErr
}

// chatRequest is the body of a streaming chat completion.
type chatRequest struct {
	Model         string        `json:"model"`
	Messages      []liveMessage `json:"messages"`
	MaxTokens     int           `json:"max_tokens"`
	Stream        bool          `json:"stream"`
	StreamOptions struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	// IgnoreEOS (vLLM's extension) makes the engine produce exactly
	// max_tokens, as the workload asks; other servers ignore it.
	IgnoreEOS bool `json:"ignore_eos"`
}

// chatChunk is what the runner reads of a streamed chunk.
type chatChunk struct {
	Choices []struct {
		Delta struct {
			Content          string          `json:"content"`
			ReasoningContent string          `json:"reasoning_content"`
			Reasoning        string          `json:"reasoning"`
			ToolCalls        json.RawMessage `json:"tool_calls"`
		} `json:"delta"`
	} `json:"choices"`
	Usage *chatUsage `json:"usage"`
	Error *struct {
		Message string `json:"message"`
	} `json:"error"`
}

// chatUsage is the usage object of the last chunk.
type chatUsage struct {
	PromptTokens        int `json:"prompt_tokens"`
	CompletionTokens    int `json:"completion_tokens"`
	PromptTokensDetails *struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
}

// liveMessage is a chat message as a live run sends it.
type liveMessage struct {
	Role       Role   `json:"role"`
	Content    string `json:"content"`
	ToolCallID string `json:"tool_call_id,omitempty"`
}

// send makes one streaming chat completion and measures it. Times are
// since start.
func (l *Live) send(ctx context.Context, req *Request, policy string, start time.Time) (res Result) {
	res = Result{Session: req.Session, Turn: req.Turn, Last: req.Last, Compaction: req.Compaction}
	body := chatRequest{Model: l.cfg.Model, MaxTokens: req.OutputTokens, Stream: true, IgnoreEOS: true}
	body.StreamOptions.IncludeUsage = true
	body.Messages = liveMessages(req)
	payload, err := json.Marshal(body)
	if err != nil {
		res.Err = fmt.Errorf("bench: live: %w", err)
		return res
	}
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, l.cfg.Target+"/chat/completions", bytes.NewReader(payload))
	if err != nil {
		res.Err = fmt.Errorf("bench: live: %w", err)
		return res
	}
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set("Accept", "text/event-stream")
	hreq.Header.Set("x-session-id", req.Session)
	if policy != "" {
		hreq.Header.Set(PolicyHeader, policy)
	}
	l.authorize(hreq)

	res.Sent = time.Since(start)
	defer func() { res.Done = time.Since(start) }()
	resp, err := l.cfg.Client.Do(hreq)
	if err != nil {
		res.Err = fmt.Errorf("bench: live: %w", err)
		return res
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		res.Err = fmt.Errorf("bench: live: %w", statusError(resp.StatusCode, resp.Status, bytes.TrimSpace(msg)))
		return res
	}
	predictedBlocks, _ := strconv.Atoi(resp.Header.Get("x-hearth-cached-blocks"))
	if tokens, turns, ok := parseOSLHeader(resp.Header.Get(OSLHeader)); ok {
		res.PredictedOutputTokens, res.PredictionWarm = tokens, turns >= osl.WarmTurns
	}
	chunks, usage, err := readStream(resp.Body, func() {
		if res.FirstToken == 0 {
			res.FirstToken = time.Since(start)
		}
	})
	switch {
	case err != nil:
		res.Err = fmt.Errorf("bench: live: stream: %w", err)
	case res.FirstToken == 0:
		res.Err = errors.New("bench: live: the stream carried no output")
	}
	res.OutputTokens = chunks
	if usage != nil {
		res.PromptTokens = usage.PromptTokens
		if usage.CompletionTokens > 0 {
			res.OutputTokens = usage.CompletionTokens
		}
		if usage.PromptTokensDetails != nil {
			res.CachedTokens = usage.PromptTokensDetails.CachedTokens
		}
	}
	// The engine's cached tokens count what it loads from host RAM and
	// the node's SSD as well as its GPU hits: so does the prediction, from
	// x-hearth-tier-blocks where the gateway sends it.
	if gpu, ram, ssd, ok := parseTierBlocks(resp.Header.Get("x-hearth-tier-blocks")); ok {
		predictedBlocks = gpu + ram + ssd
		res.PredictedRAMTokens, res.PredictedSSDTokens = ram*tokenizer.DefaultBlockSize, ssd*tokenizer.DefaultBlockSize
	}
	res.PredictedCachedTokens = predictedBlocks * tokenizer.DefaultBlockSize
	if promptBlocks, _ := strconv.Atoi(resp.Header.Get("x-hearth-prompt-blocks")); res.PromptTokens == 0 && promptBlocks > 0 {
		// No usage in the stream: the gateway's block count is the best
		// measure of the prompt there is.
		res.PromptTokens = promptBlocks * tokenizer.DefaultBlockSize
	}
	return res
}

// parseTierBlocks reads a Hearth gateway's x-hearth-tier-blocks header,
// "gpu=N,ram=N,ssd=N": the prompt blocks the chosen worker holds on its
// GPU, loads from host RAM and from its node's SSD. A tier it does not
// name is 0 and one this runner does not know is left out; ok is false
// for an empty or malformed header.
func parseTierBlocks(v string) (gpu, ram, ssd int, ok bool) {
	if strings.TrimSpace(v) == "" {
		return 0, 0, 0, false
	}
	for part := range strings.SplitSeq(v, ",") {
		name, count, found := strings.Cut(strings.TrimSpace(part), "=")
		n, err := strconv.ParseUint(strings.TrimSpace(count), 10, 31)
		if !found || err != nil {
			return 0, 0, 0, false
		}
		switch strings.TrimSpace(name) {
		case "gpu":
			gpu = int(n)
		case "ram":
			ram = int(n)
		case "ssd":
			ssd = int(n)
		}
	}
	return gpu, ram, ssd, true
}

// liveMessages returns the request's messages for a strict OpenAI server:
// every tool message answers a tool call id (vLLM ignores it).
func liveMessages(req *Request) []liveMessage {
	msgs := req.Messages()
	out := make([]liveMessage, len(msgs))
	for i, m := range msgs {
		out[i] = liveMessage{Role: m.Role, Content: m.Content}
		if m.Role == RoleTool {
			out[i].ToolCallID = fmt.Sprintf("call_%s_%d", req.Session, i)
		}
	}
	return out
}

// maxSSELine bounds one server-sent event line.
const maxSSELine = 4 << 20

// readStream reads an OpenAI chat-completion event stream up to its
// "data: [DONE]" line. It calls first for every chunk that carries output
// (content, reasoning or a tool call) and returns how many did, and the
// usage chunk, if any. A stream that ends without [DONE], or carries an
// error object, is an error.
func readStream(r io.Reader, first func()) (chunks int, usage *chatUsage, err error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), maxSSELine)
	for sc.Scan() {
		line := sc.Bytes()
		data, ok := bytes.CutPrefix(line, []byte("data:"))
		if !ok {
			continue // comments, event names, blank separators
		}
		data = bytes.TrimSpace(data)
		if string(data) == "[DONE]" {
			return chunks, usage, nil
		}
		var c chatChunk
		if err := json.Unmarshal(data, &c); err != nil {
			return chunks, usage, fmt.Errorf("bad chunk: %w", err)
		}
		if c.Error != nil {
			return chunks, usage, fmt.Errorf("server error: %s", c.Error.Message)
		}
		if c.Usage != nil {
			usage = c.Usage
		}
		for _, ch := range c.Choices {
			d := &ch.Delta
			if d.Content != "" || d.ReasoningContent != "" || d.Reasoning != "" || (len(d.ToolCalls) > 0 && string(d.ToolCalls) != "null") {
				chunks++
				first()
				break
			}
		}
	}
	if err := sc.Err(); err != nil {
		return chunks, usage, err
	}
	return chunks, usage, io.ErrUnexpectedEOF
}

// statusError turns a refused request's status and body into an error
// whose cause ErrorCauses can tell: a 400 about the context length (vLLM's
// or OpenAI's words), a 429 (a Hearth gateway's full queue), a 5xx (the
// engine).
func statusError(code int, status string, body []byte) error {
	err := fmt.Errorf("status %s: %s", status, body)
	text := strings.ToLower(string(body))
	switch {
	case code == http.StatusBadRequest && (strings.Contains(text, "maximum context length") ||
		strings.Contains(text, "context_length_exceeded")):
		return fmt.Errorf("%w: %w", errContextLength, err)
	case code == http.StatusTooManyRequests:
		return fmt.Errorf("%w: %w", router.ErrQueueFull, err)
	case code >= 500:
		return fmt.Errorf("%w: %w", errEngine, err)
	}
	return err
}
