package bench

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"time"

	"github.com/hearth-llm/hearth/tokenizer"
)

// TraceBlockTokens is how many tokens one Mooncake hash id stands for.
const TraceBlockTokens = 512

// subBlocks is how many KV blocks of the router's size one trace block
// expands into.
const subBlocks = TraceBlockTokens / tokenizer.DefaultBlockSize

// TraceRecord is one request of a Mooncake-format trace.
type TraceRecord struct {
	// Line is the record's 1-based line in its file.
	Line int
	// Timestamp is when the request arrived, since the start of the trace.
	Timestamp time.Duration
	// InputLength is the prompt's length in tokens.
	InputLength int
	// OutputLength is the number of tokens generated.
	OutputLength int
	// HashIDs names the prompt's content, one id per 512-token block; equal
	// ids mean equal content and equal prefix (ids are prefix-chained). The
	// last block is partial: InputLength decides how many of its tokens the
	// prompt has.
	HashIDs []uint32
}

// ErrBadTrace is wrapped by every error about a trace's content.
var ErrBadTrace = errors.New("bad trace")

// Limits of a trace record, so that nothing later overflows.
const (
	maxTraceTimestampMS = 1e9 // about 11.5 days
	maxTraceLine        = 16 << 20
)

// traceLine is a record as written: pointers tell a missing field from zero.
type traceLine struct {
	Timestamp    *float64 `json:"timestamp"`
	InputLength  *int     `json:"input_length"`
	OutputLength *int     `json:"output_length"`
	HashIDs      []int64  `json:"hash_ids"`
}

// ReadTrace reads a Mooncake-format trace: one JSON object per line with
// timestamp (milliseconds since the start), input_length, output_length
// and hash_ids. Blank lines are skipped, unknown fields ignored. Every
// record must be consistent: its last block holds between 1 and 512 of its
// tokens. An output_length of 0 is kept; the request will still ask for
// one token (see Trace).
func ReadTrace(r io.Reader) ([]TraceRecord, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), maxTraceLine)
	var recs []TraceRecord
	for line := 1; sc.Scan(); line++ {
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 {
			continue
		}
		rec, err := parseTraceLine(b)
		if err != nil {
			return nil, fmt.Errorf("bench: trace line %d: %w", line, err)
		}
		rec.Line = line
		recs = append(recs, rec)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("bench: read trace: %w", err)
	}
	return recs, nil
}

func parseTraceLine(b []byte) (TraceRecord, error) {
	var l traceLine
	if err := json.Unmarshal(b, &l); err != nil {
		return TraceRecord{}, fmt.Errorf("%w: %w", ErrBadTrace, err)
	}
	switch {
	case l.Timestamp == nil || l.InputLength == nil || l.OutputLength == nil || l.HashIDs == nil:
		return TraceRecord{}, fmt.Errorf("%w: want timestamp, input_length, output_length and hash_ids", ErrBadTrace)
	case !(*l.Timestamp >= 0 && *l.Timestamp <= maxTraceTimestampMS): // also false for NaN
		return TraceRecord{}, fmt.Errorf("%w: timestamp %v out of [0, %v] ms", ErrBadTrace, *l.Timestamp, maxTraceTimestampMS)
	case *l.OutputLength < 0 || *l.OutputLength > maxTokens:
		return TraceRecord{}, fmt.Errorf("%w: output_length %d out of [0, %d]", ErrBadTrace, *l.OutputLength, maxTokens)
	case *l.InputLength < 1 || *l.InputLength > maxTokens:
		return TraceRecord{}, fmt.Errorf("%w: input_length %d out of [1, %d]", ErrBadTrace, *l.InputLength, maxTokens)
	}
	n := len(l.HashIDs)
	if in := *l.InputLength; in <= (n-1)*TraceBlockTokens || in > n*TraceBlockTokens {
		return TraceRecord{}, fmt.Errorf("%w: input_length %d does not fit %d blocks of %d tokens",
			ErrBadTrace, in, n, TraceBlockTokens)
	}
	ids := make([]uint32, n)
	for i, id := range l.HashIDs {
		if id < 0 || id > math.MaxUint32 {
			return TraceRecord{}, fmt.Errorf("%w: hash id %d out of [0, 2^32)", ErrBadTrace, id)
		}
		ids[i] = uint32(id)
	}
	return TraceRecord{
		Timestamp:    time.Duration(math.Round(*l.Timestamp * float64(time.Millisecond))),
		InputLength:  *l.InputLength,
		OutputLength: *l.OutputLength,
		HashIDs:      ids,
	}, nil
}

