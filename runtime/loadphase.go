package runtime

import (
	"strconv"
	"strings"
)

// LoadPhase is where a starting engine is, as its log tells.
type LoadPhase string

// The phases of a start, in the order vLLM and SGLang go through them. The
// empty phase means the log has said nothing Hearth recognises yet.
const (
	// PhasePulling is the runtime fetching the engine's image, before the
	// engine runs (no log line tells it; the Docker runtime reports it).
	PhasePulling     LoadPhase = "pulling"
	PhaseDownloading LoadPhase = "downloading" // fetching the weights from Hugging Face
	PhaseLoading     LoadPhase = "loading"     // reading the weights onto the GPU
	// PhaseCompiling is torch.compile (vLLM) or piecewise graph compilation
	// (SGLang): minutes on a first start, seconds once its cache is warm.
	PhaseCompiling LoadPhase = "compiling"
	// PhaseProfiling is measuring the memory a forward pass needs and
	// sizing the KV cache from what is left.
	PhaseProfiling LoadPhase = "profiling"
	PhaseCapturing LoadPhase = "capturing" // capturing CUDA graphs
	PhaseStarting  LoadPhase = "starting"  // the HTTP server starting up
	PhaseReady     LoadPhase = "ready"     // the engine says it serves
)

// Label is the phase in words for people: "loading weights".
func (p LoadPhase) Label() string {
	switch p {
	case PhasePulling:
		return "pulling the engine image"
	case PhaseDownloading:
		return "downloading weights"
	case PhaseLoading:
		return "loading weights"
	case PhaseCompiling:
		return "compiling the model"
	case PhaseProfiling:
		return "profiling memory, sizing the KV cache"
	case PhaseCapturing:
		return "capturing CUDA graphs"
	case PhaseStarting:
		return "starting the server"
	case PhaseReady:
		return "ready"
	}
	return string(p)
}

// rank orders the phases; a download bar never moves a start back from a
// later phase (engines fetch small files such as generation_config.json
// late in their start).
func (p LoadPhase) rank() int {
	switch p {
	case PhaseDownloading:
		return 1
	case PhaseLoading:
		return 2
	case PhaseCompiling:
		return 3
	case PhaseProfiling:
		return 4
	case PhaseCapturing:
		return 5
	case PhaseStarting:
		return 6
	case PhaseReady:
		return 7
	}
	return 0
}

// LoadState is where an engine's start is.
type LoadState struct {
	Phase LoadPhase // "" when the log says nothing recognised yet
	// Progress is the phase's completion in percent, 0 to 100, or -1 when
	// the log gives no figure for it.
	Progress int
	// Downloaded says this start fetches weights from the network: the log
	// shows a download progress bar, a download still under way, or one
	// that took long. The Supervisor then allows the start more time.
	Downloaded bool
}

// ParseLoad reads an engine's log lines, oldest first, and says where its
// start is. Lines it does not recognise are skipped.
func ParseLoad(lines []string) LoadState {
	var t LoadTracker
	for _, l := range lines {
		t.Line(l)
	}
	return t.State()
}

// LoadTracker follows an engine's start line by line, for a caller that
// reads the log as it grows (ParseLoad reads it whole). The zero value is
// ready to use; it is not safe for concurrent use.
type LoadTracker struct {
	started  bool // the fields below are set up
	phase    LoadPhase
	progress int // -1: none for this phase
	sglang   bool
	download downloadProgress
}

// maxDownloadFiles bounds the files a tracker remembers: a log is outside
// input.
const maxDownloadFiles = 1024

// longDownload is how long a "Time spent downloading weights" figure must
// be to count as a real download rather than a look at a warm cache.
const longDownload = 10.0 // seconds

// downloadProgress adds up Hugging Face's progress bars.
type downloadProgress struct {
	seen bool // any download bar or long download
	// aggregate is the newer huggingface_hub's one bar over all bytes
	// ("Downloading (incomplete total...)", then "Download complete"), in
	// percent; -1 when not seen.
	aggregate float64
	// files are the older per-file bars, by file name, in bytes.
	files map[string]fileBytes
	// fetched is the "Fetching N files" bar, in percent; -1 when not seen.
	fetched float64
}

