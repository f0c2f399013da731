package kvbm

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/zeebo/xxh3"
	"golang.org/x/sys/unix"

	"github.com/hearth-llm/hearth/clock"
)

// Errors of the SSD block store. Errors from the file system are wrapped, so
// errors.Is(err, syscall.ENOSPC) tells a full disk.
var (
	// ErrNotFound: the space holds no such block, or another process
	// deleted its file.
	ErrNotFound = errors.New("kvbm: block not found")
	// ErrCorrupt: the block's file failed verification; it has been
	// deleted and counted.
	ErrCorrupt = errors.New("kvbm: block corrupt")
	// ErrTooLarge: the block is larger than MaxBlockBytes or than the
	// store's whole capacity.
	ErrTooLarge = errors.New("kvbm: block too large")
	// ErrClosed: the store has been closed.
	ErrClosed = errors.New("kvbm: store closed")
)

// MaxDefaultCapacity caps DefaultCapacity, and MinDefaultCapacity is the
// least it returns without an error.
const (
	MaxDefaultCapacity = 256 << 30
	MinDefaultCapacity = 256 << 20
)

// staleTempAge is how old a temp file must be before a scan deletes it as
// the leftover of a torn write: a younger one may be another process's
// write in progress, whose rename would fail if it were deleted.
const staleTempAge = time.Minute

// StoreConfig configures OpenStore.
type StoreConfig struct {
	// Dir is the store's root, shared by every process of the node that
	// opens the store; OpenStore creates it.
	Dir string
	// CapacityBytes bounds the bytes of all blocks of all spaces (header
	// included, holes of sparse blocks counted as written); 0 means
	// DefaultCapacity(Dir).
	CapacityBytes int64
	// Sync makes Put fsync each block file before its rename, so that a
	// block survives a power loss. Without it a block survives the death
	// of its writer, and one torn by a power loss fails its checksum.
	Sync bool
	// Clock is the time source of mtime touches and temp-file ages; nil
	// means the system clock.
	Clock clock.Clock
	// Logger receives the store's notices; nil means slog.Default().
	Logger *slog.Logger
	// OnEvict, when set, is called with the hashes of blocks that left
	// this store's catalog other than by RemoveSpace: evicted for
	// capacity, deleted as corrupt, or found deleted by another process.
	// It is called without the store's lock held, from the goroutine of
	// the operation that dropped them.
	OnEvict func(space string, hashes []uint64)
}

// DefaultCapacity is 10% of the free space of the file system holding dir
// (space available to an unprivileged user), at most MaxDefaultCapacity. It
// is an error when that is under MinDefaultCapacity: a disk so full should
// not take an SSD tier.
func DefaultCapacity(dir string) (int64, error) {
	free, err := freeBytes(dir)
	if err != nil {
		return 0, err
	}
	c := min(free/10, MaxDefaultCapacity)
	if c < MinDefaultCapacity {
		return 0, fmt.Errorf("kvbm: 10%% of the %d free bytes under %s is under the minimum of %d: %w",
			free, dir, int64(MinDefaultCapacity), syscall.ENOSPC)
	}
	return c, nil
}

func freeBytes(dir string) (int64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, fmt.Errorf("kvbm: statfs %s: %w", dir, err)
	}
	return int64(st.Bavail) * int64(st.Bsize), nil
}

// Store is one process's handle on the node's SSD block store: the files
// under Dir and an in-memory catalog of them. Its methods are safe for
// concurrent use.
type Store struct {
	root     string
	capacity int64
	sync     bool
	clock    clock.Clock
	log      *slog.Logger
	onEvict  func(string, []uint64)

	mu      sync.Mutex
	prio    BlockPriorities // nil: eviction ignores priority
	spaces  map[string]*Space
	lru     slru
	used    int64 // bytes of the catalog's blocks plus those of writes in flight
	seq     uint64
	closed  bool
	removed int64 // stale temp files deleted
	foreign foreignCounts
}

