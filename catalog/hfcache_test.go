package catalog

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

func readTestdata(t testing.TB, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "hf", name))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// fakeRepo writes a cached repository the way huggingface_hub lays it out:
// files as blobs, linked from snapshots/<commit>/, and refs/main naming the
// commit unless commit is "" (then the snapshot is "snap").
func fakeRepo(t testing.TB, cache, repo, commit string, files map[string][]byte) string {
	t.Helper()
	dir := filepath.Join(cache, "models--"+strings.ReplaceAll(repo, "/", "--"))
	snapName := commit
	if commit == "" {
		snapName = "snap"
	} else {
		must(t, os.MkdirAll(filepath.Join(dir, "refs"), 0o755))
		must(t, os.WriteFile(filepath.Join(dir, "refs", "main"), []byte(commit), 0o644))
	}
	snap := filepath.Join(dir, "snapshots", snapName)
	must(t, os.MkdirAll(snap, 0o755))
	must(t, os.MkdirAll(filepath.Join(dir, "blobs"), 0o755))
	for name, data := range files {
		blob := filepath.Join(dir, "blobs", snapName+"-"+name)
		must(t, os.WriteFile(blob, data, 0o644))
		must(t, os.Symlink(filepath.Join("..", "..", "blobs", snapName+"-"+name), filepath.Join(snap, name)))
	}
	return snap
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// safetensorsFile builds a safetensors file of the given tensors (name to
// byte length), each BF16 of shape [bytes/2].
func safetensorsFile(tensors map[string]int) []byte {
	var header strings.Builder
	header.WriteString(`{"__metadata__":{"format":"pt"}`)
	offset := 0
	for name, n := range tensors {
		header.WriteString(`,"` + name + `":{"dtype":"BF16","shape":[` + itoa(n/2) + `],"data_offsets":[` + itoa(offset) + `,` + itoa(offset+n) + `]}`)
		offset += n
	}
	header.WriteString("}")
	var b bytes.Buffer
	binary.Write(&b, binary.LittleEndian, uint64(header.Len()))
	b.WriteString(header.String())
	b.Write(make([]byte, offset))
	return b.Bytes()
}

func itoa(n int) string { return strconv.Itoa(n) }

func TestHFCacheDir(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		want string
	}{
		{"hub cache wins", map[string]string{"HF_HUB_CACHE": "/hub", "HF_HOME": "/hf", "HOME": "/home/u"}, "/hub"},
		{"HF_HOME", map[string]string{"HF_HOME": "/hf", "XDG_CACHE_HOME": "/xdg", "HOME": "/home/u"}, "/hf/hub"},
		{"XDG cache", map[string]string{"XDG_CACHE_HOME": "/xdg", "HOME": "/home/u"}, "/xdg/huggingface/hub"},
		{"home", map[string]string{"HOME": "/home/u"}, "/home/u/.cache/huggingface/hub"},
		{"nothing", nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := HFCacheDir(func(k string) string { return tt.env[k] }); got != tt.want {
				t.Errorf("HFCacheDir = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestHFHome(t *testing.T) {
	for _, tt := range []struct {
		name string
		env  map[string]string
		want string
	}{
		{"HF_HOME", map[string]string{"HF_HOME": "/hf", "XDG_CACHE_HOME": "/xdg", "HOME": "/home/u"}, "/hf"},
		{"XDG cache", map[string]string{"XDG_CACHE_HOME": "/xdg", "HOME": "/home/u"}, "/xdg/huggingface"},
		{"home", map[string]string{"HOME": "/home/u"}, "/home/u/.cache/huggingface"},
		{"nothing", nil, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := HFHome(func(k string) string { return tt.env[k] }); got != tt.want {
				t.Errorf("HFHome = %q, want %q", got, tt.want)
			}
		})
	}
}

// TestReadHFHome: --hf-cache names Hugging Face's home; its hub directory
// given instead is taken for the home above it, with a note, and a hub
// cache under another name is refused with what to give.
func TestReadHFHome(t *testing.T) {
	home := t.TempDir()
	hub := filepath.Join(home, "hub")
	fakeRepo(t, hub, "acme/tiny", "", map[string][]byte{"config.json": []byte("{}")})
	other := t.TempDir()
	fakeRepo(t, other, "acme/tiny", "", map[string][]byte{"config.json": []byte("{}")})
	for _, tc := range []struct {
		name, dir, want, note, err string
	}{
		{name: "a home", dir: home, want: home},
		{name: "a home not made yet", dir: filepath.Join(home, "new"), want: filepath.Join(home, "new")},
		{name: "its hub", dir: hub, want: home, note: "is a Hugging Face hub directory; taking " + home},
		{name: "its hub, with a slash", dir: hub + "/", want: home, note: "is a Hugging Face hub directory"},
		{name: "a hub by another name", dir: other, err: "holds the models themselves"},
		{name: "none", dir: "", want: ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, note, err := ReadHFHome(tc.dir)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("ReadHFHome(%q) = %q, %v; want an error saying %q", tc.dir, got, err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want || (tc.note == "") != (note == "") || !strings.Contains(note, tc.note) {
				t.Errorf("ReadHFHome(%q) = %q, %q, %v; want %q with a note saying %q", tc.dir, got, note, err, tc.want, tc.note)
			}
		})
	}
}

func TestModelFromHFCache(t *testing.T) {
	cache := t.TempDir()
	fakeRepo(t, cache, "Qwen/Qwen3-14B-FP8", "0123abcd", map[string][]byte{
		"config.json":                  readTestdata(t, "qwen3-14b-fp8.config.json"),
		"model.safetensors.index.json": readTestdata(t, "qwen3-14b-fp8.index.json"),
	})
	fakeRepo(t, cache, "Qwen/Qwen3-Coder-30B-A3B-Instruct-FP8", "c0de", map[string][]byte{
		"config.json":                  readTestdata(t, "qwen3-coder-30b-a3b-fp8.config.json"),
		"model.safetensors.index.json": []byte(`{"metadata":{"total_size":31200000000},"weight_map":{}}`),
	})
	fakeRepo(t, cache, "acme/tiny-llama", "", map[string][]byte{
		"config.json":       readTestdata(t, "llama-mha-compressed.config.json"),
		"model.safetensors": safetensorsFile(map[string]int{"a": 1000, "b": 24}),
	})
	fakeRepo(t, cache, "acme/vision", "", map[string][]byte{
		"config.json":                  readTestdata(t, "vision-text-config.config.json"),
		"model.safetensors.index.json": []byte(`{"metadata":{"total_size":1.6e10}}`),
	})

	t.Run("dense FP8 from its index", func(t *testing.T) {
		m, err := ModelFromHFCache(cache, "Qwen/Qwen3-14B-FP8")
		if err != nil {
			t.Fatal(err)
		}
		want, _ := LookupModel("qwen3-14b-fp8")
		if m.Layers != want.Layers || m.QueryHeads != want.QueryHeads || m.KVHeads != want.KVHeads || m.HeadDim != want.HeadDim ||
			m.Hidden != want.Hidden || m.Intermediate != want.Intermediate || m.MaxModelLen != want.MaxModelLen || !m.FP8 ||
			m.WeightBytes != 16325277696 || m.Name != "qwen3-14b-fp8" || m.Family != FamilyQwen3 || m.ActiveParams != 0 {
			t.Errorf("got %+v", m)
		}
		// 14.8B by the model card; the shape gives it without the norms.
		if math.Abs(m.Params-14.8e9) > 0.05e9 {
			t.Errorf("params %v, want about 14.8e9", m.Params)
		}
	})
	t.Run("mixture of experts", func(t *testing.T) {
		m, err := ModelFromHFCache(cache, "Qwen/Qwen3-Coder-30B-A3B-Instruct-FP8")
		if err != nil {
			t.Fatal(err)
		}
		want, _ := LookupModel("qwen3-coder-30b-a3b-fp8")
		if m.KVBytesPerToken() != want.KVBytesPerToken() || m.Intermediate != 8*768 || m.Family != FamilyQwen3Coder ||
			m.MaxModelLen != 262144 || !m.FP8 {
			t.Errorf("got %+v", m)
		}
		if math.Abs(m.Params-30.5e9) > 0.2e9 || math.Abs(m.ActiveParams-3.3e9) > 0.1e9 {
			t.Errorf("params %v, active %v; want about 30.5e9 and 3.3e9", m.Params, m.ActiveParams)
		}
	})
	t.Run("single file, multi-head attention, compressed-tensors FP8, no refs", func(t *testing.T) {
		m, err := ModelFromHFCache(cache, "acme/tiny-llama")
		if err != nil {
			t.Fatal(err)
		}
		if m.WeightBytes != 1024 || m.KVHeads != 32 || m.HeadDim != 64 || !m.FP8 || m.Family != "" || m.Name != "tiny-llama" {
			t.Errorf("got %+v", m)
		}
	})
	t.Run("text config of a multimodal model, FP32 loaded in 16 bits", func(t *testing.T) {
		m, err := ModelFromHFCache(cache, "acme/vision")
		if err != nil {
			t.Fatal(err)
		}
		if m.Layers != 36 || m.KVHeads != 8 || m.MaxModelLen != 262144 || m.WeightBytes != 0.8e10 || m.FP8 {
			t.Errorf("got %+v", m)
		}
	})
	t.Run("absent", func(t *testing.T) {
		if _, err := ModelFromHFCache(cache, "Qwen/Qwen3-8B"); !errors.Is(err, ErrNotCached) {
			t.Errorf("got %v, want ErrNotCached", err)
		}
	})
	t.Run("not a repository id", func(t *testing.T) {
		for _, repo := range []string{"qwen3-8b", "../etc/passwd", "a/..", "a/b/c", "/b"} {
			if _, err := ModelFromHFCache(cache, repo); err == nil || errors.Is(err, ErrNotCached) {
				t.Errorf("%q: got %v, want a bad-id error", repo, err)
			}
		}
	})
}

func TestSnapshotChoice(t *testing.T) {
	cache := t.TempDir()
	config := readTestdata(t, "qwen3-14b-fp8.config.json")
	index := func(size string) []byte { return []byte(`{"metadata":{"total_size":` + size + `}}`) }

	// refs/main names the snapshot even when another is newer.
	fakeRepo(t, cache, "o/pinned", "old", map[string][]byte{"config.json": config, "model.safetensors.index.json": index("1000")})
	fakeRepo(t, cache, "o/pinned", "new", map[string][]byte{"config.json": config, "model.safetensors.index.json": index("2000")})
	must(t, os.WriteFile(filepath.Join(cache, "models--o--pinned", "refs", "main"), []byte("old\n"), 0o644))
	if m, err := ModelFromHFCache(cache, "o/pinned"); err != nil || m.WeightBytes != 1000 {
		t.Errorf("pinned: %v, %v; want the snapshot refs/main names", m.WeightBytes, err)
	}

	// Without refs, the newest snapshot.
	dir := filepath.Join(cache, "models--o--loose", "snapshots")
	for i, name := range []string{"b", "a"} {
		snap := filepath.Join(dir, name)
		must(t, os.MkdirAll(snap, 0o755))
		must(t, os.WriteFile(filepath.Join(snap, "config.json"), config, 0o644))
		must(t, os.WriteFile(filepath.Join(snap, "model.safetensors.index.json"), index(itoa(1000*(i+1))), 0o644))
		when := time.Now().Add(time.Duration(i) * time.Hour)
		must(t, os.Chtimes(snap, when, when))
	}
	if m, err := ModelFromHFCache(cache, "o/loose"); err != nil || m.WeightBytes != 2000 {
		t.Errorf("loose: %v, %v; want the newest snapshot", m.WeightBytes, err)
	}

	// A download in progress: config, no weights yet.
	fakeRepo(t, cache, "o/partial", "p", map[string][]byte{"config.json": config})
	if _, err := ModelFromHFCache(cache, "o/partial"); !errors.Is(err, ErrNotCached) {
		t.Errorf("partial: %v, want ErrNotCached", err)
	}
	// Nonsense is an error, not a miss.
	fakeRepo(t, cache, "o/broken", "b", map[string][]byte{"config.json": []byte(`{"num_hidden_layers": 0}`),
		"model.safetensors.index.json": index("1000")})
	if _, err := ModelFromHFCache(cache, "o/broken"); err == nil || errors.Is(err, ErrNotCached) {
		t.Errorf("broken: %v, want a parse error", err)
	}
}

func TestResolveModel(t *testing.T) {
	cache := t.TempDir()
	fakeRepo(t, cache, "Qwen/Qwen3-14B-FP8", "r", map[string][]byte{
		"config.json":                  readTestdata(t, "qwen3-14b-fp8.config.json"),
		"model.safetensors.index.json": readTestdata(t, "qwen3-14b-fp8.index.json"),
	})
	fakeRepo(t, cache, "acme/tiny-llama", "r", map[string][]byte{
		"config.json":       readTestdata(t, "llama-mha-compressed.config.json"),
		"model.safetensors": safetensorsFile(map[string]int{"w": 2048}),
	})
	catalog14, _ := LookupModel("qwen3-14b-fp8")

	t.Run("the cache's figures override the catalog's", func(t *testing.T) {
		for _, name := range []string{"qwen3-14b-fp8", "Qwen/Qwen3-14B-FP8"} {
			m, err := ResolveModel(name, cache)
			if err != nil {
				t.Fatal(err)
			}
			if m.WeightBytes != 16325277696 || m.Name != catalog14.Name || m.Params != catalog14.Params || m.Family != catalog14.Family {
				t.Errorf("%s: got %+v", name, m)
			}
		}
	})
	t.Run("a catalog model the cache lacks", func(t *testing.T) {
		m, err := ResolveModel("qwen3-8b", cache)
		if want, _ := LookupModel("qwen3-8b"); err != nil || m != want {
			t.Errorf("got %+v, %v; want the catalog's", m, err)
		}
		if m, err := ResolveModel("qwen3-8b", ""); err != nil || m.Name != "qwen3-8b" {
			t.Errorf("no cache: got %+v, %v", m, err)
		}
	})
	t.Run("a repository only the cache has", func(t *testing.T) {
		m, err := ResolveModel("acme/tiny-llama", cache)
		if err != nil || m.WeightBytes != 2048 || m.Repo != "acme/tiny-llama" {
			t.Errorf("got %+v, %v", m, err)
		}
	})
	t.Run("unknown anywhere names both places", func(t *testing.T) {
		_, err := ResolveModel("acme/nothing", cache)
		if err == nil || !strings.Contains(err.Error(), "catalog (qwen3-14b-fp8,") || !strings.Contains(err.Error(), cache) {
			t.Errorf("got %v, want an error naming the catalog and %s", err, cache)
		}
		if _, err := ResolveModel("acme/nothing", ""); err == nil || !strings.Contains(err.Error(), "catalog") {
			t.Errorf("no cache: got %v", err)
		}
	})
}

func TestParseHFConfigRejectsNonsense(t *testing.T) {
	valid := `"num_attention_heads": 8, "num_key_value_heads": 2, "head_dim": 64, "hidden_size": 512, "intermediate_size": 1024, "max_position_embeddings": 4096`
	for name, body := range map[string]string{
		"not JSON":               `{`,
		"zero layers":            `{"num_hidden_layers": 0, ` + valid + `}`,
		"negative layers":        `{"num_hidden_layers": -4, ` + valid + `}`,
		"fractional layers":      `{"num_hidden_layers": 2.5, ` + valid + `}`,
		"KV heads not dividing":  `{"num_hidden_layers": 2, "num_attention_heads": 8, "num_key_value_heads": 3, "head_dim": 64, "hidden_size": 512, "max_position_embeddings": 4096}`,
		"no head width":          `{"num_hidden_layers": 2, "num_attention_heads": 7, "hidden_size": 512, "max_position_embeddings": 4096}`,
		"negative width":         `{"num_hidden_layers": 2, "num_attention_heads": 8, "head_dim": 64, "hidden_size": -512, "max_position_embeddings": 4096}`,
		"no context":             `{"num_hidden_layers": 2, "num_attention_heads": 8, "head_dim": 64, "hidden_size": 512}`,
		"more experts per token": `{"num_hidden_layers": 2, ` + valid + `, "num_experts": 4, "num_experts_per_tok": 8, "moe_intermediate_size": 64}`,
		"huge":                   `{"num_hidden_layers": 99999999, ` + valid + `}`,
	} {
		if _, err := parseHFConfig([]byte(body)); err == nil {
			t.Errorf("%s: accepted %s", name, body)
		}
	}
	if _, err := parseHFConfig([]byte(`{"num_hidden_layers": 2, ` + valid + `}`)); err != nil {
		t.Errorf("valid config rejected: %v", err)
	}
}

func TestParseSafetensorsRejectsNonsense(t *testing.T) {
	good := safetensorsFile(map[string]int{"w": 64})
	if n, err := parseSafetensors(bytes.NewReader(good), int64(len(good))); err != nil || n != 64 {
		t.Fatalf("good file: %d, %v", n, err)
	}
	header := func(h string) []byte {
		var b bytes.Buffer
		binary.Write(&b, binary.LittleEndian, uint64(len(h)))
		b.WriteString(h)
		b.Write(make([]byte, 16))
		return b.Bytes()
	}
	for name, data := range map[string][]byte{
		"empty":             nil,
		"short":             {1, 2, 3},
		"header past end":   append([]byte{0xff, 0xff, 0, 0, 0, 0, 0, 0}, '{', '}'),
		"not JSON":          header("{nope"),
		"offsets past data": header(`{"w":{"dtype":"BF16","shape":[8],"data_offsets":[0,64]}}`),
		"offsets reversed":  header(`{"w":{"dtype":"BF16","shape":[8],"data_offsets":[8,0]}}`),
		"negative offsets":  header(`{"w":{"dtype":"BF16","shape":[8],"data_offsets":[-8,0]}}`),
		"no tensors":        header(`{"__metadata__":{}}`),
		"overlapping":       header(`{"a":{"data_offsets":[0,16]},"b":{"data_offsets":[0,16]}}`),
		"truncated":         good[:len(good)-1],
	} {
		if n, err := parseSafetensors(bytes.NewReader(data), int64(len(data))); err == nil {
			t.Errorf("%s: accepted with %d bytes", name, n)
		}
	}
}

func TestParseSafetensorsIndexRejectsNonsense(t *testing.T) {
	for name, body := range map[string]string{
		"no metadata": `{"weight_map":{}}`,
		"zero":        `{"metadata":{"total_size":0}}`,
		"negative":    `{"metadata":{"total_size":-5}}`,
		"fraction":    `{"metadata":{"total_size":1.5}}`,
		"string":      `{"metadata":{"total_size":"big"}}`,
		"huge":        `{"metadata":{"total_size":1e300}}`,
		"not JSON":    `[`,
	} {
		if n, err := parseSafetensorsIndex([]byte(body)); err == nil {
			t.Errorf("%s: accepted as %d", name, n)
		}
	}
}

func FuzzParseHFConfig(f *testing.F) {
	for _, name := range []string{"qwen3-14b-fp8.config.json", "qwen3-coder-30b-a3b-fp8.config.json",
		"llama-mha-compressed.config.json", "vision-text-config.config.json"} {
		f.Add(readTestdata(f, name))
	}
	f.Add([]byte(`{"num_hidden_layers": 0}`))
	f.Add([]byte(`{"text_config": {"text_config": {}}}`))
	f.Add([]byte(`{"num_hidden_layers":1,"num_attention_heads":1,"hidden_size":1,"max_position_embeddings":1,"head_dim":null}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := parseHFConfig(data)
		if err != nil {
			return
		}
		m := c.model("o/n", 1)
		if m.Layers < 1 || m.QueryHeads < 1 || m.KVHeads < 1 || m.HeadDim < 1 || m.Hidden < 1 || m.MaxModelLen < 1 ||
			m.QueryHeads%m.KVHeads != 0 || m.KVBytesPerToken() < 1 || m.Intermediate < 0 {
			t.Fatalf("accepted a config with an unusable shape: %+v", m)
		}
		if math.IsNaN(m.Params) || math.IsInf(m.Params, 0) || m.Params < 0 || m.ActiveParams > m.Params {
			t.Fatalf("parameter counts %v, %v", m.Params, m.ActiveParams)
		}
	})
}

func FuzzParseSafetensorsIndex(f *testing.F) {
	f.Add(readTestdata(f, "qwen3-14b-fp8.index.json"))
	f.Add([]byte(`{"metadata":{"total_size":1.6e10}}`))
	f.Add([]byte(`{"metadata":{"total_size":-1}}`))
	f.Add([]byte(`{"metadata":null}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		n, err := parseSafetensorsIndex(data)
		if err == nil && (n < 1 || n > maxWeightBytes) {
			t.Fatalf("accepted total size %d", n)
		}
	})
}

func FuzzParseSafetensors(f *testing.F) {
	f.Add(safetensorsFile(map[string]int{"a": 16, "b": 32}))
	f.Add(safetensorsFile(nil))
	f.Add([]byte{2, 0, 0, 0, 0, 0, 0, 0, '{', '}'})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, data []byte) {
		n, err := parseSafetensors(bytes.NewReader(data), int64(len(data)))
		if err == nil && (n < 1 || n > uint64(len(data))) {
			t.Fatalf("accepted %d tensor bytes in a file of %d", n, len(data))
		}
	})
}
