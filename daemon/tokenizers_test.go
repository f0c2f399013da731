package daemon

import (
	"compress/gzip"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hearth-llm/hearth/catalog"
	hruntime "github.com/hearth-llm/hearth/runtime"
	"github.com/hearth-llm/hearth/tokenizer"
)

// writeCachedTokenizer lays out repo in the Hugging Face cache under
// hfCache (its hub/) with the given tokenizer files.
func writeCachedTokenizer(t *testing.T, hfCache, repo string, tokJSON, cfgJSON []byte) {
	t.Helper()
	snap := filepath.Join(hfCache, "hub", "models--"+strings.ReplaceAll(repo, "/", "--"), "snapshots", "abc123")
	if err := os.MkdirAll(snap, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{"tokenizer.json": tokJSON, "tokenizer_config.json": cfgJSON} {
		if err := os.WriteFile(filepath.Join(snap, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// qwen3TokenizerJSON is the vocabulary built into the binary, as a file:
// a real byte-level tokenizer.json to put under another model's name.
func qwen3TokenizerJSON(t *testing.T) []byte {
	t.Helper()
	f, err := os.Open(filepath.Join("..", "tokenizer", "models", "qwen3", "tokenizer.json.gz"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	data, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func TestSpecTokenizersUseEachModelsCachedFiles(t *testing.T) {
	const llama = "meta-llama/Llama-3.1-8B-Instruct"
	hfCache := t.TempDir()
	tokJSON := qwen3TokenizerJSON(t)
	cfgJSON := []byte(`{"model_max_length": 131072, "bos_token": "<|endoftext|>"}`)
	writeCachedTokenizer(t, hfCache, llama, tokJSON, cfgJSON)
	fromFiles, err := tokenizer.LoadFiles(tokJSON, cfgJSON)
	if err != nil {
		t.Fatal(err)
	}
	builtin, err := tokenizer.Qwen3()
	if err != nil {
		t.Fatal(err)
	}
	spec := func(name, model string) hruntime.Spec {
		return hruntime.Spec{Name: name, Model: catalog.ModelRepo(model), ModelPath: catalog.ModelRepo(model)}
	}

	t.Run("the served model's own files", func(t *testing.T) {
		tok, byModel, err := specTokenizers(Config{HFCache: hfCache}, []hruntime.Spec{spec("gpu0", llama), spec("gpu1", llama)})
		if err != nil {
			t.Fatal(err)
		}
		if tok.Fingerprint() != fromFiles.Fingerprint() || tok.MaxModelLen() != 131072 {
			t.Fatalf("the gateway's tokenizer is not the one in the cache (max model len %d)", tok.MaxModelLen())
		}
		if len(byModel) != 1 || byModel[llama] != tok {
			t.Fatalf("byModel = %v", byModel)
		}
		direct, err := ModelTokenizer(llama, hfCache)
		if err != nil || direct.Fingerprint() != fromFiles.Fingerprint() {
			t.Fatalf("ModelTokenizer = %v, %v", direct, err)
		}
	})
	t.Run("a model without files is refused, not hashed with Qwen3's vocabulary", func(t *testing.T) {
		_, _, err := specTokenizers(Config{HFCache: t.TempDir()}, []hruntime.Spec{spec("gpu0", llama)})
		if !errors.Is(err, catalog.ErrNoTokenizer) {
			t.Fatalf("err = %v, want ErrNoTokenizer", err)
		}
	})
	t.Run("a Qwen3 model without files keeps the built-in tokenizer", func(t *testing.T) {
		tok, _, err := specTokenizers(Config{HFCache: t.TempDir()}, []hruntime.Spec{spec("gpu0", "qwen3-8b")})
		if err != nil || tok != builtin {
			t.Fatalf("tokenizer %p, err %v; want the built-in %p", tok, err, builtin)
		}
	})
	t.Run("models that tokenize differently are not served together", func(t *testing.T) {
		_, _, err := specTokenizers(Config{HFCache: hfCache}, []hruntime.Spec{spec("gpu0", llama), spec("gpu1", "qwen3-8b")})
		if err == nil || !strings.Contains(err.Error(), "tokenize differently") {
			t.Fatalf("err = %v", err)
		}
	})
}

func TestEngineEnvPointsAtTheHFCache(t *testing.T) {
	env := []string{"PATH=/bin", "HF_HOME=/elsewhere", "HF_HUB_CACHE=/elsewhere/hub", "HF_TOKEN=x"}
	got := engineEnv(Config{HFCache: "/data/hf"}, env)
	want := []string{"PATH=/bin", "HF_TOKEN=x", "HF_HOME=/data/hf", "HF_HUB_CACHE=" + filepath.Join("/data/hf", "hub")}
	if !slices.Equal(got, want) {
		t.Fatalf("engineEnv = %q, want %q", got, want)
	}
	if got := engineEnv(Config{}, env); !slices.Equal(got, env) {
		t.Fatalf("without --hf-cache the environment changed: %q", got)
	}
}