// Space is the blocks of one model, engine kind and block size. Two spaces
// never share a block, even for equal hashes.
type Space struct {
	store  *Store
	name   string
	dir    string
	blocks map[uint64]*entry // guarded by store.mu
	bytes  int64
	c      spaceCounters
}

type spaceCounters struct {
	hits, misses, stores, evicted, corrupt, readBytes, writtenBytes int64
}

// OpenStore opens the store under cfg.Dir, creating the directory. It scans
// every space: temp files older than a minute (torn writes) are deleted, and
// so is every block file whose name, header or size is wrong, counted as
// corrupt; payload checksums are verified later, on Get. The blocks enter
// the catalog least recently modified first, and the oldest are evicted if
// they exceed the capacity.
func OpenStore(cfg StoreConfig) (*Store, error) {
	if cfg.Dir == "" {
		return nil, errors.New("kvbm: StoreConfig.Dir is empty")
	}
	if err := makePrivateRoot(cfg.Dir); err != nil {
		return nil, err
	}
	capacity := cfg.CapacityBytes
	if capacity == 0 {
		c, err := DefaultCapacity(cfg.Dir)
		if err != nil {
			return nil, err
		}
		capacity = c
	}
	if capacity < 0 {
		return nil, fmt.Errorf("kvbm: negative capacity %d", capacity)
	}
	s := &Store{
		root:     cfg.Dir,
		capacity: capacity,
		sync:     cfg.Sync,
		clock:    clock.Or(cfg.Clock),
		log:      cfg.Logger,
		onEvict:  cfg.OnEvict,
		spaces:   map[string]*Space{},
	}
	if s.log == nil {
		s.log = slog.Default()
	}
	s.lru.init(capacity)
	if err := s.Rescan(); err != nil {
		return nil, err
	}
	return s, nil
}

// The store holds the KV of every user's prompts: its directories and
// block files are its owner's alone, wherever it lives.
const (
	dirMode  fs.FileMode = 0o700
	fileMode fs.FileMode = 0o600
)

// makePrivateRoot creates the store's root, or narrows an existing one,
// to dirMode.
func makePrivateRoot(dir string) error {
	if err := os.MkdirAll(dir, dirMode); err != nil {
		return fmt.Errorf("kvbm: create store dir: %w", err)
	}
	if err := os.Chmod(dir, dirMode); err != nil {
		return fmt.Errorf("kvbm: store dir: %w", err)
	}
	return nil
}

// Capacity is the bytes the store keeps its blocks under.
func (s *Store) Capacity() int64 { return s.capacity }

// SanitizeSpaceName maps a name to the directory name Space uses for it:
// every byte outside [A-Za-z0-9._-] becomes '_', as does a leading '.'
// (reserved for temp files), and the name is cut at 128 bytes.
func SanitizeSpaceName(name string) string {
	b := []byte(name)
	if len(b) > 128 {
		b = b[:128]
	}
	if len(b) == 0 {
		return "_"
	}
	for i, c := range b {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
			c == '-' || c == '_' || c == '.' && i > 0
		if !ok {
			b[i] = '_'
		}
	}
	return string(b)
}

// Space returns the space of that name (see SanitizeSpaceName), creating it
// in memory if need be; its directory appears with its first block.
func (s *Store) Space(name string) *Space {
	name = SanitizeSpaceName(name)
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.spaceLocked(name)
}

func (s *Store) spaceLocked(name string) *Space {
	sp := s.spaces[name]
	if sp == nil {
		sp = &Space{store: s, name: name, dir: filepath.Join(s.root, name), blocks: map[uint64]*entry{}}
		s.spaces[name] = sp
	}
	return sp
}

// Name is the space's sanitized name, its directory under the store's root.
func (sp *Space) Name() string { return sp.name }

func blockFileName(hash uint64) string {
	var b [19]byte
	const hexDigits = "0123456789abcdef"
	for i := 15; i >= 0; i-- {
		b[i] = hexDigits[(hash>>(4*(15-i)))&0xf]
	}
	copy(b[16:], ".kv")
	return string(b[:])
}

