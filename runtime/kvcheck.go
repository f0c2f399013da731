package runtime

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hearth-llm/hearth/kvevents"
	"github.com/hearth-llm/hearth/tokenizer"
)

// The start-up KV-event self-check: once an engine serves (and its
// tokenization agrees with Hearth's), Hearth sends it a short probe prompt
// of its own, no user's, in two requests (the first blocks, then the whole
// prompt, so that the second request's blocks chain from the first's by
// the engine's parent hash), and reads the engine's KV events meanwhile.
// The router indexes an engine's cache by following those events: their
// layout decoded, each block's tokens hashed and chained to its parent,
// blocks of Hearth's size on the GPU. Where any of that fails (a field
// order Hearth does not know, parent hashes that name no stored block,
// other block sizes or media, no events at all) every prediction misses
// without a word; the check makes that loud, and the fleet then routes the
// engine on predicted caches instead.

// KVEventsState is the outcome of the KV-event self-check.
type KVEventsState string

const (
	// KVEventsNotChecked: no check ran (no events published, no
	// tokenizer, a tokenization that already differs, or the engine is not
	// ready yet).
	KVEventsNotChecked KVEventsState = ""
	// KVEventsMatch: every probe block was named as Hearth predicts.
	KVEventsMatch KVEventsState = "match"
	// KVEventsDiffer: some probe block was not; KVEventsCheck says which
	// first, and why.
	KVEventsDiffer KVEventsState = "differs"
	// KVEventsUnchecked: the probe could not be sent or the events not
	// read; Detail says why. The engine keeps its KV events.
	KVEventsUnchecked KVEventsState = "unchecked"
)

// KVEventsCheck is what the KV-event self-check found.
type KVEventsCheck struct {
	State KVEventsState
	// Matched of Blocks probe blocks were stored, in the engine's events,
	// under the hashes Hearth predicts for the probe's tokens.
	Matched, Blocks int
	// FirstDifference is the first probe block not matched (-1: none),
	// and Cause what the events said of it instead.
	FirstDifference int
	Cause           string
	// Detail is why the check could not run (KVEventsUnchecked).
	Detail string
}

// String is the check in one sentence.
func (c KVEventsCheck) String() string {
	switch c.State {
	case KVEventsMatch:
		return fmt.Sprintf("KV events: %d of %d probe blocks matched", c.Matched, c.Blocks)
	case KVEventsDiffer:
		return fmt.Sprintf("KV events: %d of %d probe blocks matched; first difference at block %d: %s; "+
			"the engine is routed on predicted caches, not on its KV events", c.Matched, c.Blocks, c.FirstDifference, c.Cause)
	case KVEventsUnchecked:
		return "KV events: not checked: " + c.Detail
	}
	return "not checked"
}

// KVEventStream is an engine's KV-event publisher as the check reads it:
// the payload of each message, in order. Next blocks until a message
// arrives and fails once Close was called (from any goroutine).
type KVEventStream interface {
	Next() (payload []byte, err error)
	Close() error
}

// KVEventTap subscribes to topic on an engine's KV-event endpoint. The
// daemon gives one over ZMQ (router/ingest.DialTap); package runtime opens
// no ZMQ socket of its own.
type KVEventTap func(ctx context.Context, endpoint, topic string) (KVEventStream, error)

// KVProbe is one run of the check against an engine.
type KVProbe struct {
	BaseURL, Model string
	// Events is the engine's stream, subscribed before the probe is sent;
	// the check closes it.
	Events KVEventStream
	// Format is the layout the engine's release publishes.
	Format kvevents.Format
	// Tokens is the probe prompt, whole blocks of BlockSize tokens; Split
	// is how many blocks the first request sends.
	Tokens    []uint32
	BlockSize int
	Split     int
	// Wait bounds each wait for events: for the first batch after the
	// subscription, and for the probe's once both requests were answered.
	Wait time.Duration
}

// KVProbeBlocks is the length of the probe prompt in blocks, and
// KVProbeSplit how many of them the first request sends.
const (
	KVProbeBlocks = 12
	KVProbeSplit  = 4
)

