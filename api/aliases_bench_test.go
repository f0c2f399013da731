package api

import "testing"

// BenchmarkResolveModel is the request path's alias lookup: a pattern
// match behind the atomic load that SetAliases swaps.
func BenchmarkResolveModel(b *testing.B) {
	r := newModelResolver(Config{Models: []string{servedModel}, Aliases: map[string]string{
		"claude-*": servedModel, "gpt-*": servedModel, "local-model": servedModel,
	}})
	b.ReportAllocs()
	for b.Loop() {
		if _, err := r.resolve("gpt-5.5"); err != nil {
			b.Fatal(err)
		}
	}
}
