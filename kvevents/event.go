package kvevents

import "time"

// Kind is the class of one KV-cache event.
type Kind uint8

// The event classes. KindUnknown is a class this package does not know;
// decoding keeps such an event (with no fields) so that consumers can count
// it.
const (
	KindUnknown Kind = iota
	BlockStored
	BlockRemoved
	AllBlocksCleared
)

// String returns the class name as the engines write it in the event's tag.
func (k Kind) String() string {
	switch k {
	case BlockStored:
		return "BlockStored"
	case BlockRemoved:
		return "BlockRemoved"
	case AllBlocksCleared:
		return "AllBlocksCleared"
	}
	return "Unknown"
}

func kindByName(name []byte) Kind {
	switch string(name) {
	case "BlockStored":
		return BlockStored
	case "BlockRemoved":
		return BlockRemoved
	case "AllBlocksCleared":
		return AllBlocksCleared
	}
	return KindUnknown
}

// Medium is where the blocks of an event are stored. The zero value is the
// GPU, which is also what a missing or nil medium means.
type Medium uint8

// The media engines name in their events.
const (
	MediumGPU  Medium = iota // device memory
	MediumCPU                // host memory
	MediumDisk               // storage below host memory
	// MediumExternal is SGLang's "EXTERNAL": a shared or remote pool
	// (Mooncake, for one) below its disk tier, which the engine loads from
	// but nothing on the node can read itself.
	MediumExternal
	MediumUnknown // a name this package does not know
)

// String returns the medium's name as vLLM writes it.
func (m Medium) String() string {
	switch m {
	case MediumGPU:
		return "GPU"
	case MediumCPU:
		return "CPU"
	case MediumDisk:
		return "DISK"
	case MediumExternal:
		return "EXTERNAL"
	}
	return "UNKNOWN"
}

// sglangName returns the medium's name as SGLang writes it, the values of
// its StorageMedium enum: "GPU", "CPU_PINNED", "DISK", "EXTERNAL".
func (m Medium) sglangName() string {
	if m == MediumCPU {
		return "CPU_PINNED"
	}
	return m.String()
}

// ParseMedium maps a medium name from an event to a Medium, ignoring case.
// The empty name is the GPU. Names of the host tier: vLLM's "CPU", SGLang's
// "CPU_PINNED", and the aliases "CPU_TIER", "RAM" and "HOST"; of the
// storage tier: "DISK" (both engines), "STORAGE", "SSD" and "NVME";
// SGLang's "EXTERNAL" is MediumExternal. Anything else is MediumUnknown.
func ParseMedium(name string) Medium {
	return parseMedium([]byte(name))
}

func parseMedium(name []byte) Medium {
	if m, ok := mediumByName(name); ok {
		return m
	}
	// Not an exact upper-case name: fold the case into a fixed buffer, so
	// that parsing never allocates. No known name is longer.
	var buf [16]byte
	if len(name) > len(buf) {
		return MediumUnknown
	}
	up := buf[:len(name)]
	for i, c := range name {
		if 'a' <= c && c <= 'z' {
			c -= 'a' - 'A'
		}
		up[i] = c
	}
	m, _ := mediumByName(up)
	return m
}

func mediumByName(name []byte) (Medium, bool) {
	switch string(name) {
	case "", "GPU", "CUDA":
		return MediumGPU, true
	case "CPU", "CPU_PINNED", "CPU_TIER", "RAM", "HOST":
		return MediumCPU, true
	case "DISK", "STORAGE", "SSD", "NVME":
		return MediumDisk, true
	case "EXTERNAL":
		return MediumExternal, true
	}
	return MediumUnknown, false
}