func (sp *Space) shardDir(hash uint64) string {
	return filepath.Join(sp.dir, fmt.Sprintf("%02x", hash>>56))
}

func (sp *Space) path(hash uint64) string {
	return filepath.Join(sp.shardDir(hash), blockFileName(hash))
}

// Has reports whether the catalog holds the block. It reads memory only:
// a block another process wrote since the last Rescan is not seen, and one
// it deleted is still reported until a Get or Rescan notices.
func (sp *Space) Has(hash uint64) bool {
	s := sp.store
	s.mu.Lock()
	_, ok := sp.blocks[hash]
	s.mu.Unlock()
	return ok
}

// Put stores a block of size payload bytes unless the space holds it
// already, in the catalog or as a file of the right size another process
// wrote (then it counts as a use). A nil payload writes a sparse file of
// size zero bytes. Blocks are evicted first to keep the store under its
// capacity. The file is written under a temp name in its directory and
// renamed into place, so another process sees all of it or none; on an
// error no temp file is left and the block is not in the catalog.
func (sp *Space) Put(hash uint64, size int64, payload []byte) error {
	if payload != nil && int64(len(payload)) != size {
		return fmt.Errorf("kvbm: put %016x: payload is %d bytes, size says %d", hash, len(payload), size)
	}
	if size < 0 || size > MaxBlockBytes {
		return fmt.Errorf("%w: %d bytes", ErrTooLarge, size)
	}
	need := HeaderSize + size
	s := sp.store
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return ErrClosed
	}
	if e := sp.blocks[hash]; e != nil {
		s.lru.use(e)
		s.mu.Unlock()
		return nil
	}
	s.mu.Unlock()
	// Another process may have written it since the last Rescan: then
	// taking its file saves writing the block again. Its size is checked
	// here, the rest by Get.
	if fi, err := os.Stat(sp.path(hash)); err == nil && fi.Mode().IsRegular() && fi.Size() == need {
		s.adopt(sp, hash, size, fi.ModTime().UnixNano())
		return nil
	}
	s.mu.Lock()
	if need > s.capacity {
		s.mu.Unlock()
		return fmt.Errorf("%w: %d bytes, capacity %d", ErrTooLarge, need, s.capacity)
	}
	victims := s.evictLocked(need)
	s.used += need
	s.mu.Unlock()
	s.dropFiles(victims)

	mtime, err := sp.writeBlock(hash, size, payload)

	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		s.used -= need
		return err
	}
	sp.c.writtenBytes += need
	if sp.blocks[hash] != nil {
		// A concurrent Put or a Rescan entered it meanwhile.
		s.used -= need
		return nil
	}
	s.insertLocked(sp, hash, size, mtime)
	sp.c.stores++
	return nil
}

// adopt enters a block another process wrote and counts this as its
// second use.
func (s *Store) adopt(sp *Space, hash uint64, size, mtime int64) {
	s.mu.Lock()
	e := sp.blocks[hash]
	if e == nil {
		e = s.insertLocked(sp, hash, size, mtime)
		s.used += e.bytes()
	}
	s.lru.use(e)
	victims := s.evictLocked(0)
	s.mu.Unlock()
	s.dropFiles(victims)
}

// writeBlock writes the block file and returns its mtime.
func (sp *Space) writeBlock(hash uint64, size int64, payload []byte) (int64, error) {
	dir := sp.shardDir(hash)
	f, tmp, err := createTemp(dir, hash)
	if errors.Is(err, fs.ErrNotExist) {
		if err = os.MkdirAll(dir, dirMode); err == nil {
			f, tmp, err = createTemp(dir, hash)
		}
	}
	if err != nil {
		return 0, fmt.Errorf("kvbm: put %016x: %w", hash, err)
	}
	mtime, err := sp.fillTemp(f, hash, size, payload)
	if cerr := f.Close(); err == nil && cerr != nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, sp.path(hash))
	}
	if err != nil {
		if rerr := os.Remove(tmp); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
			sp.store.log.Warn("kvbm: remove temp file", "path", tmp, "err", rerr)
		}
		return 0, fmt.Errorf("kvbm: put %016x: %w", hash, err)
	}
	return mtime, nil
}

