package warm

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sync"
)

// Defaults of Config.
const (
	DefaultBlockSize   = 16
	DefaultMinTokens   = 1024
	DefaultRecent      = 4
	DefaultMaxPrefixes = 4
	DefaultMaxTokens   = 65536
	DefaultMaxModels   = 8
)

// Config bounds a Learner. Zero fields take the defaults.
type Config struct {
	// BlockSize is the engines' KV block size: a hot prefix is whole
	// blocks, since an engine caches nothing shorter (DefaultBlockSize).
	BlockSize int
	// MinTokens is the shortest common prefix worth a prefill
	// (DefaultMinTokens: 64 blocks, about 0.2 s of a 4090's prefill).
	MinTokens int
	// Recent is how many first prompts per model a new one is compared
	// with (DefaultRecent).
	Recent int
	// MaxPrefixes is how many hot prefixes a model keeps
	// (DefaultMaxPrefixes).
	MaxPrefixes int
	// MaxTokens caps a hot prefix and a remembered prompt
	// (DefaultMaxTokens).
	MaxTokens int
	// MaxModels is how many models are remembered (DefaultMaxModels).
	MaxModels int
}

func (c Config) withDefaults() Config {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&c.BlockSize, DefaultBlockSize)
	def(&c.MinTokens, DefaultMinTokens)
	def(&c.Recent, DefaultRecent)
	def(&c.MaxPrefixes, DefaultMaxPrefixes)
	def(&c.MaxTokens, DefaultMaxTokens)
	def(&c.MaxModels, DefaultMaxModels)
	c.MaxTokens -= c.MaxTokens % c.BlockSize
	return c
}

// Learner learns the hot prefixes of each model from its sessions' first
// prompts.
type Learner struct {
	cfg    Config
	mu     sync.Mutex
	seq    uint64 // observations, for recency
	models map[string]*model
}

type model struct {
	last   uint64     // when it was last observed or loaded
	recent [][]uint32 // ring of the latest first prompts, capped
	next   int        // next slot of recent to overwrite
	hot    []*prefix
}

type prefix struct {
	tokens []uint32
	last   uint64
}

// New returns a Learner that knows no prefix.
func New(cfg Config) *Learner {
	return &Learner{cfg: cfg.withDefaults(), models: make(map[string]*model)}
}

