package sim

import (
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	hruntime "github.com/hearth-llm/hearth/runtime"
)

// TestSGLangFileStorePages: the SGLang flavour with HiCache's file backend
// writes each page as "<64 hex SHA-256 digest>_<model>_0_1.bin" at the
// directory's root (the digest's first 16 hex digits being the page's event
// hash), the page's bytes long, with no temp file left; a second engine
// loads the pages from there.
func TestSGLangFileStorePages(t *testing.T) {
	const bs = 16
	dir := t.TempDir()
	store, err := NewSGLangFileStore(dir, "Qwen/Qwen3-8B")
	if err != nil {
		t.Fatal(err)
	}
	prefix := tokens(0, 10*bs)
	cfg := Config{NumGPUBlocks: 64, Store: store, MaxModelLen: 1024, Kind: hruntime.KindSGLang, BlockSize: bs}
	a := newCore(t, cfg, nil)
	runOne(t, newDriver(a), "turn1", prefix, 1)

	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	var want []string
	for _, h := range SGLangBlockHashes(prefix, bs) {
		want = append(want, fmt.Sprintf("%016x", h))
	}
	if len(names) != len(want) {
		t.Fatalf("files %q, want %d pages", names, len(want))
	}
	for _, n := range names {
		stem, ok := strings.CutSuffix(n, "_Qwen-Qwen3-8B_0_1.bin")
		if !ok || len(stem) != 64 || !slices.Contains(want, stem[:16]) {
			t.Errorf("file %q is no page of the prompt in SGLang's layout", n)
			continue
		}
		if _, err := hex.DecodeString(stem); err != nil {
			t.Errorf("file %q: %v", n, err)
		}
		fi, err := os.Stat(filepath.Join(dir, n))
		if err != nil || fi.Size() != a.blockBytes {
			t.Errorf("file %q: %v, size %d, want %d", n, err, fi.Size(), a.blockBytes)
		}
	}

	b := newCore(t, cfg, nil)
	out := runOne(t, newDriver(b), "turn2", concat(prefix, tokens(90_000, bs+3)), 1)
	if s := b.Stats(); s.DiskLoadedBlocks != 10 || out[0].CachedTokens != 10*bs {
		t.Errorf("second engine loaded %d pages, %d cached tokens; want 10 and %d", s.DiskLoadedBlocks, out[0].CachedTokens, 10*bs)
	}
}

// TestSGLangFileStoreWrite: a page goes to
// "<page>.bin.tmp.<pid>.<thread id>.<32 hex>" first and is renamed onto
// its name; a write whose rename fails leaves neither the page nor the
// temp file, and a page of the wrong size does not load.
func TestSGLangFileStoreWrite(t *testing.T) {
	dir := t.TempDir()
	store, err := NewSGLangFileStore(dir, "m")
	if err != nil {
		t.Fatal(err)
	}
	p := Page{Hash: 1, Digest: [32]byte{0: 0xab, 31: 0xcd}}
	// A directory where the page should go makes the rename fail.
	if err := os.Mkdir(store.PagePath(p.Digest), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := store.Store(p, 100); err == nil {
		t.Fatal("Store succeeded over a directory")
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 {
		t.Errorf("a failed write left %d files, want only the directory in the way", len(ents))
	}
	if err := os.Remove(store.PagePath(p.Digest)); err != nil {
		t.Fatal(err)
	}
	if err := store.Store(p, 100); err != nil {
		t.Fatal(err)
	}
	if !store.Has(p) || store.Load(p, 100) != nil {
		t.Error("a stored page is not there to load")
	}
	if store.Load(p, 200) == nil {
		t.Error("a page of the wrong size loaded")
	}
	if got := filepath.Base(store.PagePath(p.Digest)); got != "ab"+strings.Repeat("0", 60)+"cd_m_0_1.bin" {
		t.Errorf("page name %q", got)
	}
}
