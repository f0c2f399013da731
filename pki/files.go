package pki

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/hearth-llm/hearth/atomicfile"
)

// File is one file of a set: a name inside the set's directory, its
// contents and its mode (0600 for keys).
type File struct {
	Name string
	Data []byte
	Mode fs.FileMode
}

// journalName is the commit record of a set being put in place: the names
// of its files, one a line. While it exists, the staged files it names are
// the truth.
const journalName = ".pki-set"

// stagedName is where a set's file waits until the set is committed.
func stagedName(name string) string { return "." + name + ".new" }

// renameStaged moves a staged file into place; tests replace it to stop a
// commit half way.
var renameStaged = os.Rename

// WriteSet replaces files in dir (made 0700 if missing) as one: after a
// crash or an error, Recover leaves either all of the old files or all of
// the new. An error before the set is committed leaves the old files as
// they were; one after it is finished by the next Recover.
func WriteSet(dir string, files ...File) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("pki: %w", err)
	}
	if err := Recover(dir); err != nil {
		return err
	}
	names := make([]string, len(files))
	for i, f := range files {
		if !validName(f.Name) {
			return fmt.Errorf("pki: %q is not a file name", f.Name)
		}
		names[i] = f.Name
	}
	if err := stage(dir, files); err != nil {
		for _, name := range names {
			_ = os.Remove(filepath.Join(dir, stagedName(name)))
		}
		return err
	}
	if err := atomicfile.Write(filepath.Join(dir, journalName), []byte(strings.Join(names, "\n")+"\n"), 0o600); err != nil {
		return fmt.Errorf("pki: %w", err)
	}
	return finish(dir, names)
}

// stage writes every file under its staged name, durably.
func stage(dir string, files []File) error {
	for _, f := range files {
		if err := atomicfile.Write(filepath.Join(dir, stagedName(f.Name)), f.Data, f.Mode); err != nil {
			return fmt.Errorf("pki: %w", err)
		}
	}
	return nil
}

// Recover finishes a set that WriteSet committed in dir but did not put
// in place (the process died, or a rename failed). Readers of a set call
// it before they read; without a journal it does nothing.
func Recover(dir string) error {
	b, err := os.ReadFile(filepath.Join(dir, journalName))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("pki: %w", err)
	}
	names := strings.Fields(string(b))
	for _, name := range names {
		if !validName(name) {
			return fmt.Errorf("pki: %s names %q, which is not a file name", filepath.Join(dir, journalName), name)
		}
	}
	return finish(dir, names)
}

// finish moves a committed set's staged files into place and then drops
// the journal. A staged file already moved (by an earlier finish) is
// skipped, so finishing twice is harmless.
func finish(dir string, names []string) error {
	for _, name := range names {
		err := renameStaged(filepath.Join(dir, stagedName(name)), filepath.Join(dir, name))
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("pki: %w", err)
		}
	}
	if err := atomicfile.SyncDir(dir); err != nil {
		return fmt.Errorf("pki: %w", err)
	}
	if err := os.Remove(filepath.Join(dir, journalName)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("pki: %w", err)
	}
	if err := atomicfile.SyncDir(dir); err != nil {
		return fmt.Errorf("pki: %w", err)
	}
	return nil
}

func validName(name string) bool {
	return name != "" && name != "." && name != ".." && name != journalName && !strings.ContainsAny(name, "/\\\n\r\t ")
}
