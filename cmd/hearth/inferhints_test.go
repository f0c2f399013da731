package main

import (
	"errors"
	"io"
	"testing"
)

// hearth up --infer-hints reaches the daemon's configuration: on by
// default, off to compare, anything else refused.
func TestUpInferHintsFlag(t *testing.T) {
	for _, tc := range []struct {
		args []string
		off  bool
		bad  bool
	}{
		{nil, false, false},
		{[]string{"--infer-hints", "on"}, false, false},
		{[]string{"--infer-hints", "off"}, true, false},
		{[]string{"--infer-hints", "no"}, false, true},
	} {
		env := &environment{stderr: io.Discard, getenv: func(string) string { return "" }}
		cfg, err := parseUpFlags(env, append([]string{"--sim", "1x4090", "--data-dir", t.TempDir()}, tc.args...))
		if tc.bad {
			if !errors.Is(err, errUsage) {
				t.Errorf("%q: error %v, want a usage error", tc.args, err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%q: %v", tc.args, err)
		}
		if cfg.NoInferredHints != tc.off {
			t.Errorf("%q: NoInferredHints %v, want %v", tc.args, cfg.NoInferredHints, tc.off)
		}
	}
}
