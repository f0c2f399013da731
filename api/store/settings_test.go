package store

import (
	"context"
	"path/filepath"
	"reflect"
	"testing"
	"time"
)

func TestSettingsSurviveReopen(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		saves []Settings // in order; the last one is what a reopen reads
	}{
		{"policy and aliases in their order", []Settings{
			{Policy: "kv", Aliases: []Alias{{"gpt-*", "qwen3-14b"}, {"claude-*", "qwen3-8b"}, {"*", "qwen3-14b"}}},
		}},
		{"no aliases", []Settings{{Policy: "round_robin", Aliases: []Alias{}}}},
		{"the last save wins", []Settings{
			{Policy: "kv", Aliases: []Alias{{"*", "m"}}},
			{Policy: "hearth", Aliases: []Alias{{"claude-*", "m"}}},
		}},
		{"names with quotes and unicode", []Settings{{Policy: "kv", Aliases: []Alias{{`o"dd`, "modèle"}}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "hearth.db")
			s := openFile(t, path, time.Now())
			if _, saved, err := s.Settings(ctx); saved || err != nil {
				t.Fatalf("fresh database: saved=%v, %v; want nothing saved", saved, err)
			}
			for _, st := range tc.saves {
				if err := s.SaveSettings(ctx, st); err != nil {
					t.Fatal(err)
				}
			}
			s.Close()
			s = openFile(t, path, time.Now())
			defer s.Close()
			got, saved, err := s.Settings(ctx)
			want := tc.saves[len(tc.saves)-1]
			if err != nil || !saved || !reflect.DeepEqual(got, want) {
				t.Errorf("after reopen: %+v saved=%v, %v; want %+v", got, saved, err, want)
			}
		})
	}
}

// TestSettingsNilAliases: saving no aliases reads back as an empty list,
// saved, not as "never saved".
func TestSettingsNilAliases(t *testing.T) {
	ctx := context.Background()
	s := openFile(t, ":memory:", time.Now())
	defer s.Close()
	if err := s.SaveSettings(ctx, Settings{Policy: "kv"}); err != nil {
		t.Fatal(err)
	}
	got, saved, err := s.Settings(ctx)
	if err != nil || !saved || got.Policy != "kv" || got.Aliases == nil || len(got.Aliases) != 0 {
		t.Errorf("got %+v saved=%v, %v", got, saved, err)
	}
}