// Observe takes a session's first prompt for model and reports whether
// the hot prefixes changed (a caller that stores them saves then). It
// copies what it keeps of tokens.
func (l *Learner) Observe(modelName string, tokens []uint32) bool {
	bs := l.cfg.BlockSize
	if len(tokens) > l.cfg.MaxTokens {
		tokens = tokens[:l.cfg.MaxTokens]
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.seq++
	m := l.modelLocked(modelName)
	m.last = l.seq

	// The longest whole-block prefix shared with a recent first prompt.
	shared := 0
	for _, r := range m.recent {
		shared = max(shared, commonPrefix(r, tokens)/bs*bs)
	}
	changed := false
	covered := false
	for _, h := range m.hot {
		if len(h.tokens) <= len(tokens) && slices.Equal(h.tokens, tokens[:len(h.tokens)]) {
			h.last = l.seq // the prompt starts with it: still hot
		}
		if shared > 0 && len(h.tokens) >= shared && slices.Equal(h.tokens[:shared], tokens[:shared]) {
			covered = true // prefilling h computes the shared part too
		}
	}
	if shared >= l.cfg.MinTokens && !covered {
		// A hot prefix the new one extends is covered by it.
		m.hot = slices.DeleteFunc(m.hot, func(h *prefix) bool {
			return len(h.tokens) < shared && slices.Equal(h.tokens, tokens[:len(h.tokens)])
		})
		m.hot = append(m.hot, &prefix{tokens: slices.Clone(tokens[:shared]), last: l.seq})
		if len(m.hot) > l.cfg.MaxPrefixes {
			oldest := 0
			for i, h := range m.hot {
				if h.last < m.hot[oldest].last {
					oldest = i
				}
			}
			m.hot = slices.Delete(m.hot, oldest, oldest+1)
		}
		changed = true
	}
	keep := slices.Clone(tokens)
	if len(m.recent) < l.cfg.Recent {
		m.recent = append(m.recent, keep)
	} else {
		m.recent[m.next] = keep
		m.next = (m.next + 1) % len(m.recent)
	}
	return changed
}

// modelLocked returns model's state, making it, and forgetting the least
// recently observed model beyond MaxModels.
func (l *Learner) modelLocked(name string) *model {
	if m := l.models[name]; m != nil {
		return m
	}
	if len(l.models) >= l.cfg.MaxModels {
		var oldest string
		var at uint64
		first := true
		for n, m := range l.models {
			if first || m.last < at || (m.last == at && n < oldest) {
				oldest, at, first = n, m.last, false
			}
		}
		delete(l.models, oldest)
	}
	m := &model{}
	l.models[name] = m
	return m
}

// Hot returns model's hot prefixes, the most recently seen first. The
// slices are the Learner's: callers must not modify them.
func (l *Learner) Hot(modelName string) [][]uint32 {
	l.mu.Lock()
	defer l.mu.Unlock()
	m := l.models[modelName]
	if m == nil {
		return nil
	}
	hot := slices.Clone(m.hot)
	slices.SortStableFunc(hot, func(a, b *prefix) int {
		switch {
		case a.last > b.last:
			return -1
		case a.last < b.last:
			return 1
		}
		return 0
	})
	out := make([][]uint32, len(hot))
	for i, h := range hot {
		out[i] = h.tokens
	}
	return out
}

// commonPrefix is the length of the longest common prefix of a and b.
func commonPrefix(a, b []uint32) int {
	n := min(len(a), len(b))
	for i := range n {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}

// magic opens the binary form; version is its layout.
const (
	magic   = "HWRM"
	version = 1
	// maxNameBytes bounds a model name in the binary form.
	maxNameBytes = 1024
)

// ErrFormat is wrapped by every error of UnmarshalBinary.
var ErrFormat = errors.New("warm: bad hot-prefix data")

// MarshalBinary writes every model's hot prefixes, the most recently seen
// first, models in name order.
func (l *Learner) MarshalBinary() ([]byte, error) {
	l.mu.Lock()
	names := make([]string, 0, len(l.models))
	for n, m := range l.models {
		if len(m.hot) > 0 {
			names = append(names, n)
		}
	}
	l.mu.Unlock()
	slices.Sort(names)
	out := append([]byte(magic), version)
	out = binary.AppendUvarint(out, uint64(len(names)))
	for _, n := range names {
		hot := l.Hot(n)
		out = binary.AppendUvarint(out, uint64(len(n)))
		out = append(out, n...)
		out = binary.AppendUvarint(out, uint64(len(hot)))
		for _, h := range hot {
			out = binary.AppendUvarint(out, uint64(len(h)))
			for _, t := range h {
				out = binary.AppendUvarint(out, uint64(t))
			}
		}
	}
	return out, nil
}

// UnmarshalBinary replaces the Learner's hot prefixes with data's (what
// MarshalBinary wrote); the recent prompts are kept. Prefixes beyond the
// Learner's bounds, or not whole blocks, are an error, and on any error
// the Learner is unchanged.
func (l *Learner) UnmarshalBinary(data []byte) error {
	rd := reader{b: data}
	if len(data) < len(magic)+1 || string(data[:len(magic)]) != magic {
		return fmt.Errorf("%w: no %q header", ErrFormat, magic)
	}
	if v := data[len(magic)]; v != version {
		return fmt.Errorf("%w: version %d, want %d", ErrFormat, v, version)
	}
	rd.b = data[len(magic)+1:]
	nModels, err := rd.count("models", l.cfg.MaxModels)
	if err != nil {
		return err
	}
	loaded := make(map[string][][]uint32, nModels)
	for range nModels {
		nameLen, err := rd.count("model name bytes", maxNameBytes)
		if err != nil {
			return err
		}
		if len(rd.b) < nameLen {
			return fmt.Errorf("%w: model name cut short", ErrFormat)
		}
		name := string(rd.b[:nameLen])
		rd.b = rd.b[nameLen:]
		if _, dup := loaded[name]; dup {
			return fmt.Errorf("%w: model %q twice", ErrFormat, name)
		}
		nPrefixes, err := rd.count("prefixes", l.cfg.MaxPrefixes)
		if err != nil {
			return err
		}
		prefixes := make([][]uint32, 0, nPrefixes)
		for range nPrefixes {
			n, err := rd.count("prefix tokens", l.cfg.MaxTokens)
			if err != nil {
				return err
			}
			if n == 0 || n%l.cfg.BlockSize != 0 {
				return fmt.Errorf("%w: a prefix of %d tokens is not whole blocks of %d", ErrFormat, n, l.cfg.BlockSize)
			}
			// Each token takes at least one byte: check before allocating.
			if len(rd.b) < n {
				return fmt.Errorf("%w: prefix cut short", ErrFormat)
			}
			toks := make([]uint32, n)
			for i := range toks {
				v, err := rd.uvarint()
				if err != nil {
					return err
				}
				if v > 1<<32-1 {
					return fmt.Errorf("%w: token id %d out of range", ErrFormat, v)
				}
				toks[i] = uint32(v)
			}
			prefixes = append(prefixes, toks)
		}
		loaded[name] = prefixes
	}
	if len(rd.b) != 0 {
		return fmt.Errorf("%w: %d bytes after the end", ErrFormat, len(rd.b))
	}

	l.mu.Lock()
	defer l.mu.Unlock()
	for _, m := range l.models {
		m.hot = nil
	}
	names := make([]string, 0, len(loaded))
	for n := range loaded {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		prefixes := loaded[n]
		m := l.modelLocked(n)
		// Written most recent first: the first read is the most recent.
		for i, toks := range prefixes {
			m.hot = append(m.hot, &prefix{tokens: toks, last: l.seq + uint64(len(prefixes)-i)})
		}
		l.seq += uint64(len(prefixes))
		m.last = l.seq
	}
	return nil
}

// reader reads uvarints from b.
type reader struct{ b []byte }

func (r *reader) uvarint() (uint64, error) {
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		return 0, fmt.Errorf("%w: bad number", ErrFormat)
	}
	r.b = r.b[n:]
	return v, nil
}

// count reads a count and checks it against limit.
func (r *reader) count(what string, limit int) (int, error) {
	v, err := r.uvarint()
	if err != nil {
		return 0, err
	}
	if v > uint64(limit) {
		return 0, fmt.Errorf("%w: %d %s, at most %d", ErrFormat, v, what, limit)
	}
	return int(v), nil
}
