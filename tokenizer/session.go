package tokenizer

import (
	"context"
	"slices"
	"sort"
)

// Session tokenizes the successive prompts of one conversation. An agent's
// prompt grows by appending, so each turn reuses the tokens of the text it
// shares with the previous turn and tokenizes only the rest; block hashes
// are extended the same way. A Session is not safe for concurrent use.
type Session struct {
	model     *Model
	hasher    Hasher
	blockSize int

	text   string
	ids    []uint32
	cps    []checkpoint // peek is the running maximum, so it never decreases
	hashes []SeqHash
	reused int

	scratch []checkpoint // reused between turns
}

// NewSession returns a Session that hashes blocks of DefaultBlockSize tokens
// for the base model.
func (m *Model) NewSession() *Session {
	return &Session{model: m, blockSize: DefaultBlockSize}
}

// Encode returns the ids of rendered, exactly as Model.Encode would, reusing
// the work of the previous call where the texts agree.
func (s *Session) Encode(rendered string) []uint32 {
	s.encode(rendered, nil)
	return slices.Clone(s.ids)
}

// EncodeContext is Encode for a request: once ctx is done it stops between
// words and returns ctx's error (Model.EncodeContext), and the session
// forgets its conversation, so that the next turn encodes it whole.
func (s *Session) EncodeContext(ctx context.Context, rendered string) ([]uint32, error) {
	st := &stopper{done: ctx.Done()}
	s.encode(rendered, st)
	if st.stopped {
		*s = Session{model: s.model, blockSize: s.blockSize}
		return nil, ctx.Err()
	}
	return slices.Clone(s.ids), nil
}

// EncodeChat renders req and encodes it through the session.
func (s *Session) EncodeChat(req ChatRequest) (rendered string, ids []uint32, err error) {
	rendered, err = s.model.ApplyChatTemplate(req)
	if err != nil {
		return "", nil, err
	}
	return rendered, s.Encode(rendered), nil
}

// BlockHashes returns the sequence hashes of every full block of the ids of
// the last Encode.
func (s *Session) BlockHashes() []SeqHash { return slices.Clone(s.hashes) }

// Reused reports how many leading tokens the last Encode took from the
// previous one instead of tokenizing them again.
func (s *Session) Reused() int { return s.reused }

func (s *Session) encode(rendered string, st *stopper) {
	common := commonPrefix(s.text, rendered)
	if common == len(s.text) && common == len(rendered) && s.text != "" {
		s.reused = len(s.ids)
		return
	}
	if s.model.normalize {
		// NFC may compose the last characters of the common prefix with
		// what follows it in the new text. Any ASCII character is a
		// starter that nothing before it can compose across, so only
		// trust the prefix up to the last one.
		for common > 0 && s.text[common-1] >= 0x80 {
			common--
		}
		if common > 0 {
			common--
		}
	}
	// The last checkpoint whose decisions all lie in the common prefix.
	k := sort.Search(len(s.cps), func(i int) bool { return s.cps[i].peek > common }) - 1
	offset, keep := 0, 0
	if k >= 0 {
		offset, keep = s.cps[k].offset, s.cps[k].tokens
	}
	s.cps = s.cps[:k+1]
	s.ids = s.ids[:keep]
	s.reused = keep

	fresh := s.scratch[:0]
	s.ids = s.model.encodeAppend(s.ids, rendered[offset:], offset, &fresh, st)
	s.scratch = fresh
	if st != nil && st.stopped {
		return // the caller forgets the session
	}
	peek := 0
	if len(s.cps) > 0 {
		peek = s.cps[len(s.cps)-1].peek
	}
	lastOffset := offset
	for _, cp := range fresh {
		peek = max(peek, cp.peek)
		// One restart point every few dozen bytes is plenty: a turn then
		// tokenizes at most that much of the common prefix again.
		if cp.offset-lastOffset < checkpointSpacing {
			continue
		}
		cp.peek = peek
		s.cps = append(s.cps, cp)
		lastOffset = cp.offset
	}
	s.text = rendered

	keepBlocks := keep / s.blockSize
	s.hashes = s.hashes[:keepBlocks]
	var parent *SeqHash
	if keepBlocks > 0 {
		parent = &s.hashes[keepBlocks-1]
	}
	s.hashes = s.hasher.AppendBlockHashes(s.hashes, parent, s.ids[keepBlocks*s.blockSize:], s.blockSize)
}

// checkpointSpacing is the least distance in bytes between two restart
// points a session keeps.
const checkpointSpacing = 48

// commonPrefix returns the length in bytes of the longest common prefix.
func commonPrefix(a, b string) int {
	n := min(len(a), len(b))
	i := 0
	// Prompts share tens of kilobytes: compare in large, then smaller
	// strides, each comparison being one vectorised memory compare.
	for _, stride := range [...]int{4096, 256, 16} {
		for i+stride <= n && a[i:i+stride] == b[i:i+stride] {
			i += stride
		}
	}
	for i < n && a[i] == b[i] {
		i++
	}
	return i
}