// ReadTraceFile reads a trace file (see ReadTrace).
func ReadTraceFile(path string) ([]TraceRecord, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	defer f.Close()
	recs, err := ReadTrace(f)
	if err != nil {
		return nil, fmt.Errorf("%w (%s)", err, path)
	}
	return recs, nil
}

// AppendBlockTokens appends the first n (at most 512) tokens of the
// synthetic content of trace block id to dst. The 512 tokens are 32 blocks
// of 16: each starts with five tokens that encode (id, position) through a
// bijection, and the remaining eleven are pseudo-random from (seed, id), so
// that equal ids always give equal tokens and any two different ids, or
// positions, give different 16-token blocks, never a chance collision.
func AppendBlockTokens(dst []uint32, id uint32, n int, seed uint64) []uint32 {
	n = min(max(n, 0), TraceBlockTokens)
	r := NewRand(deriveSeed(seed, labelBlock, uint64(id)))
	key := permute32(id ^ uint32(deriveSeed(seed, labelBlock)))
	posMask := byte(r.Uint64())
	var blk [tokenizer.DefaultBlockSize]uint32
	for s := 0; n > 0; s++ {
		blk[0] = vocabulary[byte(key)].id
		blk[1] = vocabulary[byte(key>>8)].id
		blk[2] = vocabulary[byte(key>>16)].id
		blk[3] = vocabulary[byte(key>>24)].id
		blk[4] = vocabulary[byte(s)^posMask].id
		fillTokens(blk[5:], r)
		k := min(n, len(blk))
		dst = append(dst, blk[:k]...)
		n -= k
	}
	return dst
}

// permute32 is a bijection on 32 bits that scatters nearby ids (the
// finaliser of MurmurHash3: xor-shifts and odd multiplications).
func permute32(x uint32) uint32 {
	x ^= x >> 16
	x *= 0x85ebca6b
	x ^= x >> 13
	x *= 0xc2b2ae35
	x ^= x >> 16
	return x
}

// Tokens expands the record's hash ids into its prompt: InputLength token
// ids, 512 per id, the last id cut short.
func (rec *TraceRecord) Tokens(seed uint64) []uint32 {
	toks := make([]uint32, 0, rec.InputLength)
	left := rec.InputLength
	for _, id := range rec.HashIDs {
		n := min(left, TraceBlockTokens)
		toks = AppendBlockTokens(toks, id, n, seed)
		left -= n
	}
	return toks
}

// TraceConfig says how to replay a trace.
type TraceConfig struct {
	// Path is the trace's file, for the report only.
	Path string
	// Speed scales the pace: timestamps are divided by it. Default 1;
	// valid from 0.001 to 1e6.
	Speed float64
	// Seed makes the synthetic tokens of the block ids.
	Seed uint64
	// Limit replays only the first Limit requests in time order (0: all).
	Limit int
	// Duration replays only the requests that fall due before it, after
	// scaling (0: all).
	Duration time.Duration
}

// WithDefaults returns c with every zero field set to its default.
func (c TraceConfig) WithDefaults() TraceConfig {
	if c.Speed == 0 {
		c.Speed = 1
	}
	return c
}

// Validate checks a config after WithDefaults.
func (c TraceConfig) Validate() error {
	switch {
	case !(c.Speed >= 0.001 && c.Speed <= 1e6):
		return fmt.Errorf("bench: trace: %w: speed %v out of [0.001, 1e6]", ErrBadConfig, c.Speed)
	case c.Limit < 0:
		return fmt.Errorf("bench: trace: %w: limit %d is negative", ErrBadConfig, c.Limit)
	case c.Duration < 0:
		return fmt.Errorf("bench: trace: %w: duration %v is negative", ErrBadConfig, c.Duration)
	}
	return nil
}

