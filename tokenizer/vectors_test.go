package tokenizer

import (
	"bufio"
	"compress/gzip"
	"encoding/json"
	"os"
	"slices"
	"testing"
)

// readJSONLines decodes every line of a gzipped JSON-lines file in testdata.
func readJSONLines[T any](t testing.TB, name string) []T {
	t.Helper()
	f, err := os.Open("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(zr)
	sc.Buffer(nil, 64<<20)
	var out []T
	for sc.Scan() {
		var v T
		if err := json.Unmarshal(sc.Bytes(), &v); err != nil {
			t.Fatalf("%s line %d: %v", name, len(out)+1, err)
		}
		out = append(out, v)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(out) == 0 {
		t.Fatalf("%s is empty", name)
	}
	return out
}

type tokenizeVector struct {
	ID   string   `json:"id"`
	Text string   `json:"text"`
	IDs  []uint32 `json:"ids"`
}

type chatVector struct {
	ID       string          `json:"id"`
	Messages json.RawMessage `json:"messages"`
	Tools    json.RawMessage `json:"tools"`
	Kwargs   map[string]any  `json:"kwargs"`
	Rendered string          `json:"rendered"`
	IDs      []uint32        `json:"ids"`
}

func (v chatVector) request() ChatRequest {
	req := ChatRequest{Messages: v.Messages, Tools: v.Tools, Kwargs: map[string]any{}}
	for k, val := range v.Kwargs {
		if k == "add_generation_prompt" {
			req.AddGenerationPrompt = val == true
			continue
		}
		req.Kwargs[k] = val
	}
	return req
}

func qwen3Model(t testing.TB) *Model {
	t.Helper()
	m, err := Qwen3()
	if err != nil {
		t.Fatalf("load Qwen3: %v", err)
	}
	return m
}

// firstDiff returns the first index where a and b differ.
func firstDiff(a, b []uint32) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

func TestEncodeMatchesReferenceVectors(t *testing.T) {
	m := qwen3Model(t)
	for _, v := range readJSONLines[tokenizeVector](t, "tokenize.jsonl.gz") {
		got := m.Encode(v.Text)
		if !slices.Equal(got, v.IDs) {
			i := firstDiff(got, v.IDs)
			t.Errorf("%s: ids differ at %d of %d/%d: got %v, want %v (text %q)", v.ID, i, len(got), len(v.IDs),
				got[i:min(i+5, len(got))], v.IDs[i:min(i+5, len(v.IDs))], v.Text[:min(len(v.Text), 80)])
		}
	}
}

func TestDecodeInvertsReferenceVectors(t *testing.T) {
	m := qwen3Model(t)
	for _, v := range readJSONLines[tokenizeVector](t, "tokenize.jsonl.gz") {
		// Encode normalizes to NFC, so decoding gives the NFC text back.
		want := normalizeLikeEncode(m, v.Text)
		if got := m.Decode(v.IDs); got != want {
			t.Errorf("%s: Decode = %q, want %q", v.ID, got, want)
		}
	}
}

func TestChatTemplateMatchesReferenceVectors(t *testing.T) {
	m := qwen3Model(t)
	for _, v := range readJSONLines[chatVector](t, "chat.jsonl.gz") {
		rendered, ids, err := m.EncodeChat(v.request())
		if err != nil {
			t.Errorf("%s: %v", v.ID, err)
			continue
		}
		if rendered != v.Rendered {
			i := 0
			for i < min(len(rendered), len(v.Rendered)) && rendered[i] == v.Rendered[i] {
				i++
			}
			t.Errorf("%s: rendered differs at byte %d:\n got %q\nwant %q", v.ID, i,
				rendered[max(0, i-40):min(len(rendered), i+60)], v.Rendered[max(0, i-40):min(len(v.Rendered), i+60)])
			continue
		}
		if !slices.Equal(ids, v.IDs) {
			t.Errorf("%s: ids differ at %d", v.ID, firstDiff(ids, v.IDs))
		}
	}
}
