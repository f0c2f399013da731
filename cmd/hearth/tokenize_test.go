package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hearth-llm/hearth/tokenizer"
)

func decodeLines(t *testing.T, out string) []tokenizeOutput {
	t.Helper()
	var res []tokenizeOutput
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var r tokenizeOutput
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("output line %q: %v", line, err)
		}
		res = append(res, r)
	}
	return res
}

func TestTokenizeText(t *testing.T) {
	model, err := tokenizer.Qwen3()
	if err != nil {
		t.Fatal(err)
	}
	texts := []string{"Hello, world!", "func main() {\n\treturn\n}", "<|im_start|>user\nhé<|im_end|>"}
	var in strings.Builder
	for i, text := range texts {
		line, _ := json.Marshal(map[string]any{"id": i, "text": text})
		in.Write(line)
		in.WriteString("\n\n") // blank lines are skipped
	}
	out, _, err := runHearth(t, in.String(), "tokenize")
	if err != nil {
		t.Fatalf("tokenize: %v", err)
	}
	res := decodeLines(t, out)
	if len(res) != len(texts) {
		t.Fatalf("got %d lines, want %d", len(res), len(texts))
	}
	for i, r := range res {
		if string(r.ID) != string(rune('0'+i)) {
			t.Errorf("line %d: id %s", i, r.ID)
		}
		if want := model.Encode(texts[i]); !slices.Equal(r.IDs, want) || r.Rendered != nil {
			t.Errorf("line %d: ids %v rendered %v, want %v", i, r.IDs, r.Rendered, want)
		}
	}
}

func TestTokenizeChat(t *testing.T) {
	in := `{"id":"a","messages":[{"role":"user","content":"Hello"}],"tools":null,"kwargs":{"add_generation_prompt":true}}
{"id":"b","messages":[{"role":"user","content":"Hi"}],"kwargs":{"add_generation_prompt":true,"enable_thinking":false}}
`
	out, _, err := runHearth(t, in, "tokenize", "--chat")
	if err != nil {
		t.Fatalf("tokenize --chat: %v", err)
	}
	res := decodeLines(t, out)
	if len(res) != 2 {
		t.Fatalf("got %d lines", len(res))
	}
	// Reference: transformers' apply_chat_template for Qwen3.
	if want := []uint32{151644, 872, 198, 9707, 151645, 198, 151644, 77091, 198}; !slices.Equal(res[0].IDs, want) {
		t.Errorf("ids %v, want %v", res[0].IDs, want)
	}
	if res[0].Rendered == nil || *res[0].Rendered != "<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n" {
		t.Errorf("rendered %v", res[0].Rendered)
	}
	if res[1].Rendered == nil || !strings.HasSuffix(*res[1].Rendered, "<think>\n\n</think>\n\n") {
		t.Errorf("enable_thinking=false not applied: %v", res[1].Rendered)
	}
}

func TestTokenizeReportsBadLinesAndFails(t *testing.T) {
	in := "{\"id\":1,\"text\":\"ok\"}\nnot json\n{\"id\":3}\n"
	out, _, err := runHearth(t, in, "tokenize")
	if err == nil {
		t.Fatal("no error for bad input lines")
	}
	res := decodeLines(t, out)
	if len(res) != 3 || res[0].Error != "" || !strings.Contains(res[1].Error, "line 2") || res[2].Error == "" {
		t.Fatalf("results %+v", res)
	}
}

func TestTokenizeLoadsADirectory(t *testing.T) {
	if _, _, err := runHearth(t, "", "tokenize", "--tokenizer", t.TempDir()); err == nil {
		t.Fatal("an empty directory loaded")
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "tokenizer.json"), []byte(`{"model": {"type": "Unigram"}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	_, _, err := runHearth(t, "", "tokenize", "--tokenizer", dir)
	if err == nil || !strings.Contains(err.Error(), "Unigram") {
		t.Fatalf("Unigram model: got %v", err)
	}
	if _, _, err := runHearth(t, "", "tokenize", "extra"); err == nil {
		t.Fatal("stray argument accepted")
	}
}