// DefaultKVCheckWait bounds each of the check's two waits (KVProbe.Wait):
// an engine publishes a step's events as the step ends, well within it,
// so only an engine whose events never come waits it out, twice.
const DefaultKVCheckWait = 10 * time.Second

// KVProbeTokens is a probe prompt of blocks blocks of blockSize tokens in
// tok's tokenization, unique to nonce so that no cache can hold it yet.
func KVProbeTokens(tok interface{ Encode(string) []uint32 }, nonce string, blocks, blockSize int) []uint32 {
	want := blocks * blockSize
	var text strings.Builder
	fmt.Fprintf(&text, "Hearth KV-event probe %s.", nonce)
	var ids []uint32
	for i := 1; ; i++ {
		fmt.Fprintf(&text, " Line %d of the probe names block %d of %d.", i, i%blocks, blocks)
		if ids = tok.Encode(text.String()); len(ids) >= want {
			return ids[:want]
		}
	}
}

// CheckKVEvents runs the probe and judges the events that arrive for it.
func CheckKVEvents(ctx context.Context, client *http.Client, p KVProbe) KVEventsCheck {
	blocks := len(p.Tokens) / p.BlockSize
	if blocks == 0 || p.Split <= 0 || p.Split >= blocks {
		return KVEventsCheck{State: KVEventsUnchecked, Detail: fmt.Sprintf("a probe of %d tokens cannot be split at block %d", len(p.Tokens), p.Split)}
	}
	want := tokenizer.BlockHashes(p.Tokens, p.BlockSize)
	seen := newKVProbeView(p.Format, p.Tokens, p.BlockSize, want)
	readDone, arrived := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(readDone)
		first := true
		for {
			payload, err := p.Events.Next()
			if err != nil {
				return
			}
			if first {
				close(arrived)
				first = false
			}
			if seen.add(payload) {
				return
			}
		}
	}()
	defer func() {
		p.Events.Close()
		<-readDone
	}()

	// A subscription takes effect at the publisher a moment after it is
	// sent, and ZMQ says nothing when it has: a batch that arrives is the
	// sign. So a request of one block of other tokens (the probe's first
	// block reversed) goes first, and the probe once its events arrived:
	// from then on the stream misses nothing the engine publishes.
	sync := slices.Clone(p.Tokens[:p.BlockSize])
	slices.Reverse(sync)
	if err := completeTokens(ctx, client, p.BaseURL, p.Model, sync); err != nil {
		return KVEventsCheck{State: KVEventsUnchecked, Detail: "the probe request: " + err.Error()}
	}
	timer := time.NewTimer(p.Wait)
	defer timer.Stop()
	select {
	case <-arrived:
	case <-readDone:
	case <-timer.C:
	case <-ctx.Done():
		return KVEventsCheck{State: KVEventsUnchecked, Detail: ctx.Err().Error()}
	}
	for _, prompt := range [][]uint32{p.Tokens[:p.Split*p.BlockSize], p.Tokens} {
		if err := completeTokens(ctx, client, p.BaseURL, p.Model, prompt); err != nil {
			return KVEventsCheck{State: KVEventsUnchecked, Detail: "the probe request: " + err.Error()}
		}
	}
	timer.Reset(p.Wait)
	select {
	case <-readDone:
	case <-timer.C:
	case <-ctx.Done():
		return KVEventsCheck{State: KVEventsUnchecked, Detail: ctx.Err().Error()}
	}
	p.Events.Close()
	<-readDone
	return seen.judge(p.Wait)
}

// completeTokens sends prompt, as token ids, to the engine's
// /v1/completions for one output token: both engines take a prompt of
// token ids there.
func completeTokens(ctx context.Context, client *http.Client, baseURL, model string, prompt []uint32) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	body, err := json.Marshal(map[string]any{"model": model, "prompt": prompt, "max_tokens": 1, "temperature": 0})
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimSuffix(baseURL, "/")+"/v1/completions", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("POST /v1/completions: %w", err)
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("POST /v1/completions: %s: %s", resp.Status, bytes.TrimSpace(answer[:min(len(answer), 300)]))
	}
	return nil
}

