package kvbm

import (
	"errors"
	"os"
	"testing"
)

// TestLoadSparse: Load verifies a sparse block without reading its holes,
// and still catches a block whose holes were written into, one cut short
// and one of another size.
func TestLoadSparse(t *testing.T) {
	const size = 2560 << 10
	tests := []struct {
		name    string
		damage  func(t *testing.T, path string)
		loadAs  int64
		wantErr error
	}{
		{"intact", nil, size, nil},
		{"data written into a hole", func(t *testing.T, path string) {
			f, err := os.OpenFile(path, os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if _, err := f.WriteAt([]byte{1}, HeaderSize+size/2); err != nil {
				t.Fatal(err)
			}
		}, size, ErrCorrupt},
		{"cut short", func(t *testing.T, path string) {
			if err := os.Truncate(path, HeaderSize+size/2); err != nil {
				t.Fatal(err)
			}
		}, size, ErrCorrupt},
		{"zeros of another size", nil, size / 2, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := OpenStore(StoreConfig{Dir: t.TempDir(), CapacityBytes: 64 << 20})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			sp := s.Space(SpaceName("vllm", "Qwen/Qwen3-14B", 16))
			if err := sp.Store(7, size); err != nil {
				t.Fatal(err)
			}
			if tt.damage != nil {
				tt.damage(t, sp.path(7))
			}
			err = sp.Load(7, tt.loadAs)
			switch {
			case tt.wantErr != nil && !errors.Is(err, tt.wantErr):
				t.Fatalf("Load = %v, want %v", err, tt.wantErr)
			case tt.wantErr == nil && tt.loadAs == size && err != nil:
				t.Fatalf("Load = %v, want nil", err)
			case tt.wantErr == nil && tt.loadAs != size && err == nil:
				t.Fatal("Load of the wrong size succeeded")
			}
			if tt.wantErr != nil && sp.Has(7) {
				t.Error("a corrupt block stays in the catalog")
			}
		})
	}
}

func TestSpaceName(t *testing.T) {
	if got, want := SpaceName("vllm", "Qwen/Qwen3-14B-FP8", 16), "vllm-Qwen_Qwen3-14B-FP8-b16"; got != want {
		t.Errorf("SpaceName = %q, want %q", got, want)
	}
}

func BenchmarkLoadSparse(b *testing.B) {
	s, err := OpenStore(StoreConfig{Dir: b.TempDir(), CapacityBytes: 1 << 30})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	sp := s.Space("bench")
	const blocks, size = 64, 2560 << 10
	for i := range blocks {
		if err := sp.Store(uint64(i), size); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if err := sp.Load(uint64(i%blocks), size); err != nil {
			b.Fatal(err)
		}
	}
}

// TestSpaceOfModel: a model's spaces are found by its whole name only.
func TestSpaceOfModel(t *testing.T) {
	space := SpaceName("vllm", "qwen3-14b-fp8", 16)
	for model, want := range map[string]bool{
		"qwen3-14b-fp8": true, "fp8": false, "14b-fp8": false, "qwen3": false,
		"qwen3-14b": false, "vllm-qwen3-14b-fp8": false, "": false,
	} {
		if got := SpaceOfModel(space, model); got != want {
			t.Errorf("SpaceOfModel(%q, %q) = %v, want %v", space, model, got, want)
		}
	}
	if !SpaceOfModel(SpaceName("sglang", "org/model:v1", 32), "org/model:v1") {
		t.Error("a sanitized model name does not find its space")
	}
	if SpaceOfModel("vllm-m-bx", "m") || SpaceOfModel("vllm-m-b", "m") {
		t.Error("a space without a block size matched")
	}
}
