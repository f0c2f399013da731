package daemon

import (
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"sync"

	"github.com/hearth-llm/hearth/api"
	"github.com/hearth-llm/hearth/atomicfile"
	"github.com/hearth-llm/hearth/router/warm"
)

// hotPrefixes keeps router/warm's Learner of the gateway's first prompts
// in the data directory (DataDir.HotPrefixes), so that the engines of the
// next start are warmed with what this one learned.
type hotPrefixes struct {
	learner *warm.Learner
	path    string
	log     *slog.Logger
	mu      sync.Mutex // one write at a time, the latest state last
}

var _ api.HotPrefixes = (*hotPrefixes)(nil)

// loadHotPrefixes reads what an earlier start learned. A missing file is
// a first start; an unreadable or damaged one is logged and learned anew,
// since it only ever saves a prefill.
func loadHotPrefixes(path string, log *slog.Logger) *hotPrefixes {
	h := &hotPrefixes{learner: warm.New(warm.Config{}), path: path, log: log}
	data, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		log.Warn("hot prefixes not read; learning them anew", "path", path, "error", err)
	default:
		if err := h.learner.UnmarshalBinary(data); err != nil {
			log.Warn("hot prefixes not read; learning them anew", "path", path, "error", err)
		}
	}
	return h
}

// ObserveFirstPrompt learns from a session's first prompt and, when that
// changed the hot prefixes, writes them. It writes on the request's path:
// the set changes only when sessions start sharing a new prefix, a few
// times in a daemon's life, and the write is a few tens of kilobytes.
func (h *hotPrefixes) ObserveFirstPrompt(model string, prompt []uint32) {
	if !h.learner.Observe(model, prompt) {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	data, err := h.learner.MarshalBinary()
	if err == nil {
		err = atomicfile.Write(h.path, data, 0o600)
	}
	if err != nil {
		h.log.Warn("hot prefixes not saved", "path", h.path, "error", err)
	}
}

// Hot is the Learner's hot prefixes of model.
func (h *hotPrefixes) Hot(model string) [][]uint32 { return h.learner.Hot(model) }
