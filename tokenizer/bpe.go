package tokenizer

import (
	"fmt"
	"strings"
	"sync"

	"github.com/zeebo/xxh3"
)

// bpe is a byte-level BPE model held over raw bytes: the GPT-2 byte-to-rune
// mapping of tokenizer.json is undone once at load, so words are merged
// directly from their UTF-8 bytes.
type bpe struct {
	byteID [256]uint32
	// The model is held without pointers (offsets into one byte arena,
	// hashes as map keys) so that the garbage collector need not walk its
	// hundreds of thousands of entries on every cycle.
	arena        []byte
	start, end   []uint32            // id -> its raw bytes, arena[start:end]
	vocab        map[uint64]uint32   // xxh3 of raw bytes -> id
	merges       map[uint64]mergeRes // left<<32|right -> result
	ignoreMerges bool
	maxID        uint32
	cache        wordCache
}

type mergeRes struct {
	rank uint32
	id   uint32
}

// byteToRune is GPT-2's reversible mapping of bytes to printable runes;
// runeToByte inverts it (-1: not a mapped rune).
var byteToRune, runeToByte = func() ([256]rune, [324]int16) {
	var b2r [256]rune
	var r2b [324]int16
	for i := range r2b {
		r2b[i] = -1
	}
	n := 0
	for b := 0; b < 256; b++ {
		if (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF) {
			b2r[b] = rune(b)
		} else {
			b2r[b] = rune(256 + n)
			n++
		}
		r2b[b2r[b]] = int16(b)
	}
	return b2r, r2b
}()

// appendUnmapped appends the raw bytes of a byte-level vocabulary string.
func appendUnmapped(dst []byte, s string) ([]byte, bool) {
	for _, r := range s {
		if r < 0 || int(r) >= len(runeToByte) || runeToByte[r] < 0 {
			return dst, false
		}
		dst = append(dst, byte(runeToByte[r]))
	}
	return dst, true
}