// Trace is the trace workload: every record is one single-turn request,
// due at its timestamp divided by Speed, whatever happened to the others
// (open loop). Its prompt is one user segment of the expanded block ids;
// it asks for exactly output_length tokens (at least one). It is immutable
// and safe for concurrent use.
type Trace struct {
	cfg  TraceConfig
	recs []TraceRecord // in replay order
	due  []time.Duration
}

var _ Workload = (*Trace)(nil)

// NewTrace returns the workload that replays recs (which it keeps; do not
// modify them) as cfg says.
func NewTrace(recs []TraceRecord, cfg TraceConfig) (*Trace, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	order := slices.Clone(recs)
	slices.SortStableFunc(order, func(a, b TraceRecord) int {
		return cmp.Compare(a.Timestamp, b.Timestamp)
	})
	if cfg.Limit > 0 && len(order) > cfg.Limit {
		order = order[:cfg.Limit]
	}
	t := &Trace{cfg: cfg, due: make([]time.Duration, 0, len(order))}
	for _, rec := range order {
		due := time.Duration(math.Round(float64(rec.Timestamp) / cfg.Speed))
		if cfg.Duration > 0 && due >= cfg.Duration {
			break
		}
		t.recs = append(t.recs, rec)
		t.due = append(t.due, due)
	}
	return t, nil
}

// Config returns the effective config, defaults filled in.
func (t *Trace) Config() TraceConfig { return t.cfg }

// Kind returns "trace".
func (t *Trace) Kind() string { return "trace" }

// Len returns how many requests the replay sends.
func (t *Trace) Len() int { return len(t.recs) }

// Span returns when the last request falls due.
func (t *Trace) Span() time.Duration {
	if len(t.due) == 0 {
		return 0
	}
	return t.due[len(t.due)-1]
}

// Request returns the i-th request of the replay (0-based, in time order),
// its prompt expanded afresh.
func (t *Trace) Request(i int) *Request {
	rec := &t.recs[i]
	prompt := rec.Tokens(t.cfg.Seed)
	return &Request{
		Session:      fmt.Sprintf("t%06d", rec.Line),
		Due:          t.due[i],
		Prompt:       prompt,
		Segments:     []Segment{{Role: RoleUser, Start: 0, End: len(prompt)}},
		OutputTokens: max(rec.OutputLength, 1),
		Last:         true,
	}
}

// MarshalJSON writes the config, the number of requests and the replay's
// span with "kind": "trace", the workload object of the JSON report.
func (t *Trace) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Kind     string  `json:"kind"`
		Path     string  `json:"path"`
		Speed    float64 `json:"speed"`
		Seed     uint64  `json:"seed"`
		Limit    int     `json:"limit"`
		Duration string  `json:"duration"`
		Requests int     `json:"requests"`
		Span     string  `json:"span"`
	}{"trace", t.cfg.Path, t.cfg.Speed, t.cfg.Seed, t.cfg.Limit, t.cfg.Duration.String(), t.Len(), t.Span().String()})
}

// NewDriver returns an open-loop driver over the replay.
func (t *Trace) NewDriver() Driver {
	return &traceDriver{t: t, inflight: make(map[*Request]struct{})}
}

type traceDriver struct {
	t        *Trace
	next     int
	inflight map[*Request]struct{}
}

func (d *traceDriver) Next(now time.Duration) *Request {
	if d.next >= len(d.t.due) || d.t.due[d.next] > now {
		return nil
	}
	req := d.t.Request(d.next)
	d.next++
	d.inflight[req] = struct{}{}
	return req
}

func (d *traceDriver) Wake() (time.Duration, bool) {
	if d.next >= len(d.t.due) {
		return 0, false
	}
	return d.t.due[d.next], true
}

func (d *traceDriver) Complete(req *Request, _ time.Duration, _ bool) {
	delete(d.inflight, req)
}

func (d *traceDriver) Finished() bool {
	return d.next >= len(d.t.due) && len(d.inflight) == 0
}