func createTemp(dir string, hash uint64) (*os.File, string, error) {
	for range 10 {
		name := filepath.Join(dir, "."+strconv.FormatUint(hash, 16)+"."+strconv.Itoa(os.Getpid())+"."+
			strconv.FormatUint(rand.Uint64(), 36)+".tmp")
		f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, fileMode)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		return f, name, err
	}
	return nil, "", fmt.Errorf("no free temp file name in %s", dir)
}

func (sp *Space) fillTemp(f *os.File, hash uint64, size int64, payload []byte) (int64, error) {
	h := blockHeader{hash: hash, length: size}
	if payload == nil {
		h.payloadSum = zeroSum(size)
	} else {
		h.payloadSum = xxh3.Hash(payload)
	}
	var hb [HeaderSize]byte
	h.encode(hb[:])
	if _, err := f.Write(hb[:]); err != nil {
		return 0, err
	}
	if payload == nil {
		if err := f.Truncate(HeaderSize + size); err != nil {
			return 0, err
		}
	} else if _, err := f.Write(payload); err != nil {
		return 0, err
	}
	if sp.store.sync {
		if err := f.Sync(); err != nil {
			return 0, err
		}
	}
	fi, err := f.Stat()
	if err != nil {
		return 0, err
	}
	return fi.ModTime().UnixNano(), nil
}

// Get reads the block's payload into dst when it has room (a new slice
// otherwise) and verifies it. A block missing from the catalog is still
// looked for on disk, where another process may have written it. A block
// that fails verification is deleted and reported as ErrCorrupt; a missing
// one as ErrNotFound. A Get is a use of the block: its file's mtime is set
// to now so that other processes' Rescan sees it.
func (sp *Space) Get(hash uint64, dst []byte) ([]byte, error) {
	data, _, err := sp.get(hash, dst, false)
	return data, err
}

// get is Get; with verifyOnly it returns no data, only the payload's
// length, and a payload that is all holes is verified without reading it.
func (sp *Space) get(hash uint64, dst []byte, verifyOnly bool) ([]byte, int64, error) {
	s := sp.store
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, 0, ErrClosed
	}
	known := sp.blocks[hash]
	s.mu.Unlock()

	path := sp.path(hash)
	data, n, err := readBlock(path, hash, dst, verifyOnly)
	if err != nil {
		corrupt := errors.Is(err, errCorruptFile)
		if corrupt {
			if rerr := os.Remove(path); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
				s.log.Warn("kvbm: remove corrupt block", "path", path, "err", rerr)
			}
			s.log.Warn("kvbm: dropped corrupt block", "space", sp.name, "hash", fmt.Sprintf("%016x", hash), "err", err)
		}
		gone := corrupt || errors.Is(err, fs.ErrNotExist)
		s.mu.Lock()
		sp.c.misses++
		var dropped []victim
		if corrupt {
			sp.c.corrupt++
		}
		if e := sp.blocks[hash]; gone && e != nil && e == known {
			s.removeLocked(e)
			dropped = []victim{{sp, hash}}
		}
		s.mu.Unlock()
		s.report(dropped)
		switch {
		case corrupt:
			return nil, 0, fmt.Errorf("%w: %s: %v", ErrCorrupt, path, err)
		case gone:
			return nil, 0, ErrNotFound
		}
		return nil, 0, fmt.Errorf("kvbm: get %016x: %w", hash, err)
	}

	now := s.clock.Now()
	if err := os.Chtimes(path, now, now); err != nil && !errors.Is(err, fs.ErrNotExist) {
		s.log.Debug("kvbm: touch block", "path", path, "err", err)
	}
	s.adopt(sp, hash, n, now.UnixNano())
	s.mu.Lock()
	if e := sp.blocks[hash]; e != nil {
		e.mtime = now.UnixNano()
	}
	sp.c.hits++
	sp.c.readBytes += n
	s.mu.Unlock()
	return data, n, nil
}

