package api

import (
	"container/list"
	"sync"

	"github.com/zeebo/xxh3"

	"github.com/hearth-llm/hearth/tokenizer"
)

// conversationTokenizer is what a Tokenizer may also offer to tokenize a
// conversation turn after turn; *tokenizer.Model does.
type conversationTokenizer interface {
	ApplyChatTemplate(tokenizer.ChatRequest) (string, error)
	NewSession() *tokenizer.Session
}

// prompts turns a request's chat into token ids and block hashes. An agent
// resends its whole conversation every turn; a tokenizer session per
// conversation reuses the tokens of the text it saw the turn before and
// tokenizes only the new tail: about 0.1 ms instead of 2 to 3 ms for a
// 30k-token history (docs/perf.md). Results are exactly a plain encode's.
//
// A conversation is the request's session id and the first bytes of its
// rendered prompt (system prompt and tools), so that the side requests a
// client sends under the same id (titles, summaries) keep sessions of their
// own instead of evicting the main one's text. Requests without a session
// id, a session busy with a concurrent request, or a tokenizer without
// sessions take the plain path.
type prompts struct {
	tok       Tokenizer
	conv      conversationTokenizer // nil: no sessions
	blockSize int
	max       int // sessions kept, least recently used evicted

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

func newPrompts(tok Tokenizer, blockSize, max int) *prompts {
	p := &prompts{tok: tok, blockSize: blockSize, max: max, sessions: make(map[conversationKey]*list.Element)}
	if c, ok := tok.(conversationTokenizer); ok && max > 0 && blockSize == tokenizer.DefaultBlockSize {
		p.conv = c // a session hashes DefaultBlockSize blocks
	}
	return p
}

// encode renders req and returns its token ids and block hashes.
func (p *prompts) encode(sessionID string, req tokenizer.ChatRequest) ([]uint32, []tokenizer.SeqHash, error) {
	if p.conv == nil || sessionID == "" {
		return p.plain(req)
	}
	rendered, err := p.conv.ApplyChatTemplate(req)
	if err != nil {
		return nil, nil, err
	}
	if len(rendered) < shapeBytes { // quick to encode, and no stable shape yet
		ids := p.tok.Encode(rendered)
		return ids, tokenizer.BlockHashes(ids, p.blockSize), nil
	}
	c := p.conversation(conversationKey{sessionID, shapeOf(rendered)})
	if !c.mu.TryLock() {
		ids := p.tok.Encode(rendered)
		return ids, tokenizer.BlockHashes(ids, p.blockSize), nil
	}
	defer c.mu.Unlock()
	ids := c.s.Encode(rendered)
	return ids, c.s.BlockHashes(), nil
}

func (p *prompts) plain(req tokenizer.ChatRequest) ([]uint32, []tokenizer.SeqHash, error) {
	_, ids, err := p.tok.EncodeChat(req)
	if err != nil {
		return nil, nil, err
	}
	return ids, tokenizer.BlockHashes(ids, p.blockSize), nil
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
