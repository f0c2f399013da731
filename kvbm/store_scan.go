package kvbm

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// foundFile is a block file seen by a scan.
type foundFile struct {
	space *Space
	hash  uint64
	size  int64 // file size
	mtime int64
}

// Rescan brings the catalog up to date with the directory: it enters the
// blocks other processes wrote (after checking their name, header and
// size), drops those whose files are gone (reporting them to OnEvict),
// counts a block whose mtime changed as used, deletes temp files older than
// a minute, and evicts if the catalog is then over capacity. It walks the
// whole tree; the store's lock is held only while the findings are merged.
func (s *Store) Rescan() error { return s.rescan(context.Background()) }

// RescanContext is Rescan that gives up when ctx ends, between two
// directories of the walk or two headers: a store of hundreds of thousands
// of files takes long to walk, and a daemon that is stopping must not wait
// for it. What it had not entered yet waits for the next scan.
func (s *Store) RescanContext(ctx context.Context) error { return s.rescan(ctx) }

func (s *Store) rescan(ctx context.Context) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return ErrClosed
	}
	startSeq := s.seq
	s.mu.Unlock()

	found, err := s.walk(ctx)
	if err != nil {
		return err
	}

	// Merge what the catalog knows; collect what it does not.
	var fresh []foundFile
	var dropped []victim
	var corrupt []foundFile
	seen := make(map[*entry]struct{}, len(found))
	s.mu.Lock()
	for _, f := range found {
		e := f.space.blocks[f.hash]
		if e == nil {
			fresh = append(fresh, f)
			continue
		}
		seen[e] = struct{}{}
		if f.size != e.bytes() {
			corrupt = append(corrupt, f)
			continue
		}
		if f.mtime != e.mtime {
			e.mtime = f.mtime
			s.lru.use(e)
		}
	}
	for _, sp := range s.spaces {
		for _, e := range sp.blocks {
			if _, ok := seen[e]; !ok && e.seq <= startSeq {
				s.removeLocked(e)
				dropped = append(dropped, victim{sp, e.hash})
			}
		}
	}
	s.mu.Unlock()
	slices.SortFunc(dropped, func(a, b victim) int { return strings.Compare(a.space.name, b.space.name) })
	s.report(dropped)
	for _, f := range corrupt {
		s.dropCorrupt(f, fmt.Errorf("%w: %d bytes, catalog says otherwise", errCorruptFile, f.size))
	}

	// Check the headers of new blocks without the lock, then enter them,
	// least recently modified first.
	valid := fresh[:0]
	for _, f := range fresh {
		if err := ctx.Err(); err != nil {
			return err
		}
		if h, err := checkFile(f.space.path(f.hash), f.hash); err != nil {
			if errors.Is(err, errCorruptFile) {
				s.dropCorrupt(f, err)
			} else if !errors.Is(err, fs.ErrNotExist) {
				s.log.Warn("kvbm: scan block", "path", f.space.path(f.hash), "err", err)
			}
		} else {
			f.size = h.length
			valid = append(valid, f)
		}
	}
	slices.SortFunc(valid, func(a, b foundFile) int { return cmp.Compare(a.mtime, b.mtime) })
	s.mu.Lock()
	for _, f := range valid {
		if f.space.blocks[f.hash] == nil {
			e := s.insertLocked(f.space, f.hash, f.size, f.mtime)
			s.used += e.bytes()
		}
	}
	victims := s.evictLocked(0)
	s.mu.Unlock()
	s.dropFiles(victims)
	return s.holdForeign()
}

// dropCorrupt deletes a block file that failed a check and takes the block
// out of the catalog.
func (s *Store) dropCorrupt(f foundFile, why error) {
	p := f.space.path(f.hash)
	if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
		s.log.Warn("kvbm: remove corrupt block", "path", p, "err", err)
	}
	s.log.Warn("kvbm: dropped corrupt block", "space", f.space.name, "hash", fmt.Sprintf("%016x", f.hash), "err", why)
	s.mu.Lock()
	f.space.c.corrupt++
	var dropped []victim
	if e := f.space.blocks[f.hash]; e != nil {
		s.removeLocked(e)
		dropped = []victim{{f.space, f.hash}}
	}
	s.mu.Unlock()
	s.report(dropped)
}

func checkFile(path string, hash uint64) (blockHeader, error) {
	f, err := os.Open(path)
	if err != nil {
		return blockHeader{}, err
	}
	defer f.Close()
	return readHeader(f, hash)
}

// walk lists the block files of every space and deletes stale temp files.
// Entries that vanish while it walks are skipped.
func (s *Store) walk(ctx context.Context) ([]foundFile, error) {
	spaces, err := readDir(s.root)
	if err != nil {
		return nil, fmt.Errorf("kvbm: scan %s: %w", s.root, err)
	}
	var found []foundFile
	for _, sd := range spaces {
		if !sd.IsDir() || SanitizeSpaceName(sd.Name()) != sd.Name() {
			continue
		}
		s.mu.Lock()
		sp := s.spaceLocked(sd.Name())
		s.mu.Unlock()
		shards, err := readDir(sp.dir)
		if err != nil {
			s.log.Warn("kvbm: scan space", "dir", sp.dir, "err", err)
			continue
		}
		for _, shard := range shards {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			prefix, err := strconv.ParseUint(shard.Name(), 16, 8)
			if !shard.IsDir() || len(shard.Name()) != 2 || err != nil {
				continue
			}
			dir := filepath.Join(sp.dir, shard.Name())
			files, err := readDir(dir)
			if err != nil {
				s.log.Warn("kvbm: scan shard", "dir", dir, "err", err)
				continue
			}
			for _, de := range files {
				name := de.Name()
				if strings.HasPrefix(name, ".") && strings.HasSuffix(name, ".tmp") {
					s.removeStaleTemp(filepath.Join(dir, name), de)
					continue
				}
				hash, ok := parseBlockFileName(name)
				if !ok || hash>>56 != prefix || !de.Type().IsRegular() {
					continue
				}
				fi, err := de.Info()
				if err != nil {
					continue // deleted meanwhile
				}
				found = append(found, foundFile{space: sp, hash: hash, size: fi.Size(), mtime: fi.ModTime().UnixNano()})
			}
		}
	}
	return found, nil
}

func (s *Store) removeStaleTemp(path string, de fs.DirEntry) {
	fi, err := de.Info()
	if err != nil || s.clock.Now().Sub(fi.ModTime()) < staleTempAge {
		return
	}
	if err := os.Remove(path); err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			s.log.Warn("kvbm: remove temp file", "path", path, "err", err)
		}
		return
	}
	s.mu.Lock()
	s.removed++
	s.mu.Unlock()
}

// parseBlockFileName reads "<16 hex>.kv".
func parseBlockFileName(name string) (uint64, bool) {
	hexPart, ok := strings.CutSuffix(name, ".kv")
	if !ok || len(hexPart) != 16 {
		return 0, false
	}
	h, err := strconv.ParseUint(hexPart, 16, 64)
	if err != nil || blockFileName(h) != name {
		return 0, false
	}
	return h, true
}

// readDir lists a directory unsorted (sorting a million names buys nothing).
func readDir(dir string) ([]fs.DirEntry, error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.ReadDir(-1)
}
