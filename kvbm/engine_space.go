package kvbm

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"

	"github.com/hearth-llm/hearth/clock"
)

// EngineSpace is an engine process's handle on its space of the node
// store: the files alone, as the real engines' file tiers use theirs
// (SGLang's HiCacheFile asks the file system whether a page exists). It
// keeps no catalog and evicts nothing, so its memory does not grow with
// the store and a block the daemon evicted is written again when next
// stored: the daemon holds the node's capacity (NodeStore), told of each
// block written by the engine's KV events. Its methods are safe for
// concurrent use.
type EngineSpace struct {
	sp     *Space
	budget *writeBudget // nil: writes unbounded
}

// OpenEngineSpace opens the node store under dir in an engine process
// and returns the named space (SpaceName) of the engine's blocks. It reads
// nothing of what the store holds. A writer (the engine's name, as the
// daemon's NodeStore.AddWriter knows it) bounds its writes by the grant the
// daemon publishes for it (see grantsDir); "" writes unbounded.
func OpenEngineSpace(dir, space, writer string, log *slog.Logger) (*EngineSpace, error) {
	if dir == "" {
		return nil, errors.New("kvbm: node KV store: no directory")
	}
	// The daemon's store narrows the root's mode; an engine, maybe
	// another user in a container, only creates it when missing.
	if err := os.MkdirAll(dir, dirMode); err != nil {
		return nil, fmt.Errorf("kvbm: node KV store: %w", err)
	}
	s := &Store{root: dir, capacity: EngineStoreCapacity, clock: clock.Real{}, log: log, spaces: map[string]*Space{}}
	if s.log == nil {
		s.log = slog.Default()
	}
	s.lru.init(s.capacity)
	e := &EngineSpace{sp: s.Space(space)}
	if writer != "" {
		e.budget = newWriteBudget(dir, writer)
	}
	return e, nil
}

// Has reports whether the block's file is there, of at least a header.
func (e *EngineSpace) Has(hash uint64) bool {
	fi, err := os.Stat(e.sp.path(hash))
	return err == nil && fi.Mode().IsRegular() && fi.Size() >= HeaderSize
}

// Load reads a block of size bytes and verifies it (a payload of holes by
// asking the file system), and touches its file's mtime: a use the
// daemon's store sees before it evicts the block. A block that fails
// verification is deleted and ErrCorrupt; a missing one ErrNotFound.
func (e *EngineSpace) Load(hash uint64, size int64) error {
	path := e.sp.path(hash)
	buf, _ := loadBuffers.Get().(*[]byte)
	if buf == nil {
		buf = new([]byte)
	}
	data, n, err := readBlock(path, hash, *buf, true)
	if cap(data) > cap(*buf) {
		*buf = data[:0]
	}
	loadBuffers.Put(buf)
	switch {
	case errors.Is(err, errCorruptFile):
		if rerr := os.Remove(path); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
			e.sp.store.log.Warn("kvbm: remove corrupt block", "path", path, "err", rerr)
		}
		return fmt.Errorf("%w: %s: %v", ErrCorrupt, path, err)
	case errors.Is(err, fs.ErrNotExist):
		return ErrNotFound
	case err != nil:
		return fmt.Errorf("kvbm: load %016x: %w", hash, err)
	case n != size:
		return fmt.Errorf("kvbm: load %016x: %d bytes, want %d", hash, n, size)
	}
	now := e.sp.store.clock.Now()
	if err := os.Chtimes(path, now, now); err != nil && !errors.Is(err, fs.ErrNotExist) {
		e.sp.store.log.Debug("kvbm: touch block", "path", path, "err", err)
	}
	return nil
}

// Store writes a sparse block of size bytes through a temp file renamed
// into place, unless a file of that size is there already. A writer past
// its grant writes nothing: ErrNoGrant.
func (e *EngineSpace) Store(hash uint64, size int64) error {
	if size < 0 || size > MaxBlockBytes {
		return fmt.Errorf("%w: %d bytes", ErrTooLarge, size)
	}
	if fi, err := os.Stat(e.sp.path(hash)); err == nil && fi.Mode().IsRegular() && fi.Size() == HeaderSize+size {
		return nil
	}
	if e.budget != nil && !e.budget.take(HeaderSize+size) {
		return ErrNoGrant
	}
	if _, err := e.sp.writeBlock(hash, size, nil); err != nil {
		if e.budget != nil {
			e.budget.giveBack()
		}
		return err
	}
	return nil
}
