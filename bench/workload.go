package bench

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Workload is a benchmark workload a runner can drive any number of times,
// once per policy and concurrency level. Implementations are immutable and
// safe for concurrent use; each Driver is single-use and not.
type Workload interface {
	// Kind names the workload: "agentic" or "trace".
	Kind() string
	// NewDriver returns a fresh driver positioned at time zero.
	NewDriver() Driver
}

// Driver hands out the requests of one run as they fall due. Times are
// durations since the start of the run on the runner's clock. A Driver is
// not safe for concurrent use: a live runner serialises its calls.
type Driver interface {
	// Next returns a request that is due at or before now, or nil if none
	// is. Call it until it returns nil. Requests come out in order of due
	// time; Request.Due says when each fell due, so a runner that polls late
	// can tell how late it sent it.
	Next(now time.Duration) *Request
	// Wake reports when the earliest request the driver knows of falls due.
	// ok is false when none is known: the driver is waiting for Complete
	// calls, or the run is finished.
	Wake() (at time.Duration, ok bool)
	// Complete reports that req, handed out by Next, has ended at now: its
	// whole answer arrived, or it failed. A closed-loop driver schedules
	// what follows from it.
	Complete(req *Request, now time.Duration, failed bool)
	// Finished reports that every request has been handed out and
	// completed, and no further one will be.
	Finished() bool
}

// Role is who a segment of a prompt comes from, with the names of the
// OpenAI chat roles.
type Role string

// Roles of prompt segments.
const (
	RoleSystem    Role = "system"    // shared system prompt and tool definitions
	RoleUser      Role = "user"      // the task given to a session or subagent
	RoleAssistant Role = "assistant" // the model's earlier answers (tool calls)
	RoleTool      Role = "tool"      // tool results
)

// Segment is a contiguous run of a prompt's tokens from one role:
// Prompt[Start:End].
type Segment struct {
	Role       Role
	Start, End int
}

// Message is one chat message for a live run: a segment as text.
type Message struct {
	Role    Role   `json:"role"`
	Content string `json:"content"`
}

// Request is one model call of a workload.
//
// Prompt and Answer may share memory with other requests of the same session
// (each turn's prompt is a prefix of the next one's): runners must not
// modify them.
type Request struct {
	// Session names the conversation this request belongs to: "s00012" for
	// agentic session 12, "s00012.1" for its second subagent, "t000345" for
	// line 345 of a trace (a trace request is a session of its own).
	Session string
	// Turn is the request's 0-based position in its session.
	Turn int
	// Due is when the request fell due, set by the Driver that handed it out.
	Due time.Duration
	// Prompt is the whole prompt as token ids, from the fixed vocabulary
	// (see Text), without any chat template around it.
	Prompt []uint32
	// Segments cut Prompt into role-tagged parts; together they cover it
	// exactly, in order.
	Segments []Segment
	// SharedPrefix is how many leading tokens of Prompt are the same in
	// every session of the workload (the agentic system prompt); zero for a
	// trace, whose sharing is only known from its block ids.
	SharedPrefix int
	// OutputTokens is how many tokens the model should generate: the
	// request's max_tokens, to be honoured exactly (ignore end-of-sequence).
	OutputTokens int
	// Answer is the workload's canned answer of OutputTokens tokens. The
	// next turn's prompt contains this answer, not what the engine really
	// generated, just as a real agent resends the model's previous answer:
	// a simulated engine's output is arbitrary, and a workload must be the
	// same under every policy. Nil for a trace.
	Answer []uint32
	// Last says the request is its session's last turn: when its answer
	// has arrived, the session is done. Always true for a trace request.
	Last bool
	// Side says the request is a side request beside the session's loop
	// (AgenticConfig.SideRequests): a title, a quota probe. Its session id
	// is the parent's and the request's name.
	Side bool
	// Compaction says the request is a summarisation turn: the client
	// asks for a summary of its history because the next turn would not
	// fit the context (AgenticConfig.Compaction).
	Compaction bool
	// Pause is how long the session waits after this request's answer
	// before its next turn is due: the tool call's running time. Zero when
	// the next turn waits for something else (subagents) or there is none.
	Pause time.Duration
}

// ID identifies the request within its workload: "s00012/3".
func (r *Request) ID() string {
	return r.Session + "/" + strconv.Itoa(r.Turn)
}

// Messages returns the prompt as chat messages, one per segment, for a live
// run. The content of each is the segment's text (see Text); a chat template
// adds its own tokens around them, so what a server computes is a little
// longer than Prompt. Roles are the chat roles named above; a server that
// wants a tool message to answer a tool call (OpenAI's tool_call_id) needs
// the live runner to dress the assistant and tool messages accordingly.
func (r *Request) Messages() []Message {
	msgs := make([]Message, 0, len(r.Segments))
	for _, s := range r.Segments {
		msgs = append(msgs, Message{Role: s.Role, Content: mustText(r.Prompt[s.Start:s.End])})
	}
	return msgs
}

// Text returns the whole prompt as text (see Text).
func (r *Request) Text() string {
	return mustText(r.Prompt)
}

// ErrUnknownToken is returned by Text for a token id that is not in the
// workload vocabulary.
var ErrUnknownToken = errors.New("token id not in the workload vocabulary")

// tokenIndex maps a vocabulary token id to its index in vocabulary.
var tokenIndex = func() map[uint32]uint8 {
	m := make(map[uint32]uint8, len(vocabulary))
	for i, w := range vocabulary {
		m[w.id] = uint8(i)
	}
	return m
}()

// Text turns token ids of the workload vocabulary into text: the words
// concatenated, each with its leading space. Every workload token id is one
// word, so the Qwen3 tokenizer turns the text back into exactly ids.
func Text(ids []uint32) (string, error) {
	var b strings.Builder
	b.Grow(7 * len(ids))
	for i, id := range ids {
		idx, ok := tokenIndex[id]
		if !ok {
			return "", fmt.Errorf("bench: token %d at %d: %w", id, i, ErrUnknownToken)
		}
		b.WriteString(vocabulary[idx].text)
	}
	return b.String(), nil
}

// mustText is Text for ids the workload generated itself; an unknown id can
// only be a runner's own token, which is shown as a placeholder word rather
// than dropped so the length stays about right.
func mustText(ids []uint32) string {
	var b strings.Builder
	b.Grow(7 * len(ids))
	for _, id := range ids {
		if idx, ok := tokenIndex[id]; ok {
			b.WriteString(vocabulary[idx].text)
		} else {
			b.WriteString(" unknown")
		}
	}
	return b.String()
}

// Words returns the vocabulary's words (each with its leading space) and
// their Qwen3 token ids, in vocabulary order, so that tests elsewhere can
// check that every word really is a single token.
func Words() (words []string, ids []uint32) {
	words = make([]string, len(vocabulary))
	ids = make([]uint32, len(vocabulary))
	for i, w := range vocabulary {
		words[i], ids[i] = w.text, w.id
	}
	return words, ids
}

// fillTokens fills dst with vocabulary token ids drawn from r: eight tokens
// per 64 random bits.
func fillTokens(dst []uint32, r *Rand) {
	for len(dst) >= 8 {
		v := r.Uint64()
		for i := range 8 {
			dst[i] = vocabulary[byte(v>>(8*i))].id
		}
		dst = dst[8:]
	}
	if len(dst) > 0 {
		v := r.Uint64()
		for i := range dst {
			dst[i] = vocabulary[byte(v>>(8*i))].id
		}
	}
}
