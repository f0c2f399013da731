package daemon_test

import (
	"html"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/hearth-llm/hearth/daemon"
	hruntime "github.com/hearth-llm/hearth/runtime"
	"github.com/hearth-llm/hearth/runtime/sim"
	"github.com/hearth-llm/hearth/tokenizer"
)

// TestUpCatchesAWrongTokenizer: engines that tokenize with a tokenizer
// lacking one special token of Hearth's are caught when they become
// ready, at the token where the ids first differ, in the admin API
// (hearth engines), the console's card and the Health page (hearth
// doctor's checks).
func TestUpCatchesAWrongTokenizer(t *testing.T) {
	const special = "<tool_response>"
	tok, err := tokenizer.Qwen3()
	if err != nil {
		t.Fatal(err)
	}
	toolRound := hruntime.TokenizerSamples()[1]
	text, err := tok.ApplyChatTemplate(tokenizer.ChatRequest{Messages: toolRound.Messages, Tools: toolRound.Tools, AddGenerationPrompt: true})
	if err != nil {
		t.Fatal(err)
	}
	ids := tok.Encode(text)
	wantAt := slices.Index(ids, tok.Encode(special)[0])

	baseURL, _ := serveTestUp(t, upConfig(t, "--sim", "1x4090"),
		daemon.WithSimTokenizer(func(t sim.Tokenizer) sim.Tokenizer { return sim.MisreadToken(t, special) }))

	engines := listEngines(t, baseURL)
	if len(engines) != 1 {
		t.Fatalf("engines %+v", engines)
	}
	e := engines[0]
	c := e.Tokenizer
	if c == nil || c.State != "differs" || c.Sample != toolRound.Name || c.Position == nil || *c.Position != wantAt ||
		*c.HearthID != int64(ids[wantAt]) || !strings.Contains(c.Summary, "predicted caches") {
		t.Fatalf("engine %s tokenizer check %+v, want differs in %q at %d", e.Name, c, toolRound.Name, wantAt)
	}
	if got := c.Text(); got != "differs at "+strconv.Itoa(wantAt) {
		t.Errorf("hearth engines cell %q", got)
	}

	status, body, _ := get(t, http.DefaultClient, baseURL+"/console/health")
	text = html.UnescapeString(body)
	if status != http.StatusOK || !strings.Contains(text, "tokenizer: "+e.Name) || !strings.Contains(text, "differs at token "+strconv.Itoa(wantAt)) {
		t.Errorf("Health page (%d) lacks the tokenizer check of %s", status, e.Name)
	}
	waitLive(t, baseURL, "overview", `data-label="tokenizer-note"`, "differs at token "+strconv.Itoa(wantAt))
}
