package tokenizer

import (
	"bytes"
	"compress/gzip"
	"embed"
	"fmt"
	"io"
	"sync"
)

//go:embed models/qwen3/tokenizer.json.gz models/qwen3/tokenizer_config.json.gz
var embedded embed.FS

// qwen3 loads the embedded tokenizer once, on first use.
var qwen3 = sync.OnceValues(func() (*Model, error) {
	tok, err := readGzip("models/qwen3/tokenizer.json.gz")
	if err != nil {
		return nil, err
	}
	cfg, err := readGzip("models/qwen3/tokenizer_config.json.gz")
	if err != nil {
		return nil, err
	}
	return LoadFiles(tok, cfg)
})

// Qwen3 returns the Qwen3 tokenizer and chat template built into the
// binary (shared by all Qwen3 sizes). The model is loaded once and shared.
func Qwen3() (*Model, error) { return qwen3() }

func readGzip(name string) ([]byte, error) {
	compressed, err := embedded.ReadFile(name)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(compressed))
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %s: %w", name, err)
	}
	out, err := io.ReadAll(zr)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %s: %w", name, err)
	}
	return out, nil
}
