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
	rankResult   []uint32            // rank -> the id its merge makes
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
		m.rankResult = append(m.rankResult, res)
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
// which is the order Hugging Face's BPE produces. As Hugging Face's Word
// does, the word is a linked list of parts and the candidate merges wait in
// a priority queue ordered by (rank, position): each merge costs O(log n),
// so a word of n bytes (a minified file, a base64 blob, a run of one
// character) takes O(n log n) rather than the O(n^2) of rescanning the word
// for its best pair after every merge. A queued merge whose parts have
// since changed is skipped when it comes up.
func (m *bpe) merge(dst []uint32, word string) []uint32 {
	var partBuf [maxCachedWord]part
	var queueBuf [2 * maxCachedWord]pendingMerge // at most 2n pending at once: each merge pops one, pushes up to two
	var parts []part
	if len(word) <= maxCachedWord {
		parts = partBuf[:len(word)]
	} else {
		parts = make([]part, len(word))
	}
	for i := range parts {
		parts[i] = part{id: m.byteID[word[i]], prev: int32(i) - 1, next: int32(i) + 1}
	}
	parts[len(parts)-1].next = -1
	q := mergeQueue(queueBuf[:0])
	if len(word) > len(queueBuf) {
		q = make(mergeQueue, 0, len(word))
	}
	for i := 0; i+1 < len(parts); i++ {
		if res, ok := m.merges[uint64(parts[i].id)<<32|uint64(parts[i+1].id)]; ok {
			q = q[:len(q)+1] // the queue holds n entries or more
			q[len(q)-1] = pendingMerge{order: orderOf(res.rank, int32(i)), left: parts[i].id, right: parts[i+1].id}
		}
	}
	q.init()
	for len(q) > 0 {
		var c pendingMerge
		c, q = q.pop()
		pos := int32(c.order)
		at := &parts[pos]
		if at.id != c.left || at.next < 0 || parts[at.next].id != c.right {
			continue // stale: a part of this pair merged with another first
		}
		gone := &parts[at.next]
		gone.id = removedPart
		at.id, at.next = m.rankResult[c.order>>32], gone.next
		if at.next >= 0 {
			parts[at.next].prev = pos
		}
		if at.prev >= 0 {
			l := parts[at.prev].id
			if res, ok := m.merges[uint64(l)<<32|uint64(at.id)]; ok {
				q = q.push(pendingMerge{order: orderOf(res.rank, at.prev), left: l, right: at.id})
			}
		}
		if at.next >= 0 {
			r := parts[at.next].id
			if res, ok := m.merges[uint64(at.id)<<32|uint64(r)]; ok {
				q = q.push(pendingMerge{order: orderOf(res.rank, pos), left: at.id, right: r})
			}
		}
	}
	for i := int32(0); i >= 0; i = parts[i].next {
		dst = append(dst, parts[i].id)
	}
	return dst
}

// part is one token of a word being merged, linked to its neighbours by
// index (-1: none). A part merged into its left neighbour holds removedPart.
type part struct {
	id         uint32
	prev, next int32
}

// removedPart is no token's id.
const removedPart = ^uint32(0)

// pendingMerge is a merge of the part at a position and its next
// neighbour, valid while they still hold left and right. order is the
// merge's rank and then its position, so that one comparison orders two
// merges; the rank also names the merge's result (rankResult), which keeps
// an entry at 16 bytes.
type pendingMerge struct {
	order       uint64
	left, right uint32
}

func orderOf(rank uint32, pos int32) uint64 { return uint64(rank)<<32 | uint64(uint32(pos)) }

// mergeQueue is a 4-ary min-heap of pending merges: a long word's queue
// outgrows the CPU's caches, and four children side by side take half the
// levels of a binary heap and fewer cache lines. It is written out rather
// than through container/heap so that pushes and pops do not box.
type mergeQueue []pendingMerge

// init orders a queue filled by append, in O(n).
func (q mergeQueue) init() {
	for i := (len(q) - 2) / 4; i >= 0; i-- {
		q.down(i)
	}
}

// push adds x. It grows the queue itself, not through append, so that a
// short word's queue stays on the stack.
func (q mergeQueue) push(x pendingMerge) mergeQueue {
	if len(q) == cap(q) {
		q = append(make(mergeQueue, 0, 2*cap(q)+16), q...)
	}
	h := q[:len(q)+1]
	h[len(q)] = x
	i := len(h) - 1
	for i > 0 {
		p := (i - 1) / 4
		if h[i].order >= h[p].order {
			break
		}
		h[i], h[p] = h[p], h[i]
		i = p
	}
	return h
}

// pop takes the first merge out. The last entry, which moves into the
// hole, came from the bottom and most likely belongs near it: the hole goes
// down to a leaf first, by the smallest children alone, and the entry
// climbs back from there, which saves a comparison a level.
func (q mergeQueue) pop() (pendingMerge, mergeQueue) {
	top := q[0]
	n := len(q) - 1
	last := q[n]
	h := q[:n]
	if n == 0 {
		return top, h
	}
	i := 0
	for {
		first := 4*i + 1
		if first >= n {
			break
		}
		best := first
		for c := first + 1; c < min(first+4, n); c++ {
			if h[c].order < h[best].order {
				best = c
			}
		}
		h[i] = h[best]
		i = best
	}
	for i > 0 {
		p := (i - 1) / 4
		if last.order >= h[p].order {
			break
		}
		h[i] = h[p]
		i = p
	}
	h[i] = last
	return top, h
}

func (q mergeQueue) down(i int) {
	n := len(q)
	for {
		first := 4*i + 1
		if first >= n {
			return
		}
		best := first
		for c := first + 1; c < min(first+4, n); c++ {
			if q[c].order < q[best].order {
				best = c
			}
		}
		if q[best].order >= q[i].order {
			return
		}
		q[i], q[best] = q[best], q[i]
		i = best
	}
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