type fileBytes struct {
	done, total float64
	shards      int // N of "model-0000k-of-0000N.safetensors"; 0 otherwise
}

// percent is the download's overall progress, or -1. Per-file bars give
// bytes; shards not started yet are counted at the average size of those
// seen, so that the figure does not jump back when the next shard starts.
func (d *downloadProgress) percent() int {
	if d.aggregate >= 0 {
		return clampPercent(d.aggregate)
	}
	var done, total, shardTotal float64
	shardsSeen, shardsExpected := 0, 0
	for _, f := range d.files {
		done += f.done
		total += f.total
		if f.shards > 0 {
			shardsSeen++
			shardTotal += f.total
			shardsExpected = max(shardsExpected, f.shards)
		}
	}
	if shardsSeen > 0 && shardsExpected > shardsSeen {
		total += float64(shardsExpected-shardsSeen) * shardTotal / float64(shardsSeen)
	}
	if total > 0 {
		return clampPercent(100 * done / total)
	}
	if d.fetched >= 0 {
		return clampPercent(d.fetched)
	}
	return -1
}

func clampPercent(p float64) int {
	switch {
	case p != p: // NaN
		return -1
	case p <= 0:
		return 0
	case p >= 100:
		return 100
	}
	return int(p)
}

// State is where the start is, from the lines seen so far.
func (t *LoadTracker) State() LoadState {
	st := LoadState{Phase: t.phase, Progress: -1, Downloaded: t.download.seen || t.phase == PhaseDownloading}
	switch {
	case t.phase == "":
	case t.phase == PhaseDownloading:
		st.Progress = t.download.percent()
	default:
		st.Progress = t.progress
	}
	return st
}

func (t *LoadTracker) enter(p LoadPhase, progress int) {
	t.phase, t.progress = p, progress
}

// phaseMarks are the log lines that mark a phase, from vLLM's and SGLang's
// sources: a line containing the text puts the start in the phase. They
// are tried in order; the first that matches wins.
var phaseMarks = []struct {
	text  string
	phase LoadPhase
}{
	// vLLM
	{"Starting to load model", PhaseLoading},
	{"Loading model from scratch", PhaseLoading},
	{"Loading weights took", PhaseLoading}, // 100%: handled below
	{"Model loading took", PhaseProfiling},
	{"Dynamo bytecode transform time", PhaseCompiling},
	{"Compiling a graph for", PhaseCompiling},
	{"Directly load the compiled graph", PhaseCompiling},
	{"torch.compile takes", PhaseCompiling},
	{"torch.compile took", PhaseCompiling},
	{"Memory profiling takes", PhaseProfiling},
	{"Available KV cache memory", PhaseProfiling},
	{"GPU KV cache size", PhaseProfiling},
	{"Maximum concurrency for", PhaseProfiling},
	{"Capturing CUDA graph", PhaseCapturing},
	{"Graph capturing finished", PhaseStarting},
	{"init engine (profile, create kv cache, warmup model) took", PhaseStarting},
	{"Starting vLLM API server", PhaseStarting},
	{"Starting vLLM server", PhaseStarting},
	// SGLang
	{"Load weight begin", PhaseLoading},
	{"Load weight end", PhaseProfiling},
	{"KV Cache is allocated", PhaseProfiling},
	{"Memory pool end", PhaseProfiling},
	{"Init attention backend", PhaseProfiling},
	{"Capture cuda graph begin", PhaseCapturing},
	{"Capture cuda graph end", PhaseStarting},
	{"The server is fired up and ready to roll", PhaseReady},
	// uvicorn, under both
	{"Started server process", PhaseStarting},
	{"Waiting for application startup", PhaseStarting},
	{"Uvicorn running on", PhaseStarting},
}

// sglangMarks are lines only SGLang prints. SGLang warms up after uvicorn
// says it started, so "Application startup complete" is not ready there.
var sglangMarks = []string{"server_args=ServerArgs(", "Load weight begin", "Memory pool end", "Capture cuda graph", "fired up and ready"}

