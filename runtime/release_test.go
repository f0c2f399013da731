package runtime

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/hearth-llm/hearth/kvevents"
)

// TestReleaseAtStart: the release a serving engine reports (vLLM's
// /version, SGLang's /server_info) replaces the one its image's tag named
// and decides its wire facts; an engine that does not say keeps the spec's.
func TestReleaseAtStart(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		kind       Kind
		path, body string
		tag, want  string
		format     kvevents.Format
		known      bool
	}{
		{KindVLLM, "/version", `{"version":"0.20.1.dev3+gabc"}`, "", "0.20.1.dev3+gabc", kvevents.FormatArray, true},
		{KindVLLM, "/version", `{"version":"0.33.0"}`, "0.20.0", "0.33.0", kvevents.FormatMap, true},
		{KindVLLM, "/version", `{"version":"0.40.0"}`, "", "0.40.0", kvevents.FormatMap, false},
		{KindVLLM, "/nothing", ``, "0.20.0", "0.20.0", kvevents.FormatArray, true},
		{KindSGLang, "/server_info", `{"version":"0.5.19","page_size":16}`, "", "0.5.19", kvevents.FormatSGLang, true},
		{KindSGLang, "/server_info", `{"page_size":16}`, "", "", kvevents.FormatSGLangMap, true},
	} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != tc.path {
				http.NotFound(w, r)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(tc.body))
		}))
		spec := ReleaseAtStart(t.Context(), srv.Client(), srv.URL, Spec{Name: "e", Engine: tc.kind, EngineVersion: tc.tag}, slog.New(slog.DiscardHandler))
		srv.Close()
		rel, known := spec.Release()
		if spec.EngineVersion != tc.want || rel.EventFormat != tc.format || known != tc.known {
			t.Errorf("%s %s %s: version %q (%v, known %v), want %q (%v, known %v)", tc.kind, tc.path, tc.body,
				spec.EngineVersion, rel.EventFormat, known, tc.want, tc.format, tc.known)
		}
	}
}
