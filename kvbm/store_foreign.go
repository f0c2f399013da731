package kvbm

import (
	"cmp"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// ForeignSpace names the pages SGLang's HiCache file backend keeps at the
// store's root in its own layout ("<64 hex><suffix>.bin", one file per
// page, written in place, no checksum): OnEvict reports them under it and
// Stats counts them in it. The store does not read them; it holds them to
// its capacity with what its own blocks leave, least recently modified
// first, and deletes a page shorter than the others of its suffix (a
// write torn by its writer's death) once it is older than a write takes.
const ForeignSpace = "sglang-file"

// foreignFile is one page file of SGLang's at the root.
type foreignFile struct {
	name        string
	suffix      string
	hash        uint64 // the first 8 bytes of the page's SHA-256: SGLang's event hash
	size, mtime int64
}

// parseForeignName reads "<64 hex><suffix>.bin".
func parseForeignName(name string) (hash uint64, suffix string, ok bool) {
	stem, ok := strings.CutSuffix(name, ".bin")
	if !ok || len(stem) < 64 {
		return 0, "", false
	}
	for _, c := range stem[:64] {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return 0, "", false
		}
	}
	hash, err := strconv.ParseUint(stem[:16], 16, 64)
	return hash, stem[64:], err == nil
}

// listForeign lists SGLang's page files at the root.
func (s *Store) listForeign() ([]foreignFile, error) {
	ents, err := readDir(s.root)
	if err != nil {
		return nil, err
	}
	var out []foreignFile
	for _, de := range ents {
		hash, suffix, ok := parseForeignName(de.Name())
		if !ok || !de.Type().IsRegular() {
			continue
		}
		fi, err := de.Info()
		if err != nil {
			continue // deleted meanwhile
		}
		out = append(out, foreignFile{de.Name(), suffix, hash, fi.Size(), fi.ModTime().UnixNano()})
	}
	return out, nil
}

// holdForeign deletes SGLang's torn pages and evicts its oldest pages
// until they fit in what the store's own blocks leave of its capacity.
func (s *Store) holdForeign() error {
	files, err := s.listForeign()
	if err != nil {
		return err
	}
	// A page is as long as the others of its suffix (one model and
	// layout); a shorter one that is no longer being written is torn.
	full := map[string]int64{}
	for _, f := range files {
		full[f.suffix] = max(full[f.suffix], f.size)
	}
	settled := s.clock.Now().Add(-staleTempAge).UnixNano()
	var corrupt, evicted []uint64
	kept := files[:0]
	var bytes int64
	for _, f := range files {
		if f.size < full[f.suffix] && f.mtime < settled {
			if s.removeForeign(f) {
				corrupt = append(corrupt, f.hash)
			}
			continue
		}
		kept = append(kept, f)
		bytes += f.size
	}
	s.mu.Lock()
	budget := s.capacity - s.used
	s.mu.Unlock()
	slices.SortFunc(kept, func(a, b foreignFile) int { return cmp.Compare(a.mtime, b.mtime) })
	for len(kept) > 0 && bytes > budget {
		f := kept[0]
		kept = kept[1:]
		bytes -= f.size
		if s.removeForeign(f) {
			evicted = append(evicted, f.hash)
		}
	}
	s.mu.Lock()
	s.foreign.blocks, s.foreign.bytes = int64(len(kept)), bytes
	s.foreign.evicted += int64(len(evicted))
	s.foreign.corrupt += int64(len(corrupt))
	s.mu.Unlock()
	if gone := append(corrupt, evicted...); len(gone) > 0 && s.onEvict != nil {
		s.onEvict(ForeignSpace, gone)
	}
	return nil
}

// removeForeign deletes a page file; false when it was gone already.
func (s *Store) removeForeign(f foreignFile) bool {
	err := os.Remove(filepath.Join(s.root, f.name))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		s.log.Warn("kvbm: remove SGLang page", "file", f.name, "err", err)
	}
	return err == nil
}

// foreignCounts is what the store knows of SGLang's pages.
type foreignCounts struct {
	blocks, bytes, evicted, corrupt int64
}
