package kvevents

import "testing"

// TestInPrefixGroup: which events' blocks are a prompt's prefix, by what
// they say of their KV-cache group.
func TestInPrefixGroup(t *testing.T) {
	tests := []struct {
		name string
		ev   Event
		want bool
	}{
		{"nothing said", Event{}, true},
		{"group 1, no kind", Event{GroupIdx: 1}, false},
		{"full attention in group 1", Event{GroupIdx: 1, SpecKind: []byte("full_attention")}, true},
		{"MLA", Event{SpecKind: []byte("mla_attention")}, true},
		{"sink tokens", Event{SpecKind: []byte("sink_full_attention")}, true},
		{"sliding window in group 0", Event{SpecKind: []byte("sliding_window")}, false},
		{"chunked local", Event{SpecKind: []byte("chunked_local_attention")}, false},
		{"mamba", Event{GroupIdx: 2, SpecKind: []byte("mamba")}, false},
		{"SGLang full", Event{ComponentType: []byte("FULL")}, true},
		{"SGLang sliding window", Event{ComponentType: []byte("swa")}, false},
		{"SGLang mamba in group 0", Event{ComponentType: []byte("mamba")}, false},
	}
	for _, tc := range tests {
		if got := tc.ev.InPrefixGroup(); got != tc.want {
			t.Errorf("%s: InPrefixGroup = %v, want %v", tc.name, got, tc.want)
		}
	}
}
