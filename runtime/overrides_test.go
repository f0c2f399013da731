package runtime

import (
	"strings"
	"testing"
)

func TestModelContextOf(t *testing.T) {
	tests := []struct {
		overrides string
		want      int
		err       string
	}{
		{"", 0, ""},
		{`{}`, 0, ""},
		{`{"rope_scaling":{"rope_type":"yarn","factor":4.0,"original_max_position_embeddings":32768}}`, 131072, ""},
		// Old configs name the type "type".
		{`{"rope_scaling":{"type":"yarn","factor":2,"original_max_position_embeddings":32768}}`, 65536, ""},
		// Without the original length the factor scales the native context.
		{`{"rope_scaling":{"rope_type":"dynamic","factor":2}}`, 81920, ""},
		{`{"max_position_embeddings":65536}`, 65536, ""},
		{`{"torch_dtype":"bfloat16"}`, 0, ""},
		{`{"rope_scaling":{"rope_type":"yarn","factor":0}}`, 0, "factor must be a positive number"},
		{`{"rope_scaling":{"rope_type":"yarn","factor":4,"original_max_position_embeddings":-1}}`, 0, "original_max_position_embeddings"},
		{`{"max_position_embeddings":"long"}`, 0, "model overrides"},
		{`{"rope_scaling":{"factor":1e300}}`, 0, "factor must be a positive number"},
		{`not json`, 0, "model overrides"},
	}
	for _, tt := range tests {
		got, err := ModelContextOf(tt.overrides, 40960)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("%s: %v, want an error with %q", tt.overrides, err, tt.err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("%s: %d, %v; want %d", tt.overrides, got, err, tt.want)
		}
	}
}

func FuzzModelContextOf(f *testing.F) {
	f.Add(`{"rope_scaling":{"rope_type":"yarn","factor":4.0,"original_max_position_embeddings":32768}}`, 40960)
	f.Add(`{"max_position_embeddings":1e9}`, 1)
	f.Add(`{"rope_scaling":null}`, 0)
	f.Fuzz(func(t *testing.T, overrides string, native int) {
		n, err := ModelContextOf(overrides, native)
		if err == nil && n < 0 {
			t.Errorf("%q: negative context %d", overrides, n)
		}
	})
}