var errCorruptFile = errors.New("corrupt block file")

// readBlock reads and verifies the block file at path. Verification
// failures wrap errCorruptFile; a missing file is fs.ErrNotExist.
func readBlock(path string, hash uint64, dst []byte, verifyOnly bool) ([]byte, int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	h, err := readHeader(f, hash)
	if err != nil {
		return nil, 0, err
	}
	if verifyOnly && h.payloadSum == zeroSum(h.length) && allZero(f, h.length) {
		// Holes read as zeros, whose checksum the header holds: the
		// payload is verified without reading it.
		return nil, h.length, nil
	}
	buf := dst[:0]
	if int64(cap(buf)) < h.length {
		buf = make([]byte, h.length)
	}
	buf = buf[:h.length]
	if _, err := f.ReadAt(buf, HeaderSize); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, 0, fmt.Errorf("%w: payload shorter than %d bytes", errCorruptFile, h.length)
		}
		return nil, 0, err
	}
	if got := xxh3.Hash(buf); got != h.payloadSum {
		return nil, 0, fmt.Errorf("%w: payload checksum %016x, header says %016x", errCorruptFile, got, h.payloadSum)
	}
	return buf, h.length, nil
}

// allZero reports whether a payload of length bytes after the header reads
// as zeros without reading most of it: the rest of the header's file-system
// block is read and checked, and past it the file system must find no data
// (SEEK_DATA). A file system that cannot tell reports data, and the payload
// is then read.
func allZero(f *os.File, length int64) bool {
	var head [4096]byte
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return false
	}
	blksize := int64(st.Blksize) // int32 on some platforms
	if blksize < HeaderSize || blksize > int64(len(head)) {
		return false
	}
	n := min(blksize-HeaderSize, length)
	if _, err := f.ReadAt(head[:n], HeaderSize); err != nil {
		return false
	}
	for _, b := range head[:n] {
		if b != 0 {
			return false
		}
	}
	if n == length {
		return true
	}
	_, err := unix.Seek(int(f.Fd()), blksize, unix.SEEK_DATA)
	return errors.Is(err, unix.ENXIO)
}

// readHeader reads and checks the header of an open block file against its
// name's hash and the file's size.
func readHeader(f *os.File, hash uint64) (blockHeader, error) {
	fi, err := f.Stat()
	if err != nil {
		return blockHeader{}, err
	}
	var hb [HeaderSize]byte
	if n, err := f.ReadAt(hb[:], 0); n < HeaderSize {
		if errors.Is(err, io.EOF) {
			return blockHeader{}, fmt.Errorf("%w: %d bytes, shorter than a header", errCorruptFile, n)
		}
		return blockHeader{}, err
	}
	h, err := parseHeader(hb[:])
	if err != nil {
		return blockHeader{}, fmt.Errorf("%w: %w", errCorruptFile, err)
	}
	if h.hash != hash {
		return blockHeader{}, fmt.Errorf("%w: header hash %016x in the file of %016x", errCorruptFile, h.hash, hash)
	}
	if fi.Size() != HeaderSize+h.length {
		return blockHeader{}, fmt.Errorf("%w: %d bytes, header says %d", errCorruptFile, fi.Size(), HeaderSize+h.length)
	}
	return h, nil
}

// insertLocked enters a new block at probation's most recent end; the
// caller accounts its bytes in s.used.
func (s *Store) insertLocked(sp *Space, hash uint64, size, mtime int64) *entry {
	s.seq++
	e := &entry{hash: hash, space: sp, size: size, mtime: mtime, seq: s.seq}
	sp.blocks[hash] = e
	sp.bytes += e.bytes()
	s.lru.add(e)
	return e
}

