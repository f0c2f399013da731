package sim

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// SGLangFileStore is SGLang's HiCache file backend (HiCacheFile, its
// mem_cache/hicache_storage.py) as one rank of a non-MLA model writes it:
// one file per page in one directory, "<64 hex digest><suffix>.bin" with
// the suffix "_<served model name, '/' made '-'>_<rank>_<ranks>", holding
// the page's bytes and nothing else. A page is written to
// "<page>.bin.tmp.<pid>.<thread id>.<uuid hex>" and renamed onto its name,
// so a reader sees all of it or nothing, and a writer killed mid-write
// leaves the temp file behind. It evicts nothing: Hearth's node store
// holds the directory to a capacity (kvbm.ForeignSpace).
type SGLangFileStore struct {
	dir, suffix string
}

// NewSGLangFileStore opens the file backend's directory, creating it as
// SGLang does, for a model served under the given name.
func NewSGLangFileStore(dir, servedModel string) (*SGLangFileStore, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("hicache file storage: %w", err)
	}
	// The simulator plays one rank: rank 0 of 1.
	return &SGLangFileStore{dir: dir, suffix: "_" + strings.ReplaceAll(servedModel, "/", "-") + "_0_1"}, nil
}

// PagePath is the file of the page with the given digest.
func (s *SGLangFileStore) PagePath(digest [32]byte) string {
	return filepath.Join(s.dir, hex.EncodeToString(digest[:])+s.suffix+".bin")
}

// Has reports whether the page's file is there.
func (s *SGLangFileStore) Has(p Page) bool {
	_, err := os.Stat(s.PagePath(p.Digest))
	return err == nil
}

// Load reads the page's file; one gone or of the wrong size fails the
// page, as SGLang's short read does.
func (s *SGLangFileStore) Load(p Page, bytes int64) error {
	fi, err := os.Stat(s.PagePath(p.Digest))
	if err != nil {
		return err
	}
	if fi.Size() != bytes {
		return fmt.Errorf("short read for %s: %d bytes, want %d", filepath.Base(s.PagePath(p.Digest)), fi.Size(), bytes)
	}
	return nil
}

// Store writes the page through a temp file renamed into place; a failed
// write removes its temp file.
func (s *SGLangFileStore) Store(p Page, bytes int64) error {
	path := s.PagePath(p.Digest)
	var uuid [16]byte
	rand.Read(uuid[:])
	tmp := fmt.Sprintf("%s.tmp.%d.%d.%s", path, os.Getpid(), unix.Gettid(), hex.EncodeToString(uuid[:]))
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	err = f.Truncate(bytes) // the page's size: the simulator has no KV data
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		if rerr := os.Remove(tmp); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
			err = errors.Join(err, rerr)
		}
	}
	return err
}
