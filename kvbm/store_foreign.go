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
// page, no checksum): OnEvict reports them under it and Stats counts them
// in it. The store does not read them; it holds them, with the temp files
// of their writes in progress, to what its own blocks leave of its
// capacity, least recently modified first, and deletes the temp files a
// killed writer left (see the package documentation).
const ForeignSpace = "sglang-file"

// foreignFile is one page file of SGLang's at the root, or the temp file
// of one page's write.
type foreignFile struct {
	name        string
	hash        uint64 // the first 8 bytes of the page's SHA-256: SGLang's event hash
	size, mtime int64
	temp        bool
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

// isForeignTemp reports whether name is the temp file of a page's write:
// "<page name>.tmp.<pid>.<thread id>.<32 hex>", which HiCacheFile writes
// and then renames onto the page, or ".<32 hex>.tmp", the name another
// version of it uses. At the root nothing else is so named: the store's
// own temp files live in its spaces' directories.
func isForeignTemp(name string) bool {
	if hexPart, ok := strings.CutPrefix(name, "."); ok {
		hexPart, ok = strings.CutSuffix(hexPart, ".tmp")
		return ok && isLowerHex(hexPart, 32)
	}
	page, rest, ok := strings.Cut(name, ".bin.tmp.")
	if !ok {
		return false
	}
	if _, _, ok := parseForeignName(page + ".bin"); !ok {
		return false
	}
	parts := strings.Split(rest, ".")
	if len(parts) != 3 || !isLowerHex(parts[2], 32) {
		return false
	}
	for _, p := range parts[:2] {
		if _, err := strconv.ParseUint(p, 10, 64); err != nil {
			return false
		}
	}
	return true
}

// isLowerHex reports whether s is n lower-case hex digits, as Python's
// uuid4().hex writes them.
func isLowerHex(s string, n int) bool {
	if len(s) != n {
		return false
	}
	for _, c := range s {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// listForeign lists SGLang's page files and temp files at the root.
func (s *Store) listForeign() ([]foreignFile, error) {
	ents, err := readDir(s.root)
	if err != nil {
		return nil, err
	}
	var out []foreignFile
	for _, de := range ents {
		hash, _, page := parseForeignName(de.Name())
		temp := !page && isForeignTemp(de.Name())
		if !page && !temp || !de.Type().IsRegular() {
			continue
		}
		fi, err := de.Info()
		if err != nil {
			continue // deleted meanwhile
		}
		out = append(out, foreignFile{name: de.Name(), hash: hash, size: fi.Size(), mtime: fi.ModTime().UnixNano(), temp: temp})
	}
	return out, nil
}

// holdForeign deletes the temp files SGLang's killed writers left and
// evicts its oldest pages until its pages and the writes in progress fit
// in what the store's own blocks leave of its capacity.
func (s *Store) holdForeign() error {
	files, err := s.listForeign()
	if err != nil {
		return err
	}
	stale := s.clock.Now().Add(-staleTempAge).UnixNano()
	var pages []foreignFile
	var bytes, tempsRemoved int64
	for _, f := range files {
		if f.temp && f.mtime < stale {
			if s.removeForeign(f) {
				tempsRemoved++
			}
			continue
		}
		if !f.temp {
			pages = append(pages, f)
		}
		bytes += f.size
	}
	s.mu.Lock()
	budget := s.capacity - s.used
	s.mu.Unlock()
	slices.SortFunc(pages, func(a, b foreignFile) int { return cmp.Compare(a.mtime, b.mtime) })
	var evicted []uint64
	for len(pages) > 0 && bytes > budget {
		f := pages[0]
		pages = pages[1:]
		bytes -= f.size
		if s.removeForeign(f) {
			evicted = append(evicted, f.hash)
		}
	}
	s.mu.Lock()
	s.foreign.blocks, s.foreign.bytes = int64(len(pages)), bytes
	s.foreign.evicted += int64(len(evicted))
	s.removed += tempsRemoved
	s.mu.Unlock()
	if len(evicted) > 0 && s.onEvict != nil {
		s.onEvict(ForeignSpace, evicted)
	}
	return nil
}

// removeForeign deletes a page or temp file; false when it was gone
// already.
func (s *Store) removeForeign(f foreignFile) bool {
	err := os.Remove(filepath.Join(s.root, f.name))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		s.log.Warn("kvbm: remove SGLang file", "file", f.name, "err", err)
	}
	return err == nil
}

// foreignCounts is what the store knows of SGLang's pages: bytes counts
// the temp files of writes in progress too.
type foreignCounts struct {
	blocks, bytes, evicted int64
}
