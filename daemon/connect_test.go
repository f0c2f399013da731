package daemon

import (
	"bytes"
	"strings"
	"testing"

	"github.com/hearth-llm/hearth/console"
)

// The terminal says about keys what the Connect page says.
func TestPrintedSettingsTellTheKeyStory(t *testing.T) {
	for _, required := range []bool{false, true} {
		var out bytes.Buffer
		printConnectSettings(&out, "http://127.0.0.1:8000", []string{"qwen3-14b-fp8"}, 0, required)
		key := console.OpenKey
		if required {
			key = console.KeyPlaceholder
		}
		for _, want := range []string{console.KeyNote(required), "export HEARTH_API_KEY='" + key + "'", "ANTHROPIC_AUTH_TOKEN='" + key + "'"} {
			if !strings.Contains(out.String(), want) {
				t.Errorf("required=%v: settings lack %q:\n%s", required, want, out.String())
			}
		}
	}
}