// Event is one KV-cache event. The same type is what the encoder writes and
// what the decoder fills; fields a class does not have are ignored when
// writing it.
//
// In a decoded event, the slices point into buffers the Decoder reuses or
// into the payload, so the event is valid only until the next Decode call
// and while the payload is unchanged.
type Event struct {
	Kind Kind
	// BlockHashes are the engine's own ids of the blocks, opaque keys (see
	// the package documentation for how int and bytes hashes map to them).
	BlockHashes []uint64
	// BytesHashes reports that the engine sends the hashes (block and
	// parent) as bytes rather than ints: vLLM's offloading connector
	// always, vLLM's GPU cache with VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES=0.
	// The keys are the same either way (BytesHashKey); the Decoder sets it
	// so that a consumer can tell, and AppendBatch writes such an event's
	// hashes as vLLM's 32-byte digests whose keys they are (vLLM formats
	// only: SGLang sends ints).
	BytesHashes bool
	// ParentBlockHash is the engine hash of the block before the first,
	// when HasParent; a request's first block has none.
	ParentBlockHash uint64
	HasParent       bool
	// TokenIDs are the tokens of all stored blocks, concatenated. Blocks
	// offloaded below the GPU may carry none.
	TokenIDs  []uint32
	BlockSize int
	// LoRAID is vLLM's deprecated adapter id, when HasLoRAID.
	LoRAID    int64
	HasLoRAID bool
	// LoRAName names the adapter; empty for the base model.
	LoRAName []byte
	Medium   Medium
	// GroupIdx is the KV-cache group of hybrid models; 0 when absent.
	GroupIdx int64
	// SpecKind is the kind of KV cache the group holds, as vLLM's stored
	// blocks name it (kv_cache_spec_kind: "full_attention",
	// "mla_attention", "sliding_window", "mamba", …), and SlidingWindow
	// its window in tokens (kv_cache_spec_sliding_window); empty and 0
	// when the event says nothing (older releases).
	SpecKind      []byte
	SlidingWindow int64
	// ExtraKeys holds, per block, the raw msgpack of what besides its
	// tokens the engine's block hash covered (multimodal hashes, cache
	// salt, LoRA name). Empty when the event carries none; an empty entry
	// is written as msgpack nil.
	ExtraKeys [][]byte
	// CacheSalt is the cache_salt of the request whose blocks SGLang
	// stored (its BlockStoredWithMetadata); empty for an unsalted event.
	// SGLang's block hashes cover the salt, so a salted block is not the
	// block of an unsalted prompt with the same tokens.
	CacheSalt []byte
	// ComponentType is the KV-cache component SGLang labels the blocks
	// with when started with --enable-kv-events-component-types: "full"
	// (full attention), "swa" (sliding window), "mamba" (a state
	// checkpoint); empty when the engine sends none. Only full-attention
	// blocks decide prefix reuse.
	ComponentType []byte
}

// reset empties ev for decoding, keeping its buffers.
func (ev *Event) reset() {
	*ev = Event{
		BlockHashes: ev.BlockHashes[:0],
		TokenIDs:    ev.TokenIDs[:0],
		ExtraKeys:   ev.ExtraKeys[:0],
	}
}

// Batch is one EventBatch: the events of one engine step.
type Batch struct {
	// TS is the wall-clock time of the step, seconds since the Unix epoch.
	TS float64
	// DPRank is the data-parallel rank that published the batch, when
	// HasDPRank; older engines leave it out.
	DPRank    int64
	HasDPRank bool
	Events    []Event
}

// nextEvent returns a reset event appended to the batch, reusing the
// buffers of an event decoded earlier into the same slot.
func (b *Batch) nextEvent() *Event {
	if len(b.Events) < cap(b.Events) {
		b.Events = b.Events[:len(b.Events)+1]
	} else {
		b.Events = append(b.Events, Event{})
	}
	ev := &b.Events[len(b.Events)-1]
	ev.reset()
	return ev
}

// Timestamp returns t as a batch timestamp: seconds since the Unix epoch,
// as Python's time.time() gives them to vLLM. Whole seconds and the
// fraction are converted apart: nanoseconds since the epoch do not fit a
// float64 exactly, and dividing them would lose even a quarter second.
func Timestamp(t time.Time) float64 {
	return float64(t.Unix()) + float64(t.Nanosecond())/1e9
}