// kvProbeView is what the events said of the probe's blocks so far: the
// chain Hearth rebuilds from them, as the router's ingest does, and what
// set apart the events that did not chain.
type kvProbeView struct {
	mu        sync.Mutex
	dec       kvevents.Decoder
	batch     kvevents.Batch
	probe     []uint32
	blockSize int
	want      []tokenizer.SeqHash
	hasher    tokenizer.Hasher

	bySeq     map[tokenizer.SeqHash]bool // the chained blocks stored on the GPU
	seqOf     map[uint64]tokenizer.SeqHash
	matched   int
	batches   int
	decodeErr error
	// For the explanation of a block not matched: the first block of
	// each event that could not be chained (its tokens, what was wrong),
	// the block sizes and media seen.
	unchained []unchainedBlock
	sizes     []int
	media     []kvevents.Medium
	// otherGroups: some events stored blocks of KV-cache groups the
	// router does not index, which were not counted.
	otherGroups bool
}

type unchainedBlock struct {
	tokens []uint32
	why    string
}

func newKVProbeView(format kvevents.Format, probe []uint32, blockSize int, want []tokenizer.SeqHash) *kvProbeView {
	return &kvProbeView{
		dec: kvevents.Decoder{Format: format}, probe: probe, blockSize: blockSize, want: want, hasher: tokenizer.NewHasher(""),
		bySeq: map[tokenizer.SeqHash]bool{}, seqOf: map[uint64]tokenizer.SeqHash{},
	}
}

// add takes in one payload; it reports whether every probe block has
// been matched.
func (v *kvProbeView) add(payload []byte) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.batches++
	if err := v.dec.Decode(payload, &v.batch); err != nil {
		if v.decodeErr == nil {
			v.decodeErr = err
		}
		return false
	}
	for i := range v.batch.Events {
		v.stored(&v.batch.Events[i])
	}
	v.matched = 0
	for _, h := range v.want {
		if v.bySeq[h] {
			v.matched++
		}
	}
	return v.matched == len(v.want)
}

func (v *kvProbeView) stored(ev *kvevents.Event) {
	if ev.Kind != kvevents.BlockStored || len(ev.BlockHashes) == 0 || len(ev.TokenIDs) == 0 {
		return
	}
	if !ev.InPrefixGroup() {
		// A hybrid model's other groups (sliding window, Mamba) are
		// not indexed by the router: their blocks matching must not
		// hide a full-attention group that does not.
		v.otherGroups = true
		return
	}
	bs := ev.BlockSize
	if bs == 0 {
		bs = len(ev.TokenIDs) / len(ev.BlockHashes)
	}
	if !slices.Contains(v.sizes, bs) {
		v.sizes = append(v.sizes, bs)
	}
	if !slices.Contains(v.media, ev.Medium) {
		v.media = append(v.media, ev.Medium)
	}
	first := ev.TokenIDs[:min(len(ev.TokenIDs), v.blockSize)]
	switch {
	case ev.Medium != kvevents.MediumGPU, bs != v.blockSize, len(ev.TokenIDs) != bs*len(ev.BlockHashes):
		return // said in judge, from sizes and media
	case ev.HasParent:
		if _, ok := v.seqOf[ev.ParentBlockHash]; !ok {
			v.unchained = append(v.unchained, unchainedBlock{tokens: slices.Clone(first),
				why: fmt.Sprintf("its event names parent hash %#x, which no block the engine stored has: a hash chain Hearth cannot follow", ev.ParentBlockHash)})
			return
		}
	}
	var parent tokenizer.SeqHash
	if ev.HasParent {
		parent = v.seqOf[ev.ParentBlockHash]
	}
	for i, eh := range ev.BlockHashes {
		local := v.hasher.LocalHash(ev.TokenIDs[i*bs : (i+1)*bs])
		var s tokenizer.SeqHash
		if i == 0 && !ev.HasParent {
			s = tokenizer.SeqHash(tokenizer.MixSalt(local, ev.CacheSalt))
		} else {
			s = tokenizer.Chain(parent, local)
		}
		v.seqOf[eh], v.bySeq[s], parent = s, true, s
	}
}

