package store

import (
	"context"
	"path/filepath"
	"testing"
)

// BenchmarkCheckKey is what an API request with a stored key costs the
// store: HasKeys, then CheckKey. Both read the in-memory index of live
// keys:
//
//	go test -run '^$' -bench CheckKey ./api/store/   # 187 ns, 1 allocation
func BenchmarkCheckKey(b *testing.B) {
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(b.TempDir(), "hearth.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	var secret string
	for range 20 {
		if _, secret, err = s.CreateKey(ctx, "k"); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		if has, err := s.HasKeys(ctx); !has || err != nil {
			b.Fatal(has, err)
		}
		if _, err := s.CheckKey(ctx, secret); err != nil {
			b.Fatal(err)
		}
	}
}
