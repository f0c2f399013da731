package kvbm

import (
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
)

// Write grants: how the daemon keeps engines from passing the node store's
// capacity between two announcements.
//
// An engine announces the blocks it wrote when its scheduler step ends, and
// a step writes up to a few hundred blocks, so the store cannot evict ahead
// of what it has not been told. Each engine process that announces (a
// writer, named by its engine) is granted a write budget instead: it may
// have at most grant bytes of blocks written and not yet taken in by the
// daemon. The daemon publishes, per writer, how many of its blocks it has
// taken in (announced) and the budget, in <root>/.grants/<writer>; the
// writer counts the blocks it wrote and, before each write, checks that
// (written - announced + 1) blocks fit in the budget, reading the file
// again only when they do not. The store evicts so that its blocks plus
// every writer's budget fit in its capacity, so the files on disk never
// pass it. A writer refused a write skips the block (the simulated engine
// writes it through at a later step, as after a full disk).
//
// Counts are cumulative, so a lost or repeated read changes nothing: a
// writer that reads a count above its own (its announcements arrived after
// it restarted and counted from the file) takes the count as its own; a
// count that went down (the daemon restarted and counts from zero) keeps
// the writer's outstanding blocks outstanding. A writer whose daemon has
// not published its grant writes nothing. A KV event lost on the way costs
// its writer that block's credit until the writer restarts.

// grantsDir is the directory of grant files under the store's root; its
// leading dot keeps it out of the spaces (SanitizeSpaceName).
const grantsDir = ".grants"

// grantMagic starts a grant file.
const grantMagic = "hearth-kv-grant 1"

// maxGrantFile bounds what a writer reads of a grant file.
const maxGrantFile = 256

// grantShare is the share of the capacity the writers' budgets take
// together: the store's blocks keep the rest.
const grantShare = 8

// grantPath is the grant file of writer under root.
func grantPath(root, writer string) string {
	return filepath.Join(root, grantsDir, SanitizeSpaceName(writer))
}

// grant is one writer's published state.
type grant struct {
	announced int64 // blocks of the writer's the daemon took in
	budget    int64 // bytes the writer may have written and not yet taken in
}

func (g grant) encode() []byte {
	return []byte(fmt.Sprintf("%s\nannounced %d\nbudget %d\n", grantMagic, g.announced, g.budget))
}

// parseGrant reads a grant file's contents.
func parseGrant(b []byte) (grant, error) {
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	if len(lines) != 3 || lines[0] != grantMagic {
		return grant{}, errors.New("kvbm: not a grant file")
	}
	var g grant
	for i, key := range []string{"announced", "budget"} {
		k, v, ok := strings.Cut(lines[i+1], " ")
		if !ok || k != key {
			return grant{}, fmt.Errorf("kvbm: grant file: want %s, got %q", key, lines[i+1])
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return grant{}, fmt.Errorf("kvbm: grant file: %s %q", key, v)
		}
		if i == 0 {
			g.announced = n
		} else {
			g.budget = n
		}
	}
	return g, nil
}

// writeGrant replaces writer's grant file under root (temp and rename, so a
// reader sees one whole grant); it is not synced: a crash loses the
// daemon's counts with it.
func writeGrant(root, writer string, g grant) error {
	dir := filepath.Join(root, grantsDir)
	if err := os.MkdirAll(dir, dirMode); err != nil {
		return fmt.Errorf("kvbm: grant: %w", err)
	}
	path := grantPath(root, writer)
	tmp := filepath.Join(dir, "."+filepath.Base(path)+"."+strconv.FormatUint(rand.Uint64(), 36)+".tmp")
	if err := os.WriteFile(tmp, g.encode(), fileMode); err != nil {
		return fmt.Errorf("kvbm: grant: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("kvbm: grant: %w", err)
	}
	return nil
}

// ErrNoGrant is a write refused for want of budget: the writer has as many
// bytes written and not yet taken in by the daemon as it was granted.
var ErrNoGrant = errors.New("kvbm: node KV store: write budget spent until the daemon takes in what was written")

// writeBudget is a writer's side of its grant.
type writeBudget struct {
	path string

	mu      sync.Mutex
	read    bool  // a grant was read
	seen    int64 // announced, as last read
	written int64 // blocks written, counted as announced counts them
	budget  int64
}

func newWriteBudget(root, writer string) *writeBudget {
	b := &writeBudget{path: grantPath(root, writer)}
	b.refresh()
	return b
}

// take reserves room for one block of size bytes, reading the grant again
// when what was read does not leave it; false: no room. A reserved block
// not written is given back with giveBack.
func (b *writeBudget) take(size int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.fits(size) {
		b.refresh()
		if !b.fits(size) {
			return false
		}
	}
	b.written++
	return true
}

func (b *writeBudget) giveBack() {
	b.mu.Lock()
	b.written--
	b.mu.Unlock()
}

func (b *writeBudget) fits(size int64) bool {
	return b.read && (b.written-b.seen+1)*size <= b.budget
}

// refresh reads the grant file; a missing or unreadable one leaves what
// was read.
func (b *writeBudget) refresh() {
	f, err := os.Open(b.path)
	if err != nil {
		return
	}
	buf := make([]byte, maxGrantFile)
	n, _ := f.Read(buf)
	f.Close()
	g, err := parseGrant(buf[:n])
	if err != nil {
		return
	}
	switch {
	case !b.read:
		b.written = g.announced
	case g.announced < b.seen: // the daemon counts from zero again
		b.written = g.announced + max(b.written-b.seen, 0)
	}
	b.written = max(b.written, g.announced)
	b.read, b.seen, b.budget = true, g.announced, g.budget
}

// removeGrants deletes every grant file under root: a daemon opening the
// store counts from zero.
func removeGrants(root string) error {
	err := os.RemoveAll(filepath.Join(root, grantsDir))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("kvbm: grants: %w", err)
	}
	return nil
}