// judge says what the events came to after a wait of wait.
func (v *kvProbeView) judge(wait time.Duration) KVEventsCheck {
	v.mu.Lock()
	defer v.mu.Unlock()
	c := KVEventsCheck{State: KVEventsMatch, Matched: v.matched, Blocks: len(v.want), FirstDifference: -1}
	for i, h := range v.want {
		if !v.bySeq[h] {
			c.State, c.FirstDifference = KVEventsDiffer, i
			break
		}
	}
	if c.State == KVEventsMatch {
		return c
	}
	c.Cause = v.cause(c.FirstDifference, wait)
	return c
}

// cause explains why probe block i was not matched.
func (v *kvProbeView) cause(i int, wait time.Duration) string {
	switch {
	case v.batches == 0:
		return fmt.Sprintf("no KV events arrived within %s of the probe", wait)
	case v.decodeErr != nil && len(v.sizes) == 0:
		return fmt.Sprintf("the events do not decode as the %s layout (%v): a field order Hearth does not know", v.dec.Format, v.decodeErr)
	}
	for _, u := range v.unchained {
		if slices.Equal(u.tokens, v.probeBlock(i)) {
			return u.why
		}
	}
	if len(v.unchained) > 0 {
		return v.unchained[0].why
	}
	if !slices.Contains(v.sizes, v.blockSize) && len(v.sizes) > 0 {
		return fmt.Sprintf("the events store blocks of %v tokens, Hearth hashes blocks of %d", v.sizes, v.blockSize)
	}
	if !slices.Contains(v.media, kvevents.MediumGPU) && len(v.media) > 0 {
		return fmt.Sprintf("the events store blocks in %v, none on the GPU", v.media)
	}
	if v.decodeErr != nil {
		return fmt.Sprintf("some events do not decode as the %s layout (%v)", v.dec.Format, v.decodeErr)
	}
	if v.otherGroups && len(v.sizes) == 0 {
		return "the events store blocks only in KV-cache groups other than full attention, which the router does not index"
	}
	return "no event stored a block with its tokens under the hash chain Hearth predicts"
}

// probeBlock is the tokens of probe block i.
func (v *kvProbeView) probeBlock(i int) []uint32 {
	if i < 0 || (i+1)*v.blockSize > len(v.probe) {
		return nil
	}
	return v.probe[i*v.blockSize : (i+1)*v.blockSize]
}

// checkKVEvents runs the self-check of a ready engine that publishes KV
// events, when the daemon gave a tap and a tokenizer, and says what it
// found in the log.
func (s *Supervisor) checkKVEvents(ctx context.Context, spec Spec, ep Endpoints, tokens TokenizerCheck, log *slog.Logger) KVEventsCheck {
	if s.cfg.KVEventTap == nil || s.cfg.Tokenizer == nil || ep.KVEvents == "" || tokens.State == TokenizerDiffers {
		return KVEventsCheck{}
	}
	tok := s.cfg.Tokenizer(spec)
	if tok == nil {
		return KVEventsCheck{}
	}
	release, _ := spec.Release()
	stream, err := s.cfg.KVEventTap(ctx, ep.KVEvents, ep.Topic)
	var c KVEventsCheck
	if err != nil {
		c = KVEventsCheck{State: KVEventsUnchecked, Detail: fmt.Sprintf("subscribing to %s: %v", ep.KVEvents, err)}
	} else {
		nonce := fmt.Sprintf("%s %d", spec.Name, time.Now().UnixNano())
		c = CheckKVEvents(ctx, s.cfg.HTTPClient, KVProbe{
			BaseURL: ep.BaseURL, Model: spec.Model, Events: stream, Format: release.EventFormat,
			Tokens:    KVProbeTokens(tok, nonce, KVProbeBlocks, tokenizer.DefaultBlockSize),
			BlockSize: tokenizer.DefaultBlockSize, Split: KVProbeSplit, Wait: s.cfg.KVCheckWait,
		})
	}
	switch c.State {
	case KVEventsDiffer:
		log.Warn("engine's KV events do not name the probe's blocks as Hearth predicts; routing it on predicted caches",
			"matched", c.Matched, "blocks", c.Blocks, "first_difference", c.FirstDifference, "cause", c.Cause)
	case KVEventsUnchecked:
		log.Warn("engine's KV events not checked", "reason", c.Detail)
	default:
		log.Info("engine's KV events match Hearth's hashes", "blocks", c.Blocks)
	}
	return c
}