// Line reads the next log line.
func (t *LoadTracker) Line(line string) {
	if !t.started {
		t.started = true
		t.progress = -1
		t.download.aggregate, t.download.fetched = -1, -1
	}
	line = stripLogPrefix(line)
	if line == "" {
		return
	}
	if !t.sglang {
		for _, m := range sglangMarks {
			if strings.Contains(line, m) {
				t.sglang = true
				break
			}
		}
	}
	if b, ok := parseBar(line); ok {
		t.bar(b)
		return
	}
	switch {
	case strings.Contains(line, "Using model weights format"):
		// Both engines say this just before asking the Hub for the
		// weights; a warm cache answers within a second.
		t.enterDownload()
		return
	case strings.Contains(line, "Time spent downloading weights"):
		if s, ok := secondsAfterLastColon(line); ok && s >= longDownload {
			t.download.seen = true
		}
		t.enter(PhaseLoading, -1)
		return
	case strings.Contains(line, "Loading weights took"):
		t.enter(PhaseLoading, 100)
		return
	case strings.Contains(line, "Application startup complete"):
		if t.sglang {
			t.enter(PhaseStarting, -1)
		} else {
			t.enter(PhaseReady, -1)
		}
		return
	}
	for _, m := range phaseMarks {
		if strings.Contains(line, m.text) {
			t.enter(m.phase, -1)
			return
		}
	}
}

func (t *LoadTracker) enterDownload() {
	if t.phase.rank() <= PhaseLoading.rank() {
		t.enter(PhaseDownloading, -1)
	}
}

// bar reads one frame of a tqdm progress bar.
func (t *LoadTracker) bar(b progressBar) {
	desc := b.desc
	switch {
	case strings.HasSuffix(desc, "checkpoint shards"): // vLLM, SGLang: "Loading safetensors checkpoint shards"
		t.enter(PhaseLoading, b.percent())
	case strings.HasPrefix(desc, "Capturing CUDA graphs"), strings.HasPrefix(desc, "Capturing batches"):
		t.enter(PhaseCapturing, b.percent())
	case strings.HasPrefix(desc, "Compiling num tokens"): // SGLang's piecewise graphs
		t.enter(PhaseCompiling, b.percent())
	case strings.HasPrefix(desc, "Fetching ") && strings.HasSuffix(desc, " files"):
		t.download.seen = true
		t.download.fetched = b.pct
		t.enterDownload()
	case strings.HasPrefix(desc, "Downloading"), strings.HasPrefix(desc, "Download complete"):
		done, dok := parseSize(b.n)
		total, tok := parseSize(b.total)
		if !dok || !tok || total <= 0 {
			return
		}
		t.download.seen = true
		t.download.aggregate = 100 * done / total
		t.enterDownload()
	case looksLikeFileName(desc):
		done, dok := parseSize(b.n)
		total, tok := parseSize(b.total)
		if !dok || !tok || total <= 0 {
			return
		}
		t.download.seen = true
		if t.download.files == nil {
			t.download.files = map[string]fileBytes{}
		}
		if _, known := t.download.files[desc]; known || len(t.download.files) < maxDownloadFiles {
			t.download.files[desc] = fileBytes{done: min(done, total), total: total, shards: shardCount(desc)}
		}
		t.enterDownload()
	}
}

// progressBar is one frame of a tqdm bar: "DESC:  45%|████▌     | 1.80G/4.00G
// [00:12<00:15, 150MB/s]", or vLLM's "DESC:  50% Completed | 2/4 [...]".
type progressBar struct {
	desc     string
	pct      float64
	n, total string // as printed: "1.80G", "4.00G"
}

// percent is the bar's completion, from its counts when they are plain
// numbers (exact), else from its percentage.
func (b progressBar) percent() int {
	n, err1 := strconv.Atoi(b.n)
	total, err2 := strconv.Atoi(b.total)
	if err1 == nil && err2 == nil && total > 0 && n >= 0 {
		return clampPercent(100 * float64(n) / float64(total))
	}
	return clampPercent(b.pct)
}

