package atomicfile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// Write replaces path with data, mode mode, atomically and durably. The
// temporary file is "."+base+".tmp-*" beside path; it is gone when Write
// returns, whether or not it succeeded. The mode is set before any data
// is written, so a key is never readable by others even for a moment.
func Write(path string, data []byte, mode fs.FileMode) error {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("atomicfile: %w", err)
	}
	defer os.Remove(tmp.Name()) // fails harmlessly once renamed
	err = tmp.Chmod(mode)
	if err == nil {
		_, err = tmp.Write(data)
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		return fmt.Errorf("atomicfile: write %s: %w", path, err)
	}
	return SyncDir(dir)
}

// SyncDir makes the entries of dir (a rename, a new or removed file)
// durable. A file system that cannot sync a directory
// (errors.ErrUnsupported) is not an error: the rename has happened and
// nothing better can be done there.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("atomicfile: %w", err)
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil && !errors.Is(err, errors.ErrUnsupported) {
		return fmt.Errorf("atomicfile: sync %s: %w", dir, err)
	}
	return nil
}
