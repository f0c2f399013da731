package api

import (
	"container/list"
	"context"
	"sync"

	json "github.com/goccy/go-json"
	"github.com/zeebo/xxh3"

	"github.com/hearth-llm/hearth/tokenizer"
)

// conversationTokenizer is what a Tokenizer may also offer to tokenize a
// conversation turn after turn; *tokenizer.Model does.
type conversationTokenizer interface {
	chatRenderer
	NewSession() *tokenizer.Session
}

// chatRenderer renders a chat without tokenizing it, so that a prompt's
// size can be looked at first; *tokenizer.Model does.
type chatRenderer interface {
	ApplyChatTemplate(tokenizer.ChatRequest) (string, error)
}

// contextEncoder tokenizes a request's prompt and stops, with ctx's error,
// once the request ends; *tokenizer.Model does. A Tokenizer without it
// encodes to the end.
type contextEncoder interface {
	EncodeContext(ctx context.Context, text string) ([]uint32, error)
}

// tokenBounder bounds a text's tokens from below without encoding it;
// *tokenizer.Model does.
type tokenBounder interface {
	MinTokens(text string) int
}

// largePromptBytes is the size from which a prompt waits for one of
// largePrompts turns to be tokenized: the memory a tokenization takes
// grows with the text (docs/perf.md), and a burst of large prompts must
// not take it all at once. Agents' prompts (100k tokens is about 400 KB)
// stay below it.
const (
	largePromptBytes = 1 << 20
	largePrompts     = 2
)

// prompts turns a request's chat into token ids and block hashes. An agent
// resends its whole conversation every turn; a tokenizer session per
// conversation reuses the tokens of the text it saw the turn before and
// tokenizes only the new tail: about 0.1 ms instead of 2 to 3 ms for a
// 30k-token history (docs/perf-history.md, "Encoding, loading and agent
// turns"). Results are exactly a plain encode's.
//
// A conversation is the request's session id and the first bytes of its
// rendered prompt (system prompt and tools), so that the side requests a
// client sends under the same id (titles, summaries) keep sessions of their
// own instead of evicting the main one's text. Requests without a session
// id, a session busy with a concurrent request, or a tokenizer without
// sessions take the plain path.
//
// A prompt that cannot fit contextTokens whatever its tokens is refused
// before it is tokenized (tokenBounder), and large prompts are tokenized
// a few at a time.
type prompts struct {
	tok           Tokenizer
	conv          conversationTokenizer // nil: no sessions
	render        chatRenderer          // nil: EncodeChat renders and encodes at once
	bound         tokenBounder          // nil: every prompt is tokenized
	stoppable     contextEncoder        // nil: an encode runs to its end
	max           int                   // sessions kept, least recently used evicted
	contextTokens int                   // 0: no limit
	large         chan struct{}

	mu       sync.Mutex
	sessions map[conversationKey]*list.Element // of *conversation
	lru      list.List                         // front: most recent
}

type conversationKey struct {
	sessionID string
	shape     uint64 // hash of the rendered prompt's first shapeBytes
}

// shapeBytes of a rendered prompt tell its kind of request apart: they hold
// the system prompt's start. A shorter prompt is encoded plainly: it has no
// stable shape yet, and it is quick.
const shapeBytes = 2048

// shapeOf fingerprints the kind of request a rendered prompt is.
func shapeOf(rendered string) uint64 { return xxh3.HashString(rendered[:shapeBytes]) }

type conversation struct {
	key conversationKey
	mu  sync.Mutex // held while a request encodes through s
	s   *tokenizer.Session
}

func newPrompts(tok Tokenizer, max, contextTokens int) *prompts {
	p := &prompts{tok: tok, max: max, contextTokens: contextTokens,
		sessions: make(map[conversationKey]*list.Element), large: make(chan struct{}, largePrompts)}
	if c, ok := tok.(conversationTokenizer); ok && max > 0 {
		p.conv = c
	}
	p.render, _ = tok.(chatRenderer)
	p.bound, _ = tok.(tokenBounder)
	p.stoppable, _ = tok.(contextEncoder)
	return p
}

// errRender wraps a chat template's failure.
type errRender struct{ err error }

func (e errRender) Error() string { return e.err.Error() }
func (e errRender) Unwrap() error { return e.err }