// removeLocked takes a block out of the catalog.
func (s *Store) removeLocked(e *entry) {
	s.lru.remove(e)
	delete(e.space.blocks, e.hash)
	e.space.bytes -= e.bytes()
	s.used -= e.bytes()
}

type victim struct {
	space *Space
	hash  uint64
}

// maxSecondChances bounds the blocks one eviction gives a second chance,
// for a use by another process and for priority together.
const maxSecondChances = 256

// evictLocked takes blocks out of the catalog until need more bytes fit
// under the capacity; the caller deletes their files with dropFiles. The
// order is the policy's (slru.victim). Before a block goes, its file is
// looked at: one another process used since this store last saw it (a
// newer mtime: its Get touched the file) gets a second chance as a use,
// and one whose file is gone leaves without counting as evicted. Uses by
// other processes are thereby seen where they matter without walking the
// directory.
//
// With priorities (WeighPriorities), a block that a main turn's prompt
// covered and that eviction reaches for the first time since it entered or
// was last used is spared once: it goes back to its segment's most recent
// end, not counted as a use, and leaves when eviction reaches it again.
// Every other block (only side requests or background work covered it, or
// no request the record remembers) leaves when reached, as in plain LRU.
// So a turn block outlives the low-priority blocks of its age by at most
// one more pass through its segment, never for ever: the shift is bounded,
// not a strict order, because a strict order would keep old turn blocks
// while the side requests' fresh blocks churned, and would make a store
// full of turn blocks evict nothing. A store full of turn blocks still
// evicts each after its one reprieve, and one eviction gives at most
// maxSecondChances reprieves, after which it takes blocks as they come, so
// the capacity always holds.
func (s *Store) evictLocked(need int64) []victim {
	var vs []victim
	chances := 0
	for s.used+need > s.capacity {
		e := s.lru.victim()
		if e == nil {
			break
		}
		if chances < maxSecondChances {
			fi, err := os.Lstat(e.space.path(e.hash))
			switch {
			case err == nil && fi.ModTime().UnixNano() > e.mtime:
				chances++
				e.mtime = fi.ModTime().UnixNano()
				s.lru.use(e)
				continue
			case errors.Is(err, fs.ErrNotExist):
				s.removeLocked(e)
				vs = append(vs, victim{e.space, e.hash})
				continue
			}
			if s.sparedByPriority(e) {
				chances++
				e.spared = true
				s.lru.requeue(e)
				continue
			}
		}
		s.removeLocked(e)
		e.space.c.evicted++
		vs = append(vs, victim{e.space, e.hash})
	}
	return vs
}

// dropFiles deletes the files of evicted blocks and reports them.
func (s *Store) dropFiles(vs []victim) {
	for _, v := range vs {
		p := v.space.path(v.hash)
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			s.log.Warn("kvbm: remove evicted block", "path", p, "err", err)
		}
	}
	s.report(vs)
}

// report calls OnEvict once per space, in the order the blocks left.
func (s *Store) report(vs []victim) {
	if s.onEvict == nil || len(vs) == 0 {
		return
	}
	start := 0
	for i := 1; i <= len(vs); i++ {
		if i == len(vs) || vs[i].space != vs[start].space {
			hashes := make([]uint64, 0, i-start)
			for _, v := range vs[start:i] {
				hashes = append(hashes, v.hash)
			}
			s.onEvict(vs[start].space.name, hashes)
			start = i
		}
	}
}