func newBPE(rawVocab, rawMerges []byte, ignoreMerges bool) (*bpe, error) {
	type entry struct {
		off, end int
		id       uint32
	}
	var (
		arena   = make([]byte, 0, len(rawVocab)/3)
		entries = make([]entry, 0, len(rawVocab)/16)
		ok      bool
	)
	err := parseVocab(rawVocab, func(tok string, id uint32) error {
		off := len(arena)
		if arena, ok = appendUnmapped(arena, tok); !ok {
			return fmt.Errorf("%w: vocabulary entry %q is not byte-level", ErrUnsupported, tok)
		}
		entries = append(entries, entry{off, len(arena), id})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	if len(entries) == 0 {
		return nil, fmt.Errorf("%w: empty BPE vocabulary", ErrUnsupported)
	}
	m := &bpe{arena: arena, vocab: make(map[uint64]uint32, len(entries)), ignoreMerges: ignoreMerges}
	for _, e := range entries {
		m.maxID = max(m.maxID, e.id)
	}
	// Ids are dense in every real vocabulary; a stray huge id would make
	// the id tables enormous.
	if int(m.maxID) > 2*len(entries)+1024 {
		return nil, fmt.Errorf("tokenizer: vocabulary id %d out of range for %d entries", m.maxID, len(entries))
	}
	m.start = make([]uint32, m.maxID+1)
	m.end = make([]uint32, m.maxID+1)
	for _, e := range entries {
		m.start[e.id], m.end[e.id] = uint32(e.off), uint32(e.end)
		h := xxh3.Hash(arena[e.off:e.end])
		if other, dup := m.vocab[h]; dup && string(m.bytes(other)) != string(arena[e.off:e.end]) {
			return nil, fmt.Errorf("%w: vocabulary hash collision", ErrUnsupported)
		}
		m.vocab[h] = e.id
	}
	for b := 0; b < 256; b++ {
		id, ok := m.lookup([]byte{byte(b)})
		if !ok {
			return nil, fmt.Errorf("%w: vocabulary lacks byte %#02x", ErrUnsupported, b)
		}
		m.byteID[b] = id
	}
	m.merges = make(map[uint64]mergeRes, len(entries))
	var buf []byte
	rank := uint32(0)
	err = parseMergeList(rawMerges, func(left, right string) error {
		buf = buf[:0]
		buf, okL := appendUnmapped(buf, left)
		split := len(buf)
		buf, okR := appendUnmapped(buf, right)
		l, okL2 := m.lookup(buf[:split])
		r, okR2 := m.lookup(buf[split:])
		res, okRes := m.lookup(buf)
		if !okL || !okR || !okL2 || !okR2 || !okRes {
			return fmt.Errorf("tokenizer: merge %d (%q %q) refers to tokens not in the vocabulary", rank, left, right)
		}
		key := uint64(l)<<32 | uint64(r)
		if _, dup := m.merges[key]; !dup {
			m.merges[key] = mergeRes{rank: rank, id: res}
		}
		rank++
		return nil
	})
	if err != nil {
		return nil, err
	}
	return m, nil
}

// bytes returns the raw bytes of token id.
func (m *bpe) bytes(id uint32) []byte {
	if id > m.maxID {
		return nil
	}
	return m.arena[m.start[id]:m.end[id]]
}

// lookup returns the id of the token whose raw bytes are b.
func (m *bpe) lookup(b []byte) (uint32, bool) {
	id, ok := m.vocab[xxh3.Hash(b)]
	if !ok || string(m.bytes(id)) != string(b) {
		return 0, false
	}
	return id, true
}

func (m *bpe) lookupString(s string) (uint32, bool) {
	id, ok := m.vocab[xxh3.HashString(s)]
	if !ok || string(m.bytes(id)) != s {
		return 0, false
	}
	return id, true
}

// maxCachedWord bounds the words kept in the cache: long ones are rare and
// would crowd it.
const maxCachedWord = 64

// encodeWord appends the ids of one pre-tokenized word.
func (m *bpe) encodeWord(dst []uint32, word string) []uint32 {
	if len(word) == 1 {
		return append(dst, m.byteID[word[0]])
	}
	if m.ignoreMerges {
		if id, ok := m.lookupString(word); ok {
			return append(dst, id)
		}
	}
	if len(word) <= maxCachedWord {
		if ids, ok := m.cache.get(word); ok {
			return append(dst, ids...)
		}
	}
	start := len(dst)
	dst = m.merge(dst, word)
	if len(word) <= maxCachedWord {
		m.cache.put(word, dst[start:])
	}
	return dst
}

// merge applies merges by rank, lowest first and leftmost among equals,
// which is the order Hugging Face's BPE produces.
func (m *bpe) merge(dst []uint32, word string) []uint32 {
	var symBuf [maxCachedWord]uint32
	var rankBuf [maxCachedWord]mergeRes
	var syms []uint32
	var ranks []mergeRes
	if len(word) <= maxCachedWord {
		syms, ranks = symBuf[:len(word)], rankBuf[:len(word)]
	} else {
		syms, ranks = make([]uint32, len(word)), make([]mergeRes, len(word))
	}
	for i := 0; i < len(word); i++ {
		syms[i] = m.byteID[word[i]]
	}
	const none = ^uint32(0)
	pairRank := func(l, r uint32) mergeRes {
		if res, ok := m.merges[uint64(l)<<32|uint64(r)]; ok {
			return res
		}
		return mergeRes{rank: none}
	}
	n := len(syms)
	for i := 0; i+1 < n; i++ {
		ranks[i] = pairRank(syms[i], syms[i+1])
	}
	for n > 1 {
		best, at := none, -1
		for i := 0; i+1 < n; i++ {
			if ranks[i].rank < best {
				best, at = ranks[i].rank, i
			}
		}
		if at < 0 {
			break
		}
		syms[at] = ranks[at].id
		copy(syms[at+1:n-1], syms[at+2:n])
		copy(ranks[at+1:n-1], ranks[at+2:n])
		n--
		if at > 0 {
			ranks[at-1] = pairRank(syms[at-1], syms[at])
		}
		if at+1 < n {
			ranks[at] = pairRank(syms[at], syms[at+1])
		}
	}
	return append(dst, syms[:n]...)
}

// wordCache remembers the ids of recent words. It is sharded so that many
// goroutines encoding at once rarely wait on the same lock, and each shard is
// simply emptied when full: natural text reuses a small set of words.
type wordCache struct {
	shards [cacheShards]cacheShard
}

const (
	cacheShards        = 16
	cacheEntriesPerShd = 4096
)

type cacheShard struct {
	mu sync.RWMutex
	m  map[string][]uint32
}

func (c *wordCache) shard(word string) *cacheShard {
	return &c.shards[xxh3.HashString(word)%cacheShards]
}

func (c *wordCache) get(word string) ([]uint32, bool) {
	s := c.shard(word)
	s.mu.RLock()
	ids, ok := s.m[word]
	s.mu.RUnlock()
	return ids, ok
}

func (c *wordCache) put(word string, ids []uint32) {
	s := c.shard(word)
	s.mu.Lock()
	if s.m == nil || len(s.m) >= cacheEntriesPerShd {
		s.m = make(map[string][]uint32, 256)
	}
	s.m[strings.Clone(word)] = append([]uint32(nil), ids...)
	s.mu.Unlock()
}