// encode renders req and returns its token ids and block hashes. A prompt
// that cannot fit the context is an overflow *apiError, found before it
// is tokenized; a template that fails is an errRender; a request that
// ends (ctx, its client gone) stops the tokenization between words with
// ctx's error.
func (p *prompts) encode(ctx context.Context, sessionID string, req tokenizer.ChatRequest) ([]uint32, []tokenizer.SeqHash, error) {
	if p.render == nil {
		return p.plain(req)
	}
	rendered, err := p.render.ApplyChatTemplate(req)
	if err != nil {
		return nil, nil, errRender{err}
	}
	if err := p.fits(rendered); err != nil {
		return nil, nil, err
	}
	done, err := p.turn(ctx, len(rendered))
	if err != nil {
		return nil, nil, err
	}
	defer done()
	if p.conv == nil || sessionID == "" || len(rendered) < shapeBytes { // short: quick to encode, and no stable shape yet
		return p.encodeHashes(ctx, rendered)
	}
	c := p.conversation(conversationKey{sessionID, shapeOf(rendered)})
	if !c.mu.TryLock() {
		return p.encodeHashes(ctx, rendered)
	}
	defer c.mu.Unlock()
	ids, err := c.s.EncodeContext(ctx, rendered)
	if err != nil {
		return nil, nil, err
	}
	return ids, c.s.BlockHashes(), nil
}

// encodeHashes tokenizes text without a session.
func (p *prompts) encodeHashes(ctx context.Context, text string) ([]uint32, []tokenizer.SeqHash, error) {
	ids, err := p.encodePlain(ctx, text)
	if err != nil {
		return nil, nil, err
	}
	return ids, tokenizer.BlockHashes(ids, tokenizer.DefaultBlockSize), nil
}

func (p *prompts) encodePlain(ctx context.Context, text string) ([]uint32, error) {
	if p.stoppable != nil {
		return p.stoppable.EncodeContext(ctx, text)
	}
	return p.tok.Encode(text), nil
}

func (p *prompts) plain(req tokenizer.ChatRequest) ([]uint32, []tokenizer.SeqHash, error) {
	_, ids, err := p.tok.EncodeChat(req)
	if err != nil {
		return nil, nil, errRender{err}
	}
	return ids, tokenizer.BlockHashes(ids, tokenizer.DefaultBlockSize), nil
}

// encodeText tokenizes a prompt given as text (the legacy completions
// API's), refusing one that cannot fit and stopping as encode does.
func (p *prompts) encodeText(ctx context.Context, text string) ([]uint32, error) {
	if err := p.fits(text); err != nil {
		return nil, err
	}
	done, err := p.turn(ctx, len(text))
	if err != nil {
		return nil, err
	}
	defer done()
	return p.encodePlain(ctx, text)
}

// fits refuses a prompt whose tokens could not fit the context, however
// long its tokens: the overflow every dialect words for its clients.
func (p *prompts) fits(text string) error {
	if p.contextTokens <= 0 || p.bound == nil || len(text) < p.contextTokens {
		return nil // a text shorter than the context in bytes always fits
	}
	if n := p.bound.MinTokens(text); n >= p.contextTokens {
		return errContextOverflow(n, p.contextTokens)
	}
	return nil
}

// fitsChat refuses, before the chat is rendered (which copies it several
// times), a chat whose parts exceed their bounds (boundChat), or whose
// tools, messages and text alone cannot fit the context. Every counted
// message renders at least one token of its own, and each text that
// appears whole in the rendered prompt at least its MinTokens less one
// for the rounding: that bound is one of bytes per token, so the texts'
// bytes add up whatever tokens the rendered prompt joins across their
// seams.
func (p *prompts) fitsChat(msgs []chatMessage, tools json.RawMessage) error {
	counting := p.contextTokens > 0 && p.bound != nil
	shape, err := boundChat(msgs, tools, counting)
	if err != nil || !counting {
		return err
	}
	n := shape.rendered
	for _, text := range shape.texts {
		n += max(p.bound.MinTokens(text)-1, 0)
	}
	if n >= p.contextTokens {
		return errContextOverflow(n, p.contextTokens)
	}
	return nil
}

// turn waits for a large prompt's turn to be tokenized, or for ctx to
// end; the function it returns ends the turn.
func (p *prompts) turn(ctx context.Context, textBytes int) (func(), error) {
	if textBytes < largePromptBytes {
		return func() {}, nil
	}
	select {
	case p.large <- struct{}{}:
		return func() { <-p.large }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// conversation returns the session of key, making it (and evicting the
// least recently used one) when there is none.
func (p *prompts) conversation(key conversationKey) *conversation {
	p.mu.Lock()
	defer p.mu.Unlock()
	if e, ok := p.sessions[key]; ok {
		p.lru.MoveToFront(e)
		return e.Value.(*conversation)
	}
	c := &conversation{key: key, s: p.conv.NewSession()}
	p.sessions[key] = p.lru.PushFront(c)
	for p.lru.Len() > p.max {
		old := p.lru.Remove(p.lru.Back()).(*conversation)
		delete(p.sessions, old.key)
	}
	return c
}