// RemoveSpace deletes every block of the space, in the catalog and on disk
// (for when its model is removed); the Space stays usable, empty, and keeps
// its counters. OnEvict is not called. A process still
// writing to the space may leave blocks behind, which a later Rescan finds.
func (s *Store) RemoveSpace(name string) error {
	name = SanitizeSpaceName(name)
	s.mu.Lock()
	if sp := s.spaces[name]; sp != nil {
		for _, e := range sp.blocks {
			s.removeLocked(e)
		}
	}
	s.mu.Unlock()
	if err := os.RemoveAll(filepath.Join(s.root, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("kvbm: remove space %s: %w", name, err)
	}
	return nil
}

// Close ends the store's use: later calls of Put and Get return ErrClosed.
// The files stay for the next OpenStore.
func (s *Store) Close() error {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	return nil
}

// SpaceName is the space of an engine kind's blocks of a model at a block
// size: engines that share one hash each other's blocks alike.
func SpaceName(engine, model string, blockSize int) string {
	return SanitizeSpaceName(fmt.Sprintf("%s-%s-b%d", engine, model, blockSize))
}

// SpaceOfModel reports whether space is SpaceName's space of model for some
// engine kind and block size: the whole model name, never a part of it, so
// that "fp8" names no model's space. Engine kinds hold no '-'.
func SpaceOfModel(space, model string) bool {
	i := strings.LastIndex(space, "-b")
	if i < 0 || i+2 == len(space) || strings.Trim(space[i+2:], "0123456789") != "" {
		return false
	}
	engine, m, ok := strings.Cut(space[:i], "-")
	return ok && engine != "" && m != "" && m == SanitizeSpaceName(model)
}

// loadBuffers hold the payloads Load reads and drops.
var loadBuffers sync.Pool

// Load reads and verifies a block of size bytes and drops its payload, as
// an engine does when it copies the block to its GPU (a payload of holes,
// a sparse block, is verified by asking the file system, not by reading): with Has and Store
// it makes a Space an engine's node store (runtime/sim.NodeStore). A
// block of another size is an error.
func (sp *Space) Load(hash uint64, size int64) error {
	buf, _ := loadBuffers.Get().(*[]byte)
	if buf == nil {
		buf = new([]byte)
	}
	data, n, err := sp.get(hash, *buf, true)
	if cap(data) > cap(*buf) {
		*buf = data[:0]
	}
	loadBuffers.Put(buf)
	if err != nil {
		return err
	}
	if n != size {
		return fmt.Errorf("kvbm: load %016x: %d bytes, want %d", hash, n, size)
	}
	return nil
}

// Store writes a sparse block of size bytes (Put with no payload): the
// write-through of a simulated engine, which has no KV bytes to write.
func (sp *Space) Store(hash uint64, size int64) error { return sp.Put(hash, size, nil) }

// takeIn enters blocks another process says it wrote to the space (an
// engine's KV events of medium DISK name each block it stores), so that
// the store holds them to its capacity without walking the directory:
// each block the catalog lacks is looked up by its name (one stat) and
// entered at probation's most recent end. It evicts nothing (makeRoom
// does). A block whose file is not there, or not a regular file of at
// least a header, is skipped: a later Rescan enters it if it appears. It
// returns the bytes taken in.
func (s *Store) takeIn(space string, hashes []uint64) int64 {
	sp := s.Space(space)
	type found struct {
		hash        uint64
		size, mtime int64
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return 0
	}
	unknown := make([]uint64, 0, len(hashes))
	for _, h := range hashes {
		if sp.blocks[h] == nil {
			unknown = append(unknown, h)
		}
	}
	s.mu.Unlock()
	var fresh []found
	for _, h := range unknown {
		fi, err := os.Lstat(sp.path(h))
		if err != nil || !fi.Mode().IsRegular() || fi.Size() < HeaderSize {
			continue
		}
		fresh = append(fresh, found{h, fi.Size() - HeaderSize, fi.ModTime().UnixNano()})
	}
	if len(fresh) == 0 {
		return 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return 0
	}
	var taken int64
	for _, f := range fresh {
		if sp.blocks[f.hash] == nil {
			e := s.insertLocked(sp, f.hash, f.size, f.mtime)
			s.used += e.bytes()
			taken += e.bytes()
		}
	}
	return taken
}

// makeRoom evicts until the store's blocks and room more bytes fit in its
// capacity; room is at most half the capacity.
func (s *Store) makeRoom(room int64) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	victims := s.evictLocked(min(room, s.capacity/2))
	s.mu.Unlock()
	s.dropFiles(victims)
}