// parseBar recognises a tqdm frame. The percentage is the first "NN%"
// followed by "|" or " Completed |".
func parseBar(line string) (progressBar, bool) {
	for from := 0; from < len(line); {
		i := strings.IndexByte(line[from:], '%')
		if i < 0 {
			return progressBar{}, false
		}
		i += from
		from = i + 1
		rest := line[i+1:]
		var after string
		switch {
		case strings.HasPrefix(rest, "|"):
			// The bar itself runs to the next '|'.
			j := strings.IndexByte(rest[1:], '|')
			if j < 0 {
				continue
			}
			after = rest[1+j+1:]
		case strings.HasPrefix(rest, " Completed |"):
			after = rest[len(" Completed |"):]
		default:
			continue
		}
		start := i
		for start > 0 && (line[start-1] >= '0' && line[start-1] <= '9' || line[start-1] == '.') {
			start--
		}
		pct, err := strconv.ParseFloat(line[start:i], 64)
		if err != nil {
			continue
		}
		desc := strings.TrimSpace(line[:start])
		desc = strings.TrimSpace(strings.TrimSuffix(desc, ":"))
		counts := strings.TrimSpace(after)
		if k := strings.IndexAny(counts, " ["); k >= 0 {
			counts = counts[:k]
		}
		n, total, ok := strings.Cut(counts, "/")
		if !ok {
			continue
		}
		return progressBar{desc: desc, pct: pct, n: n, total: total}, true
	}
	return progressBar{}, false
}

// parseSize reads tqdm's scaled figures: "1.80G", "512k", "120k", "0.00B",
// "42" (bytes).
func parseSize(s string) (float64, bool) {
	s = strings.TrimSuffix(s, "B")
	mult := 1.0
	if s != "" {
		switch s[len(s)-1] {
		case 'k', 'K':
			mult = 1e3
		case 'M':
			mult = 1e6
		case 'G':
			mult = 1e9
		case 'T':
			mult = 1e12
		case 'P':
			mult = 1e15
		}
		if mult != 1 {
			s = s[:len(s)-1]
		}
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || v < 0 || v != v || v > 1e30 {
		return 0, false
	}
	return v * mult, true
}

// looksLikeFileName says whether a bar's description is a file Hugging
// Face downloads: one word with a dot ("model-00001-of-00004.safetensors",
// "tokenizer.json").
func looksLikeFileName(s string) bool {
	return s != "" && len(s) <= 255 && !strings.ContainsAny(s, " \t()") && strings.Contains(s, ".")
}

// shardCount reads N from "model-0000k-of-0000N.safetensors"; 0 when the
// name is not a shard's.
func shardCount(name string) int {
	i := strings.LastIndex(name, "-of-")
	if i < 0 {
		return 0
	}
	digits := name[i+len("-of-"):]
	end := 0
	for end < len(digits) && digits[end] >= '0' && digits[end] <= '9' {
		end++
	}
	n, err := strconv.Atoi(digits[:end])
	if err != nil || n <= 0 || n > 100000 {
		return 0
	}
	return n
}

// secondsAfterLastColon reads "…: 64.511670 seconds".
func secondsAfterLastColon(line string) (float64, bool) {
	i := strings.LastIndexByte(line, ':')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(line[i+1:])
	if len(f) == 0 {
		return 0, false
	}
	v, err := strconv.ParseFloat(f[0], 64)
	return v, err == nil
}

// stripLogPrefix removes what engines put before a message that could
// hide a progress bar's description: ANSI colour codes and the
// "(EngineCore_DP0 pid=164) " of vLLM's worker processes.
func stripLogPrefix(line string) string {
	if strings.IndexByte(line, 0x1b) >= 0 {
		line = stripANSI(line)
	}
	line = strings.TrimSpace(line)
	if strings.HasPrefix(line, "(") {
		if i := strings.Index(line, ") "); i > 0 && !strings.ContainsAny(line[:i], "%|") {
			line = strings.TrimSpace(line[i+2:])
		}
	}
	return line
}

// stripANSI drops ESC [ … final-byte sequences.
func stripANSI(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		if s[i] != 0x1b {
			b.WriteByte(s[i])
			continue
		}
		if i+1 < len(s) && s[i+1] == '[' {
			j := i + 2
			for j < len(s) && (s[j] < 0x40 || s[j] > 0x7e) {
				j++
			}
			i = j // skip the final byte too
			continue
		}
	}
	return b.String()
}
