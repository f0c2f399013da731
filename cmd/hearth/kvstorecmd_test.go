package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/hearth-llm/hearth/kvbm"
)

// TestKVStoreCommand: hearth kvstore lists the store's spaces and removes
// one model's blocks, leaving the others'.
func TestKVStoreCommand(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "kvstore")
	st, err := kvbm.OpenStore(kvbm.StoreConfig{Dir: dir, CapacityBytes: 1 << 30})
	if err != nil {
		t.Fatal(err)
	}
	for model, n := range map[string]int{"qwen3-14b-fp8": 3, "qwen3-8b": 2} {
		sp := st.Space(kvbm.SpaceName("vllm", model, 16))
		for i := range n {
			if err := sp.Store(uint64(i+1), 4096); err != nil {
				t.Fatal(err)
			}
		}
	}
	st.Close()

	out, errOut, err := runHearth(t, "", "kvstore", "ls", "--kv-store-dir", dir)
	if err != nil || !strings.Contains(out, "vllm-qwen3-14b-fp8-b16") || !strings.Contains(out, "vllm-qwen3-8b-b16") {
		t.Fatalf("kvstore ls: %v\n%s%s", err, out, errOut)
	}
	// Only the whole model name removes it: a part of it matches nothing.
	for _, part := range []string{"fp8", "14b-fp8", "qwen3", "vllm-qwen3-14b-fp8"} {
		if out, _, err := runHearth(t, "", "kvstore", "rm", part, "--kv-store-dir", dir); err == nil || strings.Contains(out, "removed") {
			t.Fatalf("kvstore rm %s: %v\n%s", part, err, out)
		}
	}
	out, errOut, err = runHearth(t, "", "kvstore", "rm", "qwen3-14b-fp8", "--kv-store-dir", dir)
	if err != nil || !strings.Contains(out, "removed vllm-qwen3-14b-fp8-b16: 3 blocks") {
		t.Fatalf("kvstore rm: %v\n%s%s", err, out, errOut)
	}
	if _, _, err := runHearth(t, "", "kvstore", "rm", "qwen3-14b-fp8", "--kv-store-dir", dir); err == nil {
		t.Error("removing a model the store no longer holds succeeded")
	}
	out, _, _ = runHearth(t, "", "kvstore", "ls", "--kv-store-dir", dir)
	if strings.Contains(out, "qwen3-14b-fp8") || !strings.Contains(out, "vllm-qwen3-8b-b16  2") {
		t.Errorf("after rm:\n%s", out)
	}
}
